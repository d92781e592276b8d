"""Map the micro-batches of one streaming query onto DS2 vertices and aggregate a window.

See ARCHITECTURE.md, "DS2 on Spark micro-batches". The plan operators per stage live in
:mod:`sparkclient.collector.plan`. Everything here is a pure function over REST JSON
(:mod:`sparkclient.collector.rest`) and ``StreamingQueryProgress`` dicts (the ``.json`` form of
``query.lastProgress`` / ``recentProgress``), so it is tested on captured fixtures; fetching them
is :func:`sparkclient.collector.collect.collect_sample`.

Mapping rules
-------------
- **Jobs of a batch**: a job belongs to batch ``N`` of the query when its ``jobGroup`` equals
  the query's ``runId`` (or, if the job group was overridden, its description carries
  ``runId = <runId>``) and its description has a line ``batch = N``.
- **Stages of a batch**: the stages of its jobs, each stage once, ``SKIPPED`` stages left out,
  in data-flow order: by the newest RDD each computes (:func:`sparkclient.collector.stages.dataflow_order`;
  the two inputs of a join, left first, whose stage ids come in either order from batch to batch).
  Stage attempts: the highest attempt that is not skipped. The job that collects a broadcast
  relation (tagged ``broadcast exchange (runId …)``: the static side of a stream-static join) is no
  part of the stream's data flow: its stages are left out, and their wall time is batch overhead.
  A stage of a later job that re-reads an earlier job's stage output (shares an RDD with it and
  runs as many tasks: a ``foreachBatch`` function acting twice on the batch) is folded into that
  stage, its task-seconds added (:func:`sparkclient.collector.stages.fold_rereads`).
- **Vertex = stage position** ``0..n-1`` in that order. A source vertex is a stage without an
  input stage (position 0, and the other scan of a join of two streams); its records in are the
  scan's ``inputRecords`` (or, for a query's only source, the batch's ``numInputRows``).
- **Vertex id** is ``f"v{position}"``. It depends only on the position, so it stays the same
  across batches, across restarts of the query (a new ``runId``) and whether or not the SQL
  plan could be fetched. The operators are in the vertex ``name``, not in the id; a change of
  the plan's shape between restarts shows up as a change of names/count, not of ids.
- **Vertex name**: the plan operators the stage runs, in data-flow order, joined with ``" → "``
  (e.g. ``"MicroBatchScan → Filter → Project → ... → HashAggregate"``), from the SQL
  execution of the batch (``/sql?details=true``). The plan is cut at its shuffle exchanges
  into segments, one per stage; a segment takes the stage its nodes' metric strings name
  (``(stage X.Y: task Z)``; members of a whole-stage-codegen cluster count with their
  ``WholeStageCodegen (k)`` node). Spark prints that reference only for metrics with two or
  more task values, so a single-task stage's nodes carry none: the segments are then mapped by
  position to the stages of the job that ran the execution, when their number matches and the
  referenced segments agree (see :func:`stage_operators`). Shuffle exchanges and the codegen
  cluster nodes are not listed. Without SQL data the name is ``f"stage {position}"``.
- **Edges**: from the stages' ``parentIds`` when Spark provides them (mapped to positions,
  parents outside the batch dropped); Spark 4.3's REST stage JSON has none, so they come from the
  newest batch's SQL plan: a stage reads the stages whose plan segments feed its own through a
  shuffle exchange (:func:`sparkclient.collector.plan.stage_plan`; a join reads both its inputs, also when
  its scans run one task and carry no stage reference: the segments then take the batch's stages
  by position in data-flow order). When the plan does not name every stage (no SQL data, or its
  segments and the batch's stages differ in number), the vertices are chained in stage order:
  ``v{i-1} → v{i}``.
- **Busiest task**: a stage's slowest task sets its pace (a skewed stage is a bottleneck however
  low its mean busy time). Per batch, the slowest task's ``executorRunTime`` (the stage attempt's
  ``taskSummary`` at quantile 1.0) on the executors' cores gives the stage's busy time per task
  at that pace (``scaling.values.metrics.paced_task_busy_s``); summed over the window it is the vertex's
  ``busy_max_s``, which becomes ``busy_time_max_ms_per_s`` (FLIP-271's MAX busy-time aggregation).
  At most ``SLOWEST_TASK_FETCHES`` stage attempts are asked per collect, newest batches first; the
  others take the measured batches' ratio. A summary Spark cannot give leaves ``busy_max_s`` None
  (the mean then stands for it) with one note in ``errors``.
- A batch whose number of stages differs from the newest batch in the window (e.g. batch 0,
  whose shuffle-map stage is skipped when it reads nothing) is left out of the vertex
  aggregates with a note in ``JobSample.errors``; its progress still counts for the rates.
- **Batch overhead**: per batch, ``durationMs.triggerExecution`` minus the wall time during
  which at least one of its stages ran (the union of the stages' ``[submissionTime,
  completionTime]``, see :func:`stages_running_s`): planning, offsets, WAL and commit, and
  inside ``addBatch`` the job and stage scheduling, the ``foreachBatch`` collect and sink write
  and the state commits between stages. ``batch_overhead_s`` is its mean over the window's
  batches whose stages are all in ``/stages`` with both times; when no batch has them, the
  mean of ``triggerExecution − addBatch`` is used instead, with a note in ``errors``.

The window rule (both modes: a live collect and a folder of captures): see
:func:`window_batches`. Sources (backlog per source kind, arrival rate from offsets over wall
time): see :mod:`sparkclient.collector.sources`.

Every field read from Spark goes through :mod:`sparkclient.collector.sparkjson`: a malformed payload gives
a :class:`sparkclient.collector.sparkjson.SparkDataError` naming the field, never another exception, and a
:class:`JobSample` holds only finite, non-negative numbers (:class:`SampleError` otherwise).
"""


