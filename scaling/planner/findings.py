"""Findings of the micro-batch plan that cores cannot fix (the values: ``scaling.values.findings``)."""

from __future__ import annotations

from scaling.planner.sizing import MicroBatchModel
from scaling.policy.numbers import ceil_exact
from scaling.values.findings import ACTION_OF_CAUSE, Finding, PinnedAction
from scaling.values.reasons import Limit, PlanLimit
from scaling.values.topology import PinCause

#: A stage whose share of the job's predicted utilization is at least this dominates the batch.
DOMINANT_SHARE = 0.5


def pinned_findings(job: MicroBatchModel, cores: int) -> tuple[Finding, ...]:
    """Step 5's findings on ``cores`` planned cores: each stage that is not a source and not
    adjustable (``Vertex.adjustable``: its partitions are pinned) whose tasks do not exceed the
    cores (more cores cannot help it) and that alone fills more than the utilization target of
    each trigger interval, ``need_up / tasks / (1 − overhead)``. Its action
    follows ``Vertex.pin_cause`` (``PinnedAction``); the suggested ``partitions`` are
    ``ceil(need_up / (u × (1 − overhead)))``, DS2's π_v with the batch overhead."""
    overhead, target_u = job.overhead, job.policy.utilization_target
    trigger_s = job.cluster.trigger_interval_s or 1.0
    found = []
    for vid in job.topology.order:
        vertex, st = job.topology.vertex(vid), job.stages[vid]
        tasks = vertex.parallelism
        if vertex.adjustable or job.topology.is_source(vid) or tasks > cores or st.need_up <= 0:
            continue
        fill = st.need_up / tasks / (1.0 - overhead)
        if fill <= target_u:
            continue
        busy_ms = job.metrics[vid].busy_time_ms_per_s
        found.append(Finding(ACTION_OF_CAUSE[vertex.pin_cause], vid, {
            "tasks": tasks, "busy_s_per_task": None if busy_ms is None else busy_ms / 1000.0 * trigger_s,
            "fill": fill, "cores": cores, "partitions": ceil_exact(st.need_up / target_u / (1.0 - overhead)),
            "cause": None if vertex.pin_cause is None else str(vertex.pin_cause)}))
    return tuple(found)


def default_shuffle_findings(job: MicroBatchModel) -> tuple[Finding, ...]:
    """The stages that run the session's ``spark.sql.shuffle.partitions`` with no knob to size them
    (``PinCause.SHUFFLE_DEFAULT``), more tasks than the job's cores ``C``, whose tasks dominate the
    batch on those cores: the stage alone fills more than the utilization target of each trigger
    interval, ``need_up / C / (1 − overhead)``, and that is at least ``DOMINANT_SHARE`` of the job's
    predicted utilization. ``partitions``: ``C``, one task per core. (Spark's 200 default partitions
    of a stateful stage on 1 core: measured 3 min 43 s per batch.)"""
    overhead, target_u, cores = job.overhead, job.policy.utilization_target, max(1, job.cluster.cores)
    total = job.now("need_up")
    found = []
    for vid in job.topology.order:
        vertex, st = job.topology.vertex(vid), job.stages[vid]
        if vertex.pin_cause is not PinCause.SHUFFLE_DEFAULT or vertex.parallelism <= cores or st.need_up <= 0:
            continue
        fill = st.need_up / cores / (1.0 - overhead)
        share = fill / total if total > 0 else 0.0
        if fill <= target_u or share < DOMINANT_SHARE:
            continue
        found.append(Finding(PinnedAction.DEFAULT_SHUFFLE_PARTITIONS, vid, {
            "tasks": vertex.parallelism, "cores": cores, "fill": fill, "share": share, "partitions": cores,
            "cause": str(PinCause.SHUFFLE_DEFAULT)}))
    return tuple(found)


def cores_cannot_help(job: MicroBatchModel) -> PlanLimit | None:
    """A ``Limit.CORES_CANNOT_HELP`` when no stage is adjustable (no knob the plan could size with the
    cores) and those that run no more tasks than the job's cores ``C`` (more cores give them no task
    slot) alone fill more of each trigger interval than the band's upper edge, ``Σ need_up / tasks /
    (1 − overhead) > high``: no core count brings the job into its band, so the plan adds none (the
    findings say what can help). None otherwise (with adjustable stages, ``gains_stop`` decides)."""
    overhead, cores = job.overhead, job.cluster.cores
    if any(v.adjustable for v in job.topology.vertices):
        return None
    fills = {vid: job.stages[vid].need_up / job.topology.vertex(vid).parallelism / (1.0 - overhead)
             for vid in job.topology.order
             if not job.topology.vertex(vid).adjustable and job.topology.vertex(vid).parallelism <= cores
             and job.stages[vid].need_up > 0}
    total = sum(fills.values())
    if total <= job.high:
        return None
    return PlanLimit(Limit.CORES_CANNOT_HELP, max(fills, key=fills.__getitem__),
                     {"fill": total, "high": job.high, "cores": cores})
