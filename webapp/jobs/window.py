"""Stored snapshots read back: each as the collector's sample again (:func:`snapshot_sample`), why a
snapshot or a window is not ready (:func:`stored_issues`, :func:`window_readiness`), and the load of a
window that its memory is right-sized on (:func:`window_sizing`). The live loop's evaluation and the
pages read them alike."""

from __future__ import annotations

from collections.abc import Sequence

from scaling.planner.memory import sizing_window
from scaling.planner.signals import batch_signals
from scaling.values.memory import SizingWindow
from scaling.values.readiness import NotReady, SampleIssue, issues_from_json
from scaling.values.reasons import PlanFormatError
from sparkclient.collector.model_inputs import model_inputs
from sparkclient.collector.sample import JobSample, VertexSample
from sparkclient.contract.binding import StageBinding, disagreeing_bindings
from webapp.jobs.bindings import stage_bindings
from webapp.jobs.models import Job, MetricSnapshot
from webapp.jobs.policy_mapping import scaling_policy

__all__ = ["snapshot_sample", "stored_issues", "window_readiness", "window_sizing"]


def snapshot_sample(snapshot: MetricSnapshot) -> JobSample:
    """A stored snapshot as the collector's ``sparkclient.collector.sample.JobSample`` again (the
    fields the mapping reads; ids and names it does not store are empty)."""
    vertices = tuple(VertexSample(
        vertex_id=v.vertex_id, name=v.name, position=v.position, is_source=v.is_source, tasks=v.tasks,
        busy_s=v.busy_s, busy_max_s=v.busy_max_s, records_in=v.records_in, records_out=v.records_out,
        spill_bytes=v.spill_bytes, upstream=tuple(v.upstream), span_s=v.span_s) for v in snapshot.vertices.all())
    return JobSample(
        run_id=snapshot.run_id, query_name=None, app_id="", window_s=snapshot.window_s, batches=snapshot.batches,
        first_batch_id=None, last_batch_id=None, vertices=vertices, backlog=snapshot.backlog,
        arrival_rate_per_s=snapshot.arrival_rate_per_s, input_rate_per_s=snapshot.input_rate_per_s,
        processed_rate_per_s=snapshot.processed_rate_per_s, batch_duration_s=snapshot.batch_duration_s,
        trigger_interval_s=snapshot.trigger_interval_s, batch_overhead_s=snapshot.batch_overhead_s,
        batch_ratio=snapshot.batch_ratio, executors=snapshot.executors, cores=snapshot.cores,
        state_rows=snapshot.state_rows, state_bytes=snapshot.state_bytes,
        collected_at=snapshot.collected_at.timestamp(), errors=tuple(snapshot.errors),
        not_ready=stored_issues(snapshot))


def stored_issues(snapshot: MetricSnapshot) -> tuple[SampleIssue, ...]:
    """Why a stored snapshot is not ready (``MetricSnapshot.not_ready``); ``()`` when it is ready.
    A stored value this version cannot read counts as not ready (``missing-stages``, with no data):
    what cannot be read cannot be trusted for a scale-down."""
    try:
        return issues_from_json(snapshot.not_ready)
    except PlanFormatError:
        return (SampleIssue(NotReady.MISSING_STAGES, {"batches": 0, "of": snapshot.batches}),)


def window_readiness(*, snapshots: Sequence[MetricSnapshot], bindings: Sequence[StageBinding]
                     ) -> tuple[SampleIssue, ...]:
    """Why the window is not ready, ``()`` when it is: each snapshot's stored issues, oldest first,
    and a knob of the newest that disagrees with the tasks Spark ran (``binding-mismatch``, data:
    knob, knob_value, tasks_ran, position; :func:`sparkclient.contract.binding.disagreeing_bindings`)."""
    issues = [issue for s in snapshots for issue in stored_issues(s)]
    issues.extend(SampleIssue(NotReady.BINDING_MISMATCH, {"knob": b.knob, "knob_value": b.knob_value,
                                                           "tasks_ran": b.tasks_ran, "position": b.position})
                  for b in disagreeing_bindings(bindings))
    return tuple(issues)


def window_sizing(*, job: Job, snapshots: Sequence[MetricSnapshot]) -> SizingWindow:
    """The load of the window ``snapshots`` (oldest first) that its memory is right-sized on
    (``scaling.planner.memory.sizing_window``), from its snapshots of the newest snapshot's run up
    to the newest one that holds stages: their completed micro-batches, the sources' backlog growth
    and its noise at the job's policy (through the one Spark → model mapping), and their readiness
    with the stage bindings of that newest one. No batch when none of them holds stages."""
    run = [s for s in snapshots if s.run_id == snapshots[-1].run_id] if snapshots else []
    while run and not run[-1].vertices.all():
        run.pop()
    batches = sum(s.batches for s in run)
    if not run or not batches:
        return SizingWindow(batches=0)
    inputs = model_inputs([snapshot_sample(s) for s in run], adjustable=lambda _vertex: False, cores_per_executor=1)
    not_ready = window_readiness(snapshots=run, bindings=stage_bindings(job=job, snapshot=run[-1]))
    signals = batch_signals(inputs.topology, inputs.metrics, inputs.cluster, inputs.batch_durations_s, not_ready)
    return sizing_window(signals, scaling_policy(job.policy), batches=batches)
