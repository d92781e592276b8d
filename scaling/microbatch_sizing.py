"""The micro-batch model's sizing formulas: per-stage demand (FLIP-271 target capacity), the
tasks a stage runs on ``C`` cores, and the one utilization formula (``busy_share``) that the planner
(``scaling.microbatch``) sizes with and the web app's frozen prediction shows."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from scaling.evaluate import INF
from scaling.policy import Policy
from scaling.state import ScalerState
from scaling.topology import Topology
from scaling.vertex_scaler import align_parallelism, alignment_base, parallelism_bounds, pinned_reason


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
    """The demand a plan sizes cores for, in busy core-seconds per second scaled to the target:
    ``max(base, u × (base + extra))``, so that ``U_sized(C) ≤ u`` ⇔ the target rate alone fits at
    utilization ``u`` *and* the target, catch-up and restart rates together fit at full capacity.

    ``job.autoscaler.catch-up.duration`` is "the target duration for fully processing any backlog
    after a scaling operation" (Flink ``AutoScalerOptions.CATCH_UP_DURATION``): a configuration
    meets it when its spare capacity drains the backlog and the restart's pile-up within it. Flink's
    ``AutoScalerUtils.getTargetProcessingCapacity`` sizes a vertex for ``catch-up + restart + λ / u``,
    which adds the catch-up on top of the utilization headroom; the headroom ``λ / u − λ`` drains
    backlog too, so on a load step that sizing leaves the job well below the target once the backlog
    is gone (issue 14: a step-up of nexmark-q5 to 28 cores where 21 keep it at 0.7; issue 13 item 6:
    the least resources that meet the target). Micro-batch mode takes the larger of the two needs;
    the continuous vertex scaler keeps Flink's formula (``evaluate.target_processing_capacity``).
    The catch-up and restart rates are those of ``evaluate.propagate_target_rates`` (FLIP-271).
    Per stage the catch-up is proportional to the target rate (both propagate on the same edges),
    so the per-stage maximum is the job's.

    Args:
        base: busy core-seconds per second at the target rate (λ / TPR), ≥ 0.
        extra: busy core-seconds per second of the catch-up and restart rates, ≥ 0.
        utilization_target: the policy's target, 0 < u ≤ 1.
    """
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
    """Predicted share of the trigger interval a batch keeps busy (0..1 when it fits):
    ``Σ_v need_v / min(tasks_v, C) / (1 − overhead)``, each stage running on ``min(tasks, C)`` cores.

    The one utilization formula of the micro-batch model: the planner sizes with it and the web
    app's frozen prediction (``webapp.proposals.predictions``) shows it.

    Args:
        demands: per stage, (need in busy core-seconds per second, tasks).
        cores: task slots C.
        overhead: the batch overhead's share of the trigger interval, 0 ≤ overhead < 1.
    """
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
