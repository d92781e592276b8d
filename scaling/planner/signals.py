"""Measured signals that overrule the micro-batch model (``scaling.planner.microbatch``), so that a plan never
harms the job it is computed for: SPARK-12133's batch ratio, the sources' backlog growth and a sample that is
not ready veto scale-downs (``PlanReason.SCALE_DOWN_VETOED``); a persistent batch overrun with a growing
backlog scales up (``PlanReason.BATCH_OVERRUN``); a pipeline without an executors knob keeps its cores
(``Limit.CORES_NOT_ADJUSTABLE``). docs/ARCHITECTURE.md, "Measured signals"."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from scaling.policy.numbers import ceil_exact
from scaling.policy.policy import Policy
from scaling.values.metrics import ClusterState, VertexMetrics
from scaling.values.plan import VertexPlan
from scaling.values.readiness import SampleIssue
from scaling.values.reasons import Limit, PlanLimit, PlanReason, Reason, VetoSignal
from scaling.values.topology import Topology

__all__ = ["OVERRUN_MIN_BATCHES", "BatchSignals", "batch_overrun", "batch_signals", "cores_fixed", "keep_partitions",
           "overrun_executors", "scale_down_veto"]

OVERRUN_MIN_BATCHES = 2
"""Fewest batches (or snapshots' mean batches) of the window above ``batch_overrun_ratio`` for an
overrun to count as persistent: one long batch (a checkpoint, a GC pause) is not a trend."""


@dataclass(frozen=True)
class BatchSignals:
    """The window's measured signals: ``ratio``, the mean batch duration over the trigger interval (SPARK-12133's
    R), ``min_ratio``, the smallest batch's, and ``batch_duration_s``, the mean in seconds, each None without
    batches; ``batches``, how many batch durations the window holds; ``trigger_interval_s``, seconds;
    ``backlog_growth_per_s`` and ``input_rate_per_s``, the sources' sums, records/s; ``not_ready``, the issues
    of the samples that are not ready (``scaling.values.readiness``)."""

    ratio: float | None
    min_ratio: float | None
    batches: int
    batch_duration_s: float | None
    trigger_interval_s: float
    backlog_growth_per_s: float
    input_rate_per_s: float
    not_ready: tuple[SampleIssue, ...] = ()


def batch_signals(topology: Topology, metrics: Mapping[str, VertexMetrics], cluster: ClusterState,
                  batch_durations_s: Sequence[float], not_ready: Sequence[SampleIssue] = ()) -> BatchSignals:
    """The signals of a window: ``batch_durations_s`` (seconds; each a batch's or a snapshot's mean
    batch duration) over ``cluster.trigger_interval_s``, the sources' backlog growth and input
    rate (records/s) from ``metrics``, and the samples' ``not_ready`` issues. Raises ``KeyError``
    when a source has no metrics."""
    trigger = cluster.trigger_interval_s
    durations = [d for d in batch_durations_s if d is not None]
    mean_s = sum(durations) / len(durations) if durations else None
    sources = [metrics[v] for v in topology.order if topology.is_source(v)]
    return BatchSignals(
        ratio=mean_s / trigger if mean_s is not None else None,
        min_ratio=min(durations) / trigger if durations else None, batches=len(durations), batch_duration_s=mean_s,
        trigger_interval_s=trigger, backlog_growth_per_s=sum(m.backlog_growth_per_s for m in sources),
        input_rate_per_s=sum(m.records_in_per_s or 0.0 for m in sources), not_ready=tuple(not_ready))


def backlog_growth_noise(signals: BatchSignals, policy: Policy) -> float:
    """The backlog growth, records/s, up to which it is noise: ``scale_down_veto_backlog_growth`` ×
    the sources' input rate. The growth is the difference of two rates sampled at batch boundaries,
    which jitter by a few percent from window to window; a source with no input has no noise."""
    return policy.scale_down_veto_backlog_growth * signals.input_rate_per_s


def scale_down_veto(signals: BatchSignals, policy: Policy) -> Reason | None:
    """``scale-down-vetoed`` (data: signal, value, threshold) when the window forbids a scale-down, else None: a
    sample is not ready (signal ``not-ready``, value: the issues, data ``code``: the first one's; scale-downs
    only, FLINK-39925), its batch ratio is at or above ``scale_down_veto_batch_ratio`` (SPARK-12133's scale-up
    ratio), or the sources' backlog grows beyond ``backlog_growth_noise`` (records/s). docs/ARCHITECTURE.md,
    "Measured signals"."""
    if signals.not_ready:
        return Reason(PlanReason.SCALE_DOWN_VETOED, None, {
            "signal": str(VetoSignal.NOT_READY), "value": len(signals.not_ready), "threshold": 0,
            "code": str(signals.not_ready[0].code)})
    if signals.ratio is not None and signals.ratio >= policy.scale_down_veto_batch_ratio:
        return Reason(PlanReason.SCALE_DOWN_VETOED, None, {
            "signal": str(VetoSignal.BATCH_RATIO), "value": signals.ratio,
            "threshold": policy.scale_down_veto_batch_ratio})
    noise = backlog_growth_noise(signals, policy)
    if signals.backlog_growth_per_s > noise:
        return Reason(PlanReason.SCALE_DOWN_VETOED, None, {
            "signal": str(VetoSignal.BACKLOG_GROWTH), "value": signals.backlog_growth_per_s, "threshold": noise})
    return None


def batch_overrun(signals: BatchSignals, policy: Policy) -> Reason | None:
    """``batch-overrun`` (data: ratio, min_ratio, batches, trigger_interval_s, batch_duration_s) when every batch of
    the window (at least ``OVERRUN_MIN_BATCHES``) ran longer than ``batch_overrun_ratio`` × the trigger interval
    and the backlog grows beyond ``backlog_growth_noise``: the job falls behind whatever the model says
    (SPARK-12133's R; why long batches alone are no overrun: docs/ARCHITECTURE.md, "Measured signals"). Else
    None."""
    if signals.min_ratio is None or signals.batches < OVERRUN_MIN_BATCHES:
        return None
    if signals.backlog_growth_per_s <= backlog_growth_noise(signals, policy):
        return None
    if signals.min_ratio <= policy.batch_overrun_ratio:
        return None
    return Reason(PlanReason.BATCH_OVERRUN, None, {
        "ratio": signals.ratio, "min_ratio": signals.min_ratio, "batches": signals.batches,
        "trigger_interval_s": signals.trigger_interval_s, "batch_duration_s": signals.batch_duration_s})


def overrun_executors(signals: BatchSignals, cluster: ClusterState, policy: Policy,
                      within_band: Callable[[int], bool]) -> int | None:
    """The executors for a batch overrun: the most, from one more than now up to ``ceil(C × R / u / cpe)`` within
    the max executors (the batch ratio brought to ``utilization_target``, batch time linear in the cores, DS2
    §3.2; SPARK-12133 adds ``round(R)`` executors at ``R ≥ 0.9``), whose predicted utilization of the target rate
    stays inside the band (``within_band(executors)``); None when none does (docs/ARCHITECTURE.md, "Measured
    signals")."""
    ratio = signals.ratio or 0.0
    top = max(cluster.executors + 1, ceil_exact(cluster.cores * ratio / policy.utilization_target
                                                / cluster.cores_per_executor))
    top = min(top, max(cluster.max_executors, cluster.min_executors))
    return next((n for n in range(top, cluster.executors, -1) if within_band(n)), None)


def keep_partitions(stage_plans: tuple[VertexPlan, ...], cores: int,
                    cores_now: int) -> tuple[tuple[VertexPlan, ...], bool]:
    """The stage plans with no stage below the task slots it runs on now, ``min(tasks, C_now)``
    (a vetoed scale-down): a stage runs on ``min(tasks, C)`` cores (``busy_share``), so fewer tasks
    than that is a scale-down of it, while a stage with more tasks than cores may still be
    rebalanced to one task per core (64 tasks on 7 cores → 21 on 21: no slot lost, fewer waves).
    A kept stage's expected rate is ``TPR × min(tasks, cores)`` (records/s). Returns (plans,
    whether any was kept)."""
    kept, changed = [], False
    for vp in stage_plans:
        floor = min(vp.current, cores_now)
        if vp.proposed < floor:
            vp = replace(vp, proposed=floor, expected_processing_rate=vp.true_processing_rate * min(floor, cores))
            changed = True
        kept.append(vp)
    return tuple(kept), changed


def cores_fixed(cluster: ClusterState) -> ClusterState:
    """``cluster`` with its executor bounds pinned to the running count when the pipeline cannot
    change it (``executors_adjustable`` False), so the sizing, the limits and the predictions are
    those of the configuration that will run; else ``cluster``."""
    if cluster.executors_adjustable:
        return cluster
    return replace(cluster, min_executors=cluster.executors, max_executors=cluster.executors)


def cores_not_adjustable(cores: int, cores_needed: int, predicted_utilization: float,
                         utilization_with_catch_up: float) -> PlanLimit:
    """``cores-not-adjustable``: the target is out of reach on the ``cores`` the pipeline runs on
    and it declares no executors knob (data: cores, cores_needed, predicted_utilization at the
    target rate, utilization_with_catch_up; shares 0..1)."""
    return PlanLimit(Limit.CORES_NOT_ADJUSTABLE, None, {
        "cores": cores, "cores_needed": cores_needed, "predicted_utilization": predicted_utilization,
        "utilization_with_catch_up": utilization_with_catch_up})
