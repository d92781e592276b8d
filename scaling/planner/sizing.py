"""The micro-batch model's sizing: per-stage demand (FLIP-271 target capacity), the tasks a stage
runs on ``C`` cores, the one utilization formula (``busy_share``) that the planner
(``scaling.planner.microbatch``) sizes with and the web app's frozen prediction shows, and the first two
steps of the planner: evaluate the stages (``evaluate_stages``) and size the cores (``size_cores``).
Every step is linear in the number of stages (per executor count it looks at)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property

from scaling.planner.ds2 import (
    TargetRates,
    effective_busy_ms_per_s,
    is_processing_backlog,
    propagate_target_rates,
    vertex_true_rates,
)
from scaling.planner.vertex_scaler import (
    align_parallelism,
    alignment_base,
    observed_scaling_coefficient,
    parallelism_bounds,
    pinned_reason,
)
from scaling.policy.numbers import INF, ceil_exact
from scaling.policy.policy import Policy, effective_band
from scaling.values.metrics import ClusterState, VertexMetrics, task_skew
from scaling.values.reasons import Limit, PlanLimit
from scaling.values.state import ScalerState
from scaling.values.topology import Topology

MAX_OVERHEAD_FRACTION = 0.9
EXECUTORS_KEY = "executors"
"""The key of the executor count's pending scale-down and records in ``ScalerState``."""
RETENTION_WARNING_FRACTION = 0.8
"""Warn when the backlog's age reaches this share of a source's retention."""
SKEW_REPORTED = 1.1
"""A stage whose busiest task is busy more than this many times its mean task is reported as skewed
(``Limit.BOTTLENECK`` when it stays above the utilization target; the job page's DAG). Below it is
the jitter of short tasks: Spark 4.3 on local[2] measured x1.03-1.08 on even stages of 0.1-1 s tasks
and up to x1.3 on tasks of a few ms (tests/fixtures/spark-4.3.0-skew)."""
SEARCH_LIMIT = 4096
HELPS = 0.01
"""When the target is out of reach, cores that lower the predicted utilization by less than this
(one point of the trigger interval) in total are not added: they cannot help."""
NOISE = 1e-9
"""A step whose efficiency is within this of ``scale_up_min_efficiency`` is not material: on a job
``U = P + K / c`` every count of the window then scores the threshold up to rounding, and rounding
must not pick a count far ahead."""
GAIN_WINDOW = 2
"""A step from ``c`` executors is to a count in ``(c, GAIN_WINDOW × c]`` (``gains_stop``): a guard
for task slots that grow in jumps (counts that change no stage's slots are no step of their own)."""


@dataclass(frozen=True)
class _Stage:
    """One stage's numbers: per-core true rates (records per busy core-second), busy cores, the
    demand at the target rate alone (``base``), for the scale-up check (``need_up``: target +
    catch-up) and for the scale-down check (``need_target``: + restart), in busy core-seconds per
    second, the sizing demand (``need_sized``, see ``sizing_demand``), and the skew (max / mean busy)."""

    tpr: float
    tor: float
    busy: float
    lam: float
    base: float
    need_up: float
    need_target: float
    skew: float
    need_sized: float = 0.0


def sizing_demand(base: float, extra: float, utilization_target: float) -> float:
    """The demand a plan sizes cores for, busy core-seconds per second: ``max(base, u × (base + extra))``, ``base``
    at the target rate (λ / TPR) and ``extra`` of the catch-up and restart rates, both ≥ 0, ``u`` the utilization
    target in (0, 1]; where this differs from Flink: docs/ARCHITECTURE.md, "Sizing for the catch-up"."""
    return max(base, utilization_target * (base + extra))


def _tasks(topology: Topology, vertex_id: str, cores: int, policy: Policy) -> tuple[int, bool]:
    """The tasks a stage runs with ``cores`` cores: one per core for an adjustable stage (bounded by
    its partitions / max parallelism, aligned to a source's partitions within the cores), else its
    current tasks. Returns (tasks, capped): ``capped`` when the bound keeps it below the cores."""
    vertex = topology.vertex(vertex_id)
    if pinned_reason(topology, vertex, policy) is not None:
        return vertex.parallelism, vertex.parallelism < cores
    lower, upper = parallelism_bounds(vertex, policy, vertex.parallelism)
    tasks = max(lower, min(upper, cores))
    base = alignment_base(topology, vertex)
    if base is not None and base[1] == "partitions":
        mode, legacy = policy.alignment_mode
        tasks, _ = align_parallelism(vertex.parallelism, tasks, n=base[0], lower=lower,
                                     upper=max(lower, min(upper, cores)), mode=mode, legacy=legacy)
    return tasks, tasks < cores