from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from scaling.policy.numbers import is_finite_number
from sparkclient.collector.batchwindow import (
    BatchWindow,
    batch_end_s,
    duration_s,
    progress_time_s,
    progress_where,
    query_progresses,
    window_batches,
)
from sparkclient.collector.memory import MemorySample, memory_sample
from sparkclient.collector.readiness import sample_issues
from sparkclient.collector.sample import JobSample, RatesUnavailable, VertexSample
from sparkclient.collector.sources import SourcesReport, measure_sources
from sparkclient.collector.sparkjson import SparkDataError, as_dict, dicts, get_count, get_float, get_list
from sparkclient.collector.stages import (
    batch_jobs,
    batch_stages,
    executors_and_cores,
    stage_index,
    stages_running_s,
    vertex_order,
)
from sparkclient.collector.vertices import SlowestTask, window_vertices

__all__ = [
    "sample_from_rest",
]

Json = dict[str, Any]


def _mean(values: Sequence[float]) -> float:
    return statistics.fmean(values) if values else 0.0


# -- the sample ---------------------------------------------------------------------------------


def sample_from_rest(
    jobs: Sequence[Json],
    stages: Sequence[Json],
    progresses: Sequence[Json],
    executors: Sequence[Json],
    *,
    run_id: str,
    trigger_interval_s: float,
    window_start_s: float | None,
    window_end_s: float,
    sql: Sequence[Json] | None = None,
    app_id: str = "",
    collected_at: float | None = None,
    slowest_task_ms: SlowestTask | None = None,
    max_cores: int | None = None,
) -> JobSample:
    """Build the :class:`JobSample` of query run ``run_id`` for the window
    ``[window_start_s, window_end_s)`` (epoch seconds), from REST payloads and progress dicts.

    - ``jobs``, ``stages``, ``executors``: ``/jobs``, ``/stages``, ``/executors`` JSON lists.
    - ``progresses``: progress dicts (``recentProgress``-shaped) of the query; which batches
      count and the time they span follow :func:`window_batches` (``window_start_s=None``: the
      whole run).
    - ``sql``: SQL executions with ``details=true`` for vertex names (optional).
    - ``trigger_interval_s``: the query's processing-time trigger, seconds (0 = as fast as
      possible; ``batch_ratio`` is then 0).
    - ``collected_at`` defaults to ``window_end_s`` so the function stays deterministic; the
      sources' backlog is measured at ``collected_at``.
    - ``slowest_task_ms(stage_id, attempt)``: a stage attempt's slowest task's ``executorRunTime``, ms,
      or None (optional; :func:`sparkclient.collector.collect.collect_sample` asks ``taskSummary``); it
      gives each vertex its busiest task's busy time (module docstring, "Busiest task").
    - ``max_cores``: the cores the cluster or host has (None: unknown); more reported by
      ``/executors`` make the sample not ready (``not_ready``, :mod:`sparkclient.collector.readiness`).

    Batches in the progress whose jobs or stages are missing from REST are left out of the
    vertices, with a note in ``errors``, and out of the overhead (module docstring). Raises
    :class:`SparkDataError` for a malformed payload (naming the field), ``ValueError`` for an
    inverted window or a negative or non-finite trigger interval.
    """
    progresses = dicts(progresses, "progress")
    window, batches, window_s = _window(progresses, run_id, trigger_interval_s, window_start_s, window_end_s)
    now_s = window_end_s if collected_at is None else collected_at
    errors: list[str] = []

    executed, stage_overheads_s, missing_stages = _executed_batches(batches, jobs, stages, run_id, errors)
    executor_count, cores = executors_and_cores(executors)
    vertices = window_vertices(executed, window, sql, jobs, errors, slots=max(1, cores),
                               slowest_task_ms=slowest_task_ms)
    rates_unavailable = _rates_unavailable(batches, vertices, errors)
    input_rows = _input_rows(batches, vertices)
    batch_duration_s, busy_total_s = _batch_durations_s(batches)
    batch_overhead_s = _batch_overhead_s(batches, stage_overheads_s, errors)
    input_rate = input_rows / window_s if window_s > 0 else 0.0
    history, report, arrival = _sources(progresses, batches, run_id, window_end_s, now_s, input_rate,
                                        rates_unavailable, errors, trigger_interval_s)
    state_rows, state_bytes = _state_size(batches[-1] if batches else (history[-1] if history else None))
    memory = _memory(executors, executed, batches, vertices, window_s, errors)

    return JobSample(
        run_id=run_id, query_name=_query_name(progresses, run_id), app_id=app_id, window_s=window_s,
        batches=len(batches),
        first_batch_id=int(batches[0]["batchId"]) if batches else None,
        last_batch_id=int(batches[-1]["batchId"]) if batches else None,
        vertices=vertices, backlog=report.backlog, arrival_rate_per_s=arrival, input_rate_per_s=input_rate,
        processed_rate_per_s=input_rows / busy_total_s if busy_total_s > 0 else 0.0,
        batch_duration_s=batch_duration_s,
        trigger_interval_s=trigger_interval_s,
        batch_overhead_s=batch_overhead_s,
        batch_ratio=batch_duration_s / trigger_interval_s if trigger_interval_s > 0 else 0.0,
        executors=executor_count, cores=cores, state_rows=state_rows, state_bytes=state_bytes,
        collected_at=now_s, errors=tuple(errors), backlog_unknown=report.unknown,
        rates_unavailable=rates_unavailable,
        not_ready=sample_issues(progresses, window, run_id=run_id, window_start_s=window_start_s, vertices=vertices,
                                missing_stage_batches=missing_stages, cores=cores, max_cores=max_cores,
                                sources=report),
        memory=memory,
    )


