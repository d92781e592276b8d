"""Findings of the micro-batch plan that cores cannot fix (the values: ``scaling.values.findings``)."""

from __future__ import annotations

from scaling.planner.sizing import MicroBatchModel
from scaling.policy.numbers import ceil_exact
from scaling.values.findings import ACTION_OF_CAUSE, Finding


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