def overhead_share(overhead_s: float, trigger_interval_s: float) -> float:
    """The batch overhead's share of the trigger interval, ``overhead_s / trigger_interval_s`` (seconds
    over seconds), capped at ``MAX_OVERHEAD_FRACTION`` (a batch of nothing but overhead would leave no
    capacity to size or compare with); a trigger interval of 0 counts as 1 s."""
    return min(MAX_OVERHEAD_FRACTION, overhead_s / (trigger_interval_s or 1.0))


def busy_share(demands: Iterable[tuple[float, int]], cores: int, overhead: float) -> float:
    """Predicted share of the trigger interval a batch keeps busy (0..1 when it fits), the micro-batch model's one
    utilization formula (the planner sizes with it, ``webapp.proposals.predictions`` shows it): ``Σ_v need_v /
    min(tasks_v, C) / (1 − overhead)`` for ``demands`` (per stage: need in busy core-seconds per second, tasks)
    on ``cores`` C task slots, ``overhead`` the batch overhead's share of the trigger interval, in [0, 1)."""
    total = 0.0
    for need, tasks in demands:
        if need > 0:
            slots = min(tasks, cores)
            total += need / slots if slots > 0 else INF
    return total / (1.0 - overhead)


def _utilization(stages: Mapping[str, _Stage], tasks: Mapping[str, int], cores: int, overhead: float,
                 attr: str) -> float:
    """``busy_share`` of the demand ``attr`` of every stage with ``tasks``."""
    return busy_share(((getattr(st, attr), tasks[vid]) for vid, st in stages.items()), cores, overhead)


@dataclass
class MicroBatchModel:
    """A micro-batch job evaluated (``evaluate_stages``): its stages' numbers and the band.

    Attributes:
        stages: per stage id, in topological order, its ``_Stage``.
        rates: per stage id, the target, catch-up and restart rates (DS2 Eq. 8, FLIP-271).
        overhead: the batch overhead's share of the trigger interval.
        low / high: the utilization band ([0, 1] in backlog mode, FLIP-271).
        alpha: the observed scaling coefficient of the executor count (1.0 when off).
        busy_total: busy core-seconds per second of the job now.
    """

    topology: Topology
    metrics: Mapping[str, VertexMetrics]
    cluster: ClusterState
    policy: Policy
    rates: Mapping[str, TargetRates]
    stages: dict[str, _Stage]
    overhead: float
    low: float
    high: float
    backlog_mode: bool
    restart_s: float
    alpha: float
    busy_total: float
    _tasks: dict[int, tuple[dict[str, int], dict[str, bool]]] = field(default_factory=dict, repr=False)

    @cached_property
    def tasks_now(self) -> dict[str, int]:
        """Each stage's tasks now."""
        return {v.id: v.parallelism for v in self.topology.vertices}

    def tasks_at(self, cores: int) -> dict[str, int]:
        """Each stage's tasks on ``cores`` cores (``_tasks``), computed once per core count."""
        return self._tasks_and_caps(cores)[0]

    def capped_at(self, cores: int) -> dict[str, bool]:
        """Whether each stage's bound keeps its tasks below ``cores`` (``_tasks``)."""
        return self._tasks_and_caps(cores)[1]

    def _tasks_and_caps(self, cores: int) -> tuple[dict[str, int], dict[str, bool]]:
        if cores not in self._tasks:
            found = {vid: _tasks(self.topology, vid, cores, self.policy) for vid in self.stages}
            self._tasks[cores] = ({vid: t for vid, (t, _) in found.items()}, {vid: c for vid, (_, c) in found.items()})
        return self._tasks[cores]

    def now(self, attr: str) -> float:
        """``U`` of the demand ``attr`` on the running cores and tasks."""
        return _utilization(self.stages, self.tasks_now, self.cluster.cores, self.overhead, attr)

    def at(self, cores: int, attr: str) -> float:
        """``U(cores)`` of the demand ``attr`` with each stage's tasks at ``cores``, divided by the
        observed scaling coefficient for more cores than now."""
        u_at = _utilization(self.stages, self.tasks_at(cores), cores, self.overhead, attr)
        return u_at / self.alpha if cores > self.cluster.cores else u_at