# -- the steps of the sample ----------------------------------------------------------------------


def _memory(executors: Sequence[Json], executed: Sequence[tuple[Json, list[Json]]], batches: Sequence[Json],
            vertices: Sequence[VertexSample], window_s: float, errors: list[str]) -> MemorySample | None:
    """The window's memory signals (:func:`memory_sample`), or None with a note in ``errors`` when a
    memory field is malformed: the rest of the sample stands without them."""
    try:
        return memory_sample(executors, [stage for _progress, ran in executed for stage in ran],
                             batches[-1] if batches else None,
                             [(v.vertex_id, v.spill_bytes, v.span_s or window_s) for v in vertices])
    except SparkDataError as exc:
        errors.append(f"memory signals not available ({exc})")
        return None


def _window(progresses: Sequence[Json], run_id: str, trigger_interval_s: float, window_start_s: float | None,
            window_end_s: float) -> tuple[BatchWindow, list[Json], float]:
    """The window (:func:`window_batches`), its batches and its span, seconds (the batches' span, else
    the window's bounds). Raises ``ValueError`` for a negative or non-finite trigger interval or bound."""
    if not is_finite_number(trigger_interval_s) or trigger_interval_s < 0:
        raise ValueError(f"trigger_interval_s must be a finite number >= 0 seconds, got {trigger_interval_s}")
    if not is_finite_number(window_end_s) or (window_start_s is not None and not is_finite_number(window_start_s)):
        raise ValueError(f"window bounds must be finite, got [{window_start_s}, {window_end_s})")
    window = window_batches(progresses, run_id=run_id, window_start_s=window_start_s, window_end_s=window_end_s)
    batches = list(window.batches)
    if batches:
        return window, batches, window.span_s
    return window, batches, (window_end_s - window_start_s if window_start_s is not None else 0.0)


