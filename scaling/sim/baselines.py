"""The alternatives the benchmark compares ``ds2`` with: ``DhalionPolicy`` (Floratou et al., VLDB 2017: scale
the vertex initiating the backpressure by ``1 / (1 − f)``, at most 4×, then wait 180 s), ``UniformPolicy``
(job-wide scaling on CPU utilization, as a Kubernetes HPA: ``ceil(current × utilization / target)``, a 10%
tolerance, a 300 s scale-down stabilization window), and ``oracle_configs`` / ``ScheduleController`` (the
hindsight-optimal oracle and static provisioning for the peak, which know the whole load trace and the true
capacity curves). The two policies follow ``scaling.planner.algorithms.ScalingPolicy`` (``plan(request) ->
JobPlan``) but are not in the production registry, and read only the metrics the collector produces. What
each takes from its source and adds: docs/ARCHITECTURE.md, "The benchmark's baselines".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from scaling.planner.continuous import plan_job
from scaling.planner.microbatch import plan_micro_batch
from scaling.planner.vertex_scaler import parallelism_bounds, pinned_reason
from scaling.policy.policy import Policy
from scaling.sim.continuous_engine import vertex_capacity_per_s
from scaling.sim.engine import Config, Observation, capacity_per_s
from scaling.sim.model import SimJob, SimSettings
from scaling.sim.workloads import Trace
from scaling.values.metrics import VertexMetrics
from scaling.values.mode import Mode
from scaling.values.plan import JobPlan
from scaling.values.reasons import Decision, PlanReason, Reason
from scaling.values.request import PlanRequest
from scaling.values.state import PendingScaleDown, ScalingRecord
from scaling.values.topology import Topology

JOB_KEY = "job"
"""The key of job-wide records and pending scale-downs in ``ScalerState``."""


def _base_plan(request: PlanRequest) -> JobPlan:
    """The stateless DS2 plan, for its per-vertex evaluation (shown, not followed)."""
    if request.mode == Mode.MICRO_BATCH and request.cluster is not None:
        return plan_micro_batch(request.topology, request.metrics, request.cluster, request.policy,
                                batch_duration_s=request.batch_duration_s, now_s=request.now_s)
    return plan_job(request.topology, request.metrics, request.policy, None, request.now_s)


def _result(request: PlanRequest, base: JobPlan, algorithm: str, proposed: dict[str, int],
            executors: int | None, reasons: tuple[Reason, ...], *, record: bool) -> JobPlan:
    """A plan proposing ``proposed`` (vertex → parallelism) and ``executors``; no change when equal."""
    current = {v.id: v.parallelism for v in request.topology.vertices}
    vertices = tuple(replace(v, proposed=proposed.get(v.vertex_id, v.current), recommended=proposed.get(
        v.vertex_id, v.current)) for v in base.vertices)
    executors_current = request.cluster.executors if request.cluster is not None else None
    executors = executors_current if executors is None else executors
    changes = executors != executors_current or any(proposed.get(k, v) != v for k, v in current.items())
    state = request.state
    if changes and record:
        state = state.with_records((ScalingRecord(request.now_s, JOB_KEY, 0, 1, 0.0, 0.0),))
    return replace(base, decision=Decision.SCALE if changes else Decision.NO_CHANGE, reasons=reasons, vertices=vertices,
                   executors_current=executors_current, executors_proposed=executors, algorithm=algorithm,
                   next_state=state)


def backpressure_fraction(topology: Topology, metrics: dict[str, VertexMetrics]) -> float:
    """The share of the arriving records the job does not process: over the sources,
    ``backlog growth / (records in + backlog growth)``. It is the fraction of time the sources are
    blocked by backpressure (Dhalion's backpressure ratio), from the collector's metrics."""
    arriving = growth = 0.0
    for vid in topology.order:
        if topology.is_source(vid):
            m = metrics[vid]
            growth += m.backlog_growth_per_s
            arriving += (m.records_in_per_s or 0.0) + m.backlog_growth_per_s
    return max(0.0, growth / arriving) if arriving > 0 else 0.0


@dataclass
class DhalionPolicy:
    """Dhalion-style backpressure policy.

    Args:
        saturated_ms_per_s: a vertex busy at least this much is saturated (initiates backpressure).
        backpressure_threshold: the job is backpressured above this backpressure fraction.
        wait_s: seconds to wait after an action before the next one.
    """

    saturated_ms_per_s: float = 900.0
    backpressure_threshold: float = 0.05
    wait_s: float = 180.0
    max_factor: float = 4.0
    name: str = "dhalion"

    def scale_up_factor(self, fraction: float) -> float:
        """Heron ``ScaleUpResolver``: ``1 / (1 − f)``, capped at ``max_factor`` (4×)."""
        return self.max_factor if fraction >= 1.0 - 1.0 / self.max_factor else 1.0 / (1.0 - fraction)

    def plan(self, request: PlanRequest) -> JobPlan:
        base = _base_plan(request)
        topology, metrics, policy = request.topology, request.metrics, request.policy
        last = request.state.last_record(JOB_KEY)
        if last is not None and request.now_s - last.at_s < self.wait_s:
            return _result(request, base, self.name, {}, None,
                           (Reason(PlanReason.WAITING_AFTER_ACTION, None, {"wait_s": self.wait_s,
                                                                            "last_at_s": last.at_s}),), record=False)
        fraction = backpressure_fraction(topology, dict(metrics))
        adjustable = [vid for vid in topology.order if pinned_reason(topology, topology.vertex(vid), policy) is None]
        if request.mode == Mode.MICRO_BATCH and request.cluster is not None:
            return self._micro_batch(request, base, fraction, adjustable)
        if fraction > self.backpressure_threshold:
            saturated = [vid for vid in adjustable if (metrics[vid].busy_time_ms_per_s or 0) >= self.saturated_ms_per_s]
            target = saturated[0] if saturated else max(adjustable, key=lambda v: metrics[v].busy_time_ms_per_s or 0)
            vertex = topology.vertex(target)
            lower, upper = parallelism_bounds(vertex, policy)
            scaled = math.ceil(vertex.parallelism * self.scale_up_factor(fraction))
            new = min(upper, max(vertex.parallelism + 1, scaled))
            return _result(request, base, self.name, {target: new}, None, (Reason(PlanReason.BACKPRESSURE, target, {
                "fraction": fraction, "current": vertex.parallelism, "new": new}),), record=True)
        low = policy.band[0] * 1000.0
        idle = [vid for vid in adjustable if (metrics[vid].busy_time_ms_per_s or 0) < low
                and topology.vertex(vid).parallelism > 1]
        if idle:
            target = min(idle, key=lambda v: metrics[v].busy_time_ms_per_s or 0)
            vertex = topology.vertex(target)
            busy = (metrics[target].busy_time_ms_per_s or 0) / 1000.0
            lower, _ = parallelism_bounds(vertex, policy)
            new = max(lower, math.ceil(vertex.parallelism * busy / policy.utilization_target))
            if new < vertex.parallelism:
                return _result(request, base, self.name, {target: new}, None, (Reason(
                    PlanReason.OVER_PROVISIONED, target, {"busy": busy, "current": vertex.parallelism, "new": new}),),
                    record=True)
        return _result(request, base, self.name, {}, None, (Reason(PlanReason.NO_BACKPRESSURE),), record=False)

    def _micro_batch(self, request: PlanRequest, base: JobPlan, fraction: float, adjustable: list[str]) -> JobPlan:
        cluster, metrics, policy = request.cluster, request.metrics, request.policy
        assert cluster is not None
        if fraction > self.backpressure_threshold:
            executors = min(cluster.max_executors,
                            max(cluster.executors + 1, math.ceil(cluster.executors * self.scale_up_factor(fraction))))
            busiest = max(adjustable, key=lambda v: (metrics[v].busy_time_ms_per_s or 0)
                          * request.topology.vertex(v).parallelism) if adjustable else None
            proposed = {}
            if busiest is not None:
                lower, upper = parallelism_bounds(request.topology.vertex(busiest), policy)
                proposed[busiest] = max(lower, min(upper, executors * cluster.cores_per_executor))
            return _result(request, base, self.name, proposed, executors, (Reason(PlanReason.BACKPRESSURE, None, {
                "fraction": fraction, "current": cluster.executors, "new": executors, "busiest": busiest}),),
                record=True)
        utilization = base.utilization or 0.0
        if utilization < policy.band[0] and cluster.executors > cluster.min_executors:
            executors = max(cluster.min_executors,
                            math.ceil(cluster.executors * utilization / policy.utilization_target))
            if executors < cluster.executors:
                return _result(request, base, self.name, {}, executors, (Reason(PlanReason.OVER_PROVISIONED, None, {
                    "busy": utilization, "current": cluster.executors, "new": executors}),), record=True)
        return _result(request, base, self.name, {}, None, (Reason(PlanReason.NO_BACKPRESSURE),), record=False)


@dataclass
class UniformPolicy:
    """Job-wide uniform scaling on CPU utilization (Kubernetes HPA's rule).

    Args:
        tolerance: no change while ``|utilization / target − 1|`` is within it (HPA: 0.1).
        scale_down_window_s: scale down to the highest recommendation of this window (HPA: 300 s).
    """

    tolerance: float = 0.1
    scale_down_window_s: float = 300.0
    name: str = "uniform"

    def plan(self, request: PlanRequest) -> JobPlan:
        base = _base_plan(request)
        topology, metrics, policy = request.topology, request.metrics, request.policy
        if request.mode == Mode.MICRO_BATCH and request.cluster is not None:
            if not request.batch_durations_s:
                # No batch completed in the window: the busy time is missing, not zero. HPA assumes
                # 100 % for pods with missing metrics when scaling down, so it does not act.
                return replace(_result(request, base, self.name, {}, None, (Reason(PlanReason.METRICS_MISSING),),
                                       record=False), next_state=request.state)
            utilization = base.utilization or 0.0
        else:
            slots = sum(v.parallelism for v in topology.vertices)
            busy = sum((metrics[v.id].busy_time_ms_per_s or 0) / 1000.0 * v.parallelism for v in topology.vertices)
            utilization = busy / slots
        ratio = utilization / policy.utilization_target
        data = {"utilization": utilization, "target": policy.utilization_target}
        state = request.state
        pending = state.pending(JOB_KEY)
        # HPA (``horizontal.go`` ``stabilizeRecommendation``): keep the recommendations of the last
        # ``scale_down_window_s`` (a recommendation within the tolerance is 1.0, "no change"), and
        # scale down to the highest of them; a scale-up acts at once.
        now = request.now_s
        within = abs(ratio - 1.0) <= self.tolerance
        kept = tuple(r for r in (pending.recommendations if pending else ()) if r[0] > now - self.scale_down_window_s)
        kept = (*kept, (now, int(round((1.0 if within else ratio) * 1_000_000))))
        state = replace(state, pending_scale_downs=(PendingScaleDown(JOB_KEY, kept[0][0], kept),))
        if within:
            return replace(_result(request, base, self.name, {}, None, (
                Reason(PlanReason.UTILIZATION_WITHIN_TOLERANCE, None, data),), record=False), next_state=state)
        if ratio < 1.0:
            ratio = max(int(r[1]) for r in kept) / 1_000_000
            if ratio >= 1.0:
                return replace(_result(request, base, self.name, {}, None, (Reason(
                    PlanReason.UTILIZATION_STABILIZING, None, {**data, "window_s": self.scale_down_window_s}),),
                    record=False), next_state=state)
        request = replace(request, state=state)
        if request.mode == Mode.MICRO_BATCH and request.cluster is not None:
            cluster = request.cluster
            executors = max(cluster.min_executors, min(cluster.max_executors, math.ceil(cluster.executors * ratio)))
            return _result(request, base, self.name, {}, executors, (Reason(PlanReason.UTILIZATION_SCALE, None, {
                **data, "ratio": ratio, "current": cluster.executors, "new": executors}),), record=True)
        proposed = {}
        for vertex in topology.vertices:
            if pinned_reason(topology, vertex, policy) is None:
                lower, upper = parallelism_bounds(vertex, policy)
                proposed[vertex.id] = max(lower, min(upper, math.ceil(vertex.parallelism * ratio)))
        return _result(request, base, self.name, proposed, None,
                       (Reason(PlanReason.UTILIZATION_SCALE, None, {**data, "ratio": ratio}),), record=True)


def _vertex_upper(job: SimJob, vid: str, policy: Policy) -> int:
    v = job.by_id[vid]
    return min(policy.vertex_max_parallelism, v.max_parallelism, v.partitions or 10**9)


TASKS_PER_CORE = (1, 2, 3, 4)
"""The oracle tries each adjustable stage with this many tasks per core (more tasks than cores even
out a skewed stage's waves, at a per-task cost on some curves)."""


def _micro_batch_config(job: SimJob, settings: SimSettings, policy: Policy, cores: int,
                        partitions: dict[str, int] | None) -> Config:
    """The configuration of ``cores`` cores whose adjustable stages have the ``TASKS_PER_CORE``
    multiple (the same for all) that sustains the most."""
    best, best_capacity = None, -1.0
    for k in TASKS_PER_CORE:
        parallelism = {v.id: (v.parallelism if not v.adjustable else min(k * cores, _vertex_upper(job, v.id, policy)))
                       for v in job.vertices}
        parallelism.update(partitions or {})
        config = Config(parallelism, cores)
        capacity = capacity_per_s(job, config, settings)
        if capacity > best_capacity * (1 + 1e-9):
            best, best_capacity = config, capacity
    assert best is not None
    return best


def config_for_load(job: SimJob, settings: SimSettings, policy: Policy, load_per_s: float,
                    *, partitions: dict[str, int] | None = None, utilization: float | None = None) -> Config:
    """The cheapest configuration whose capacity, at ``utilization`` (default: the policy's target),
    covers ``load_per_s`` (records/s), on the true capacity curves; the largest when none does.
    Micro-batch: the fewest cores, the adjustable stages with 1 to 4 tasks per core
    (``_micro_batch_config``); continuous: per vertex the fewest tasks."""
    u = policy.utilization_target if utilization is None else utilization
    if settings.mode == Mode.MICRO_BATCH:
        best = None
        for executors in range(settings.min_executors, settings.max_executors + 1):
            best = _micro_batch_config(job, settings, policy, executors * settings.cores_per_executor, partitions)
            if capacity_per_s(job, best, settings) * u >= load_per_s:
                break
        assert best is not None
        return best
    parallelism = {}
    for v in job.vertices:
        if not v.adjustable:
            parallelism[v.id] = v.parallelism
            continue
        need = load_per_s * job.unit_rates[v.id]
        upper = _vertex_upper(job, v.id, policy)
        chosen, best_capacity = 1, -1.0
        for p in range(1, upper + 1):
            capacity = vertex_capacity_per_s(v, p)
            if capacity > best_capacity:
                chosen, best_capacity = p, capacity
            if capacity * u >= need:
                chosen = p
                break
        parallelism[v.id] = chosen
    return Config(parallelism)


def oracle_configs(job: SimJob, trace: Trace, settings: SimSettings, policy: Policy,
                   *, utilization: float | None = None, lag_budget_s: float | None = None) -> list[Config]:
    """The hindsight configuration of each policy interval: the cheapest one covering the interval's
    mean arrival rate at ``utilization`` (``config_for_load``).

    With ``lag_budget_s`` (seconds of arrivals; use it with ``utilization`` 1) the oracle may also
    leave a backlog, so it is the cheapest that keeps the lag under the SLO: each interval, in
    order, the cheapest configuration whose capacity ``c`` leaves at most ``lag_budget_s`` of the
    interval's arrivals unread at its end, ``backlog + (rate − c) × interval ≤ budget × rate``,
    the backlog carried on. Required capacities are rounded up to 0.5 % of the mean rate (a cache).
    """
    interval = settings.policy_interval_s
    count = int(math.ceil(trace.duration_s / interval))
    grid = max(1e-9, 0.005 * trace.mean_rate(0.0, trace.duration_s))
    cache: dict[float, Config] = {}
    configs = []
    backlog = 0.0
    for k in range(count):
        rate = trace.mean_rate(k * interval, (k + 1) * interval)
        need = rate if lag_budget_s is None else max(0.0, rate + (backlog - lag_budget_s * rate) / interval)
        key = round(need, 6) if lag_budget_s is None else math.ceil(need / grid) * grid
        if key not in cache:
            cache[key] = config_for_load(job, settings, policy, key, utilization=utilization)
        configs.append(cache[key])
        if lag_budget_s is not None:
            backlog = max(0.0, backlog + (rate - capacity_per_s(job, cache[key], settings)) * interval)
    return configs


def held_core_s(configs: list[Config], interval_s: float, hold_s: float) -> float:
    """Core-seconds of ``configs`` (one per ``interval_s``) when each scale-down waits ``hold_s``: each interval
    holds the most resources of the last ``hold_s`` seconds, as Flink's delayed scale-down takes the highest
    recommendation of its window (docs/ARCHITECTURE.md, "Delayed scale-down")."""
    resources = [c.resources() for c in configs]
    back = int(round(hold_s / interval_s))
    return sum(max(resources[max(0, k - back):k + 1]) for k in range(len(resources))) * interval_s


def peak_config(configs: list[Config]) -> Config:
    """Static provisioning for the peak: per vertex and for the cores, the largest value of any
    interval."""
    parallelism = {vid: max(c.parallelism[vid] for c in configs) for vid in configs[0].parallelism}
    cores = max((c.cores for c in configs if c.cores is not None), default=None)
    return Config(parallelism, cores)


@dataclass
class ScheduleController:
    """Follows a configuration per policy interval, known in advance (the oracle, rescaling for free)
    or a single configuration (static provisioning)."""

    name: str
    configs: list[Config]
    interval_s: float
    free_rescale: bool = True

    def decide(self, observation: Observation) -> Config | None:
        k = min(len(self.configs) - 1, int(round(observation.now_s / self.interval_s)))
        return self.configs[k]

    def restarted(self, downtime_s: float) -> None:
        pass


__all__ = ["DhalionPolicy", "ScheduleController", "UniformPolicy", "backpressure_fraction", "config_for_load",
           "held_core_s", "oracle_configs", "peak_config"]