def evaluate_stages(topology: Topology, metrics: Mapping[str, VertexMetrics], cluster: ClusterState,
                    policy: Policy, state: ScalerState | None) -> MicroBatchModel:
    """Step 1: every stage's per-core true rates (DS2 Eq. 1, the busiest task's busy time when
    given: FLIP-271 MAX aggregation; no input → infinite), its busy cores, its demands (``_Stage``),
    the batch overhead, backlog mode and the band, and the executor count's observed scaling
    coefficient (Flink ``JobVertexScaler.calculateObservedScalingCoefficient``, FLINK-30571's
    follow-up): fitted to the job's past rescales, α < 1 says more cores give less than linear gain.
    Raises ``KeyError`` when a stage has no metrics."""
    restart_s = state.restart_time_s(policy) if state is not None else policy.restart_time_s
    rates = propagate_target_rates(topology, metrics, policy, restart_time_s=restart_s)
    backlog_mode = is_processing_backlog(topology, metrics, policy)
    overhead_s = max((m.batch_overhead_s for m in metrics.values()), default=0.0)
    stages = {vid: _stage(topology.vertex(vid).parallelism, metrics[vid], rates[vid], policy.utilization_target)
              for vid in topology.order}
    alpha = 1.0
    if policy.observed_scalability_enabled and state is not None:
        alpha = observed_scaling_coefficient(state.history_of(EXECUTORS_KEY), policy)
    low, high = effective_band(policy.band, backlog_mode)
    return MicroBatchModel(topology, metrics, cluster, policy, rates, stages,
                           overhead_share(overhead_s, cluster.trigger_interval_s), low, high, backlog_mode, restart_s,
                           alpha, sum(st.busy for st in stages.values()))


def _stage(tasks: int, m: VertexMetrics, r: TargetRates, target_u: float) -> _Stage:
    """One stage's numbers (``_Stage``) from its metrics and target rates; per busy core."""
    tpr_total, tor_total = vertex_true_rates(m)
    tpr, tor = tpr_total / tasks, tor_total / tasks
    busy = (m.busy_time_ms_per_s / 1000.0 * tasks if m.busy_time_ms_per_s is not None
            and m.true_processing_rate is None else ((m.records_in_per_s or 0.0) / tpr if tpr < INF else 0.0))
    lam = r.target_data_rate + r.catch_up_data_rate
    finite = 0 < tpr < INF
    skew = task_skew(effective_busy_ms_per_s(m), m.busy_time_ms_per_s or 0.0)
    base = r.target_data_rate / tpr if finite else 0.0
    need_target = (lam + r.restart_data_rate) / tpr if finite else 0.0
    return _Stage(tpr, tor, busy, lam, base, lam / tpr if finite else 0.0, need_target, skew,
                  sizing_demand(base, need_target - base, target_u))


@dataclass(frozen=True)
class Sizing:
    """Step 2's outcome: ``executors`` sized; ``chosen`` False when no count reached the target
    (then ``best_u`` is the sized utilization at the last count looked at, and ``at_limit`` says
    cores still helped there); ``cores_needed`` is C* = ceil(Σ sized need / u / (1 − overhead))."""

    executors: int
    chosen: bool
    best_u: float
    at_limit: bool
    cores_needed: int


def size_cores(job: MicroBatchModel) -> Sizing:
    """Step 2: the smallest executor count whose predicted utilization of the sizing demand
    (``sizing_demand``) is at most the target (FLIP-271 target utilization), within [min, max]
    executors; cores that cannot help are not added (a pinned, bounded or skewed stage limits the
    job: the fewest counts within ``HELPS`` of the lowest ``U``). No fewer cores reach the target
    than Σ need / target / (1 − overhead), so the search starts there and looks at most
    ``SEARCH_LIMIT`` counts. When the catch-up would leave the target rate below the band,
    ``_fewer_within_band`` takes fewer executors."""
    cluster, target_u, overhead = job.cluster, job.policy.utilization_target, job.overhead
    cpe = cluster.cores_per_executor
    lo_exec, hi_exec = cluster.min_executors, max(cluster.max_executors, cluster.min_executors)
    sized_need = sum(st.need_sized for st in job.stages.values())
    first = lo_exec
    if 0 < sized_need < INF:
        first = min(hi_exec, max(lo_exec, ceil_exact(sized_need / target_u / (1.0 - overhead) / cpe) - 1))
    last = min(hi_exec, first + SEARCH_LIMIT)
    cores_needed = max(1, ceil_exact(sized_need / target_u / (1.0 - overhead))) if sized_need < INF else hi_exec * cpe
    predicted: list[float] = []
    for executors in range(first, last + 1):
        predicted.append(job.at(executors * cpe, "need_sized"))
        if predicted[-1] <= target_u:
            return Sizing(_fewer_within_band(job, executors), True, predicted[-1], False, cores_needed)
    best_u = predicted[-1]
    best = first + next(k for k, u in enumerate(predicted) if u <= best_u + HELPS or u == best_u)
    return Sizing(best, False, best_u, best >= last, cores_needed)