def _sources(progresses: Sequence[Json], batches: Sequence[Json], run_id: str, window_end_s: float, now_s: float,
             input_rate: float, rates_unavailable: RatesUnavailable | None,
             errors: list[str], trigger_interval_s: float = 0.0) -> tuple[list[Json], SourcesReport, float]:
    """``(history, report, arrival)``: the run's progresses before the window's end in time order, the
    sources' backlog and arrival measured on them (:func:`measure_sources`), and the arrival rate,
    records/s (:func:`_arrival_per_s`). The notes go to ``errors``."""
    history = sorted((p for p in query_progresses(progresses, run_id) if batch_end_s(p) < window_end_s),
                     key=progress_time_s)
    report = measure_sources(history, batches, now_s=now_s, trigger_interval_s=trigger_interval_s)
    arrival = _arrival_per_s(report.arrival_per_s, input_rate, batches, rates_unavailable, errors)
    errors.extend(entry.message for entry in report.unknown)
    return history, report, arrival


def _batch_durations_s(batches: Sequence[Json]) -> tuple[float, float]:
    """``(mean, total)`` of the batches' ``batchDuration``, seconds."""
    durations_s = [get_float(p, "batchDuration", progress_where(p)) / 1000.0 for p in batches]
    return _mean(durations_s), sum(durations_s)


def _executed_batches(batches: Sequence[Json], jobs: Sequence[Json], stages: Sequence[Json], run_id: str,
                      errors: list[str]) -> tuple[list[tuple[Json, list[Json]]], list[float], list[int]]:
    """The window's batches whose jobs and stages are all in REST, each with its stages in vertex
    order; the overhead (trigger time outside stages, seconds) of each batch with every stage
    listed; and the ids of the batches left out because stages are missing from ``/stages``.
    Batches left out get a note in ``errors``."""
    jobs_by_batch = batch_jobs(jobs, run_id)
    stages_by_id = stage_index(stages)
    executed: list[tuple[Json, list[Json]]] = []
    stage_overheads_s: list[float] = []
    no_jobs: list[int] = []
    missing_stages: dict[int, list[int]] = {}
    for progress in batches:
        batch_id = int(progress["batchId"])
        batch_job_list = jobs_by_batch.get(batch_id)
        if not batch_job_list:
            if get_count(progress, "numInputRows", progress_where(progress)) > 0:
                no_jobs.append(batch_id)
            continue
        ran, missing = batch_stages(batch_job_list, stages_by_id, fold=False)
        if missing:
            missing_stages[batch_id] = list(missing)
            continue
        running_s = stages_running_s(ran)
        ordered = vertex_order(ran, batch_job_list)
        if running_s is not None:
            stage_overheads_s.append(max(0.0, duration_s(progress, "triggerExecution") - running_s))
        if ordered:
            executed.append((progress, ordered))
    # One note per kind, naming every batch, not one line per batch (a query without a trigger runs
    # many short batches, and a collect can leave out dozens while their stages still run).
    if no_jobs:
        errors.append(
            f"{_batches_text(no_jobs)}: no job with jobGroup {run_id} and 'batch = N' in /jobs "
            "(not yet listed, or dropped past spark.ui.retainedJobs); left out of the vertices"
        )
    if missing_stages:
        stage_ids = sorted({i for ids in missing_stages.values() for i in ids})
        errors.append(
            f"{_batches_text(list(missing_stages))}: stages {_ids_text(stage_ids)} missing from /stages (still "
            "running, or dropped past spark.ui.retainedStages); left out of the vertices"
        )
    return executed, stage_overheads_s, list(missing_stages)