def _fewer_within_band(job: MicroBatchModel, chosen: int) -> int:
    """Fewer executors than ``chosen`` when the catch-up and restart rates would leave the target rate below the
    band (the next evaluation would scale down again): the most below ``chosen`` whose utilization at the target
    rate lies in [low, target], so the catch-up drains with the band's headroom; none: ``chosen``. In backlog
    mode ``low`` is 0 and Flink's sizing stands."""
    cpe, target_u = job.cluster.cores_per_executor, job.policy.utilization_target
    if job.at(chosen * cpe, "base") >= job.low:
        return chosen
    for fewer in range(chosen - 1, job.cluster.min_executors - 1, -1):
        u_base = job.at(fewer * cpe, "base")
        if u_base > target_u:
            break
        if u_base >= job.low:
            return fewer
    return chosen


def step_efficiency(u_from: float, u_to: float, cores_from: int, cores_to: int) -> float:
    """The share of linear scaling's gain that ``cores_from`` → ``cores_to`` (more) cores bring to the predicted
    utilization (shares of the trigger interval, ``busy_share``): ``(U(c) − U(c′)) / (U(c) × (1 − c / c′))``; 1.0
    when ``U(c)`` is 0, or infinite and ``U(c′)`` finite (0.0 if both are infinite). docs/ARCHITECTURE.md,
    "Diminishing returns", works it for a job ``U = P + K / c`` (Amdahl's law)."""
    if u_from <= 0.0:
        return 1.0
    if u_from == INF:
        return 1.0 if u_to < INF else 0.0
    return (u_from - u_to) / (u_from * (1.0 - cores_from / cores_to))


def gains_stop(job: MicroBatchModel, start: int, wanted: int) -> tuple[int, PlanLimit | None]:
    """Diminishing returns: executors are added from ``start`` towards ``wanted`` only while each
    step is material: some count ``n`` in ``(c, GAIN_WINDOW × c]`` has ``step_efficiency`` of the
    target rate's utilization at least ``Policy.scale_up_min_efficiency``; the walk moves to the
    first such ``n``. The utilizations are the stages' own (without the observed scaling
    coefficient, which scales every count above the current alike and cancels in the ratio).

    Returns (executors, None) when ``wanted`` is reached (or ``wanted ≤ start``, or the option is
    0), else (the executors where gains stop, a ``Limit.DIMINISHING_RETURNS``: ``cores`` there and
    ``next_cores`` one executor more, ``utilization`` and ``next_utilization`` at the target rate as
    ``MicroBatchModel.at`` predicts them, that step's ``efficiency``, ``min_efficiency``). Each count is looked at once
    per step: linear in the executors walked for a job that scales."""
    threshold = job.policy.scale_up_min_efficiency
    if threshold <= 0 or wanted <= start:
        return wanted, None
    cpe = job.cluster.cores_per_executor
    hi_exec = max(job.cluster.max_executors, job.cluster.min_executors)

    def own_u(executors: int) -> float:
        cores = executors * cpe
        return _utilization(job.stages, job.tasks_at(cores), cores, job.overhead, "base")

    at = start
    while at < wanted:
        u_at = own_u(at)
        window = range(at + 1, min(hi_exec, GAIN_WINDOW * at, at + SEARCH_LIMIT) + 1)
        step = next((n for n in window if step_efficiency(u_at, own_u(n), at, n) >= threshold + NOISE), None)
        if step is None:
            nxt = at + 1
            return at, PlanLimit(Limit.DIMINISHING_RETURNS, None, {
                "cores": at * cpe, "utilization": job.at(at * cpe, "base"), "next_cores": nxt * cpe,
                "next_utilization": job.at(nxt * cpe, "base"),
                "efficiency": step_efficiency(u_at, own_u(nxt), at, nxt), "min_efficiency": threshold})
        at = step
    return wanted, None