def _ids_text(ids: Sequence[int], shown: int = 6) -> str:
    """``[3, 4, 5]``, or the first ``shown`` ids and how many more: ``[3, 4, 5, 6, 7, 8, … 12 more]``."""
    head = ", ".join(str(i) for i in ids[:shown])
    return f"[{head}{f', … {len(ids) - shown} more' if len(ids) > shown else ''}]"


def _batches_text(batch_ids: Sequence[int]) -> str:
    """``batch 7``, or ``3 batches [7, 8, 9]`` (see :func:`_ids_text`)."""
    return f"batch {batch_ids[0]}" if len(batch_ids) == 1 else f"{len(batch_ids)} batches {_ids_text(batch_ids)}"


def _rates_unavailable(batches: Sequence[Json], vertices: Sequence[VertexSample],
                       errors: list[str]) -> RatesUnavailable | None:
    """Set when no progress gives the rows and the source stage reports no input records."""
    if batches and all(p.get("numInputRows") is None for p in batches) and not any(
            v.records_in for v in vertices if v.is_source):
        errors.append("rates unavailable: no progress is published for this query and its source stages report "
                      "no inputRecords; publish the progress (RedisProgressListener) to measure rates")
        return RatesUnavailable.NO_INPUT_RECORDS
    return None


def _input_rows(batches: Sequence[Json], vertices: Sequence[VertexSample]) -> int:
    """Rows the window's batches took; from the source stage when the progress was rebuilt from /jobs."""
    input_rows = sum(get_count(p, "numInputRows", progress_where(p)) for p in batches)
    rebuilt = bool(batches) and all(p.get("numInputRows") is None for p in batches)
    if input_rows == 0 and vertices and rebuilt:
        return sum(v.records_in for v in vertices if v.is_source)
    return input_rows


def _batch_overhead_s(batches: Sequence[Json], stage_overheads_s: Sequence[float], errors: list[str]) -> float:
    """Mean seconds per batch outside stages (module docstring, "Batch overhead")."""
    if stage_overheads_s:
        return _mean(stage_overheads_s)
    if batches:
        errors.append(
            "batch overhead: no batch in the window has all its stages with submission and completion "
            "times in /stages; triggerExecution − addBatch used, which misses the time inside addBatch "
            "when no task runs"
        )
    return _mean([max(0.0, duration_s(p, "triggerExecution") - duration_s(p, "addBatch")) for p in batches])


def _arrival_per_s(measured: float | None, input_rate: float, batches: Sequence[Json],
                   rates_unavailable: RatesUnavailable | None, errors: list[str]) -> float:
    """The sources' arrival rate, records/s; the batches' input rate when a source gives no offsets."""
    if measured is not None:
        return measured
    if batches and rates_unavailable is None:
        errors.append("arrival rate: a source gives no offsets to measure it; the rows the batches took "
                      "per second of the time they span are used instead")
    return input_rate


def _state_size(newest: Json | None) -> tuple[int, int]:
    """``(rows, bytes)`` of the state stores in the newest batch's progress."""
    where = progress_where(newest or {})
    ops = [as_dict(op, f"{where}.stateOperators") for op in get_list(newest or {}, "stateOperators", where)]
    return (sum(get_count(op, "numRowsTotal", f"{where}.stateOperators") for op in ops),
            sum(get_count(op, "memoryUsedBytes", f"{where}.stateOperators") for op in ops))


def _query_name(progresses: Sequence[Json], run_id: str) -> str | None:
    """The query's name in the newest progress of the run that has one."""
    run_progresses = [p for p in progresses if p.get("runId", run_id) == run_id]
    return next((p.get("name") for p in reversed(run_progresses) if isinstance(p.get("name"), str) and p.get("name")),
                None)

