"""Map the micro-batches of one streaming query onto DS2 vertices and aggregate a window.

See ARCHITECTURE.md, "DS2 on Spark micro-batches". The plan operators per stage live in
:mod:`sparkclient.plan`. Everything except :func:`collect_sample`
is a pure function over REST JSON (:mod:`sparkclient.rest`) and ``StreamingQueryProgress``
dicts (the ``.json`` form of ``query.lastProgress`` / ``recentProgress``), so it is tested on
captured fixtures.

Mapping rules
-------------
- **Jobs of a batch**: a job belongs to batch ``N`` of the query when its ``jobGroup`` equals
  the query's ``runId`` (or, if the job group was overridden, its description carries
  ``runId = <runId>``) and its description has a line ``batch = N``.
- **Stages of a batch**: the stages of its jobs, ordered by ``(jobId, stageId)``, each stage
  once, ``SKIPPED`` stages left out. Stage attempts: the highest attempt that is not skipped.
- **Vertex = stage position** ``0..n-1`` in that order. Position 0 is the source vertex.
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
  parents outside the batch dropped); Spark 4.3's REST stage JSON has none, so the vertices
  are then chained in stage order: ``v{i-1} → v{i}``.
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

Offsets: the log source's ``{"p0": 123}``, Kafka's ``{"topic": {"0": 123}}``, JSON strings of
those, and plain numbers (rate source) are understood. Dict offsets are record positions.
Plain-number offsets are in source-specific units (the rate source counts seconds), so their
backlog and growth are converted to records with the window's records per offset unit
(``Σ numInputRows / Σ (endOffset − startOffset)``); when that is not estimable, 1 is used.
Non-numeric offsets (e.g. Redis stream ids ``"1795257858127-49"``) are left out with a note.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any, Protocol

from sparkclient.plan import stage_operators
from sparkclient.rest import SparkRestError

__all__ = [
    "JobSample",
    "VertexSample",
    "batch_jobs",
    "batch_stages",
    "collect_sample",
    "executors_and_cores",
    "flatten_offsets",
    "progress_time_s",
    "rest_time_s",
    "sample_from_rest",
    "source_backlog",
    "stage_operators",
    "stages_running_s",
    "vertex_id",
]

Json = dict[str, Any]

_BATCH_LINE = re.compile(r"^\s*batch\s*=\s*(\d+)\s*$", re.MULTILINE)
_RUN_ID_LINE = re.compile(r"^\s*runId\s*=\s*(\S+)\s*$", re.MULTILINE)
_ROOT_EXECUTION_TAG = re.compile(r"-execution-root-id-(\d+)$")


@dataclass(frozen=True)
class VertexSample:
    """One vertex (a stage position of the micro-batch job) aggregated over a window.

    - ``vertex_id``: ``f"v{position}"`` (stable across batches and restarts).
    - ``name``: plan operators joined by ``" → "``, or ``f"stage {position}"``.
    - ``tasks``: tasks per batch (the partitions) in the newest batch of the window.
    - ``busy_s``: sum of ``executorRunTime`` over all its tasks in the window, task-seconds.
    - ``records_in``: ``inputRecords`` for the source vertex (the batch's ``numInputRows`` when
      the stage reports no input records, as Python data sources do), else
      ``shuffleReadRecords``; summed over the window.
    - ``records_out``: ``shuffleWriteRecords``; for the last vertex the sink rows: the
      progress's ``sink.numOutputRows`` when >= 0, else the stage's ``outputRecords`` when > 0,
      else its ``records_in`` (``foreachBatch`` reports -1 and writes nothing Spark can count).
    - ``spill_bytes``: ``memoryBytesSpilled + diskBytesSpilled`` over the window, bytes.
    - ``upstream``: vertex ids feeding this one.
    """

    vertex_id: str
    name: str
    position: int
    is_source: bool
    tasks: int
    busy_s: float
    records_in: int
    records_out: int
    spill_bytes: int
    upstream: tuple[str, ...]


@dataclass(frozen=True)
class JobSample:
    """One collect of one streaming query (one ``runId``) over a window; see the field comments
    in ARCHITECTURE.md. Rates are records per second, durations seconds, sizes bytes.
    ``batch_overhead_s``: mean time per batch spent outside tasks (see "Batch overhead" in the
    module docstring)."""

    run_id: str
    query_name: str | None
    app_id: str
    window_s: float
    batches: int
    first_batch_id: int | None
    last_batch_id: int | None
    vertices: tuple[VertexSample, ...]
    backlog: int
    arrival_rate_per_s: float
    input_rate_per_s: float
    processed_rate_per_s: float
    batch_duration_s: float
    trigger_interval_s: float
    batch_overhead_s: float
    batch_ratio: float
    executors: int
    cores: int
    state_rows: int
    state_bytes: int
    collected_at: float
    errors: tuple[str, ...] = ()


class RestClient(Protocol):
    """The subset of :class:`sparkclient.rest.SparkRestClient` that :func:`collect_sample` uses."""

    def jobs(self, app_id: str, status: str | Sequence[str] | None = None) -> list[Json]: ...

    def stages(self, app_id: str, status: str | Sequence[str] | None = None) -> list[Json]: ...

    def executors(self, app_id: str) -> list[Json]: ...

    def sql_execution(self, app_id: str, execution_id: int, details: bool = True) -> Json: ...


# -- jobs and stages --------------------------------------------------------------------------


def vertex_id(position: int) -> str:
    """The stable id of the vertex at stage ``position`` (0-based): ``"v0"``, ``"v1"``, ..."""
    return f"v{position}"


def _job_batch(job: Mapping[str, Any], run_id: str) -> int | None:
    description = job.get("description") or ""
    run_ids = _RUN_ID_LINE.findall(description)
    if job.get("jobGroup") != run_id and run_id not in run_ids:
        return None
    match = _BATCH_LINE.search(description)
    return int(match.group(1)) if match else None


def batch_jobs(jobs: Iterable[Json], run_id: str) -> dict[int, list[Json]]:
    """Group the jobs of one query run by batch id.

    ``jobs``: ``/jobs`` entries. A job is taken when ``jobGroup == run_id`` (or its description
    has ``runId = <run_id>``) and its description has a ``batch = N`` line.
    Returns ``{batch_id: [job, ...]}`` with each list ordered by ``jobId``.
    """
    grouped: dict[int, list[Json]] = {}
    for job in jobs:
        batch = _job_batch(job, run_id)
        if batch is not None:
            grouped.setdefault(batch, []).append(job)
    for batch_list in grouped.values():
        batch_list.sort(key=lambda job: int(job.get("jobId", 0)))
    return grouped


def _stage_index(stages: Iterable[Json]) -> dict[int, Json]:
    """``stageId -> stage``: the highest non-skipped attempt, or the skipped entry if only that."""
    index: dict[int, Json] = {}
    for stage in stages:
        stage_id = int(stage["stageId"])
        current = index.get(stage_id)
        if current is None:
            index[stage_id] = stage
            continue
        skipped_now = current.get("status") == "SKIPPED"
        skipped_new = stage.get("status") == "SKIPPED"
        if (skipped_now and not skipped_new) or (
            skipped_now == skipped_new and int(stage.get("attemptId", 0)) > int(current.get("attemptId", 0))
        ):
            index[stage_id] = stage
    return index


def batch_stages(batch_job_list: Sequence[Json], stages: Mapping[int, Json] | Iterable[Json]) -> tuple[list[Json], list[int]]:
    """The executed stages of one batch in vertex order, and the stage ids missing from REST.

    ``batch_job_list``: the batch's jobs (from :func:`batch_jobs`); ``stages``: ``/stages``
    entries, or a ``stageId -> stage`` mapping. Order: ``(jobId, stageId)``; each stage once;
    ``SKIPPED`` stages are dropped. Returns ``(stages_in_order, missing_stage_ids)``.
    """
    index = stages if isinstance(stages, Mapping) else _stage_index(stages)
    ordered: list[Json] = []
    missing: list[int] = []
    seen: set[int] = set()
    for job in sorted(batch_job_list, key=lambda job: int(job.get("jobId", 0))):
        for stage_id in sorted(int(sid) for sid in job.get("stageIds") or ()):
            if stage_id in seen:
                continue
            seen.add(stage_id)
            stage = index.get(stage_id)
            if stage is None:
                missing.append(stage_id)
            elif stage.get("status") != "SKIPPED":
                ordered.append(stage)
    return ordered, missing


def rest_time_s(value: Any) -> float | None:
    """A REST API date (``"2026-11-21T10:33:56.417GMT"``; ``Z`` or an offset also accepted) in
    epoch seconds, or ``None`` when missing or not a date."""
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    if text.endswith("GMT"):
        text = text[:-3] + "+00:00"
    elif text.endswith("Z"):
        text = text[:-1] + "+00:00"
    try:
        stamp = datetime.fromisoformat(text)
    except ValueError:
        return None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=timezone.utc)
    return stamp.timestamp()


def stages_running_s(stages: Iterable[Json]) -> float | None:
    """Wall time, in seconds, during which at least one of ``stages`` was running: the length of
    the union of their ``[submissionTime, completionTime]`` intervals (``/stages`` entries).

    ``0.0`` for no stages; ``None`` when a stage lacks either time (still running, or not
    submitted), so the caller can tell "no data" from "no stage ran".
    """
    intervals: list[tuple[float, float]] = []
    for stage in stages:
        start = rest_time_s(stage.get("submissionTime"))
        end = rest_time_s(stage.get("completionTime"))
        if start is None or end is None:
            return None
        if end > start:
            intervals.append((start, end))
    total = 0.0
    current_start: float | None = None
    current_end = 0.0
    for start, end in sorted(intervals):
        if current_start is None or start > current_end:
            if current_start is not None:
                total += current_end - current_start
            current_start, current_end = start, end
        else:
            current_end = max(current_end, end)
    if current_start is not None:
        total += current_end - current_start
    return total


# -- progress helpers ---------------------------------------------------------------------------


def progress_time_s(progress: Mapping[str, Any]) -> float:
    """The batch start of a progress (its ``timestamp``, ISO 8601 with ``Z``) in epoch seconds.

    Raises ``ValueError`` if the timestamp is missing or not ISO 8601.
    """
    stamp = progress.get("timestamp")
    if not isinstance(stamp, str):
        raise ValueError(f"progress of batch {progress.get('batchId')} has no 'timestamp' string: {stamp!r}")
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def batch_end_s(progress: Mapping[str, Any]) -> float:
    """When the trigger of a progress completed, in epoch seconds: its ``timestamp`` plus
    ``durationMs.triggerExecution``. A batch belongs to the window that holds its completion, so
    consecutive windows count every batch exactly once.

    Raises ``ValueError`` if the timestamp is missing or not ISO 8601.
    """
    duration_ms = _number((progress.get("durationMs") or {}).get("triggerExecution")) or 0.0
    return progress_time_s(progress) + duration_ms / 1000.0


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def flatten_offsets(offset: Any) -> dict[str, float] | float | None:
    """Normalise a source offset from a progress.

    - ``{"p0": 123, "p1": 45}`` -> ``{"p0": 123.0, "p1": 45.0}``;
    - Kafka ``{"topic": {"0": 123}}`` -> ``{"topic/0": 123.0}``;
    - a JSON string of either is decoded first; a plain number (rate source) -> that float;
    - ``None`` (first batch) or anything non-numeric (e.g. Redis stream ids) -> ``None``.
    """
    if isinstance(offset, str):
        text = offset.strip()
        if text.startswith("{"):
            try:
                offset = json.loads(text)
            except ValueError:
                return None
        else:
            return _number(text)
    if isinstance(offset, Mapping):
        flat: dict[str, float] = {}

        def walk(prefix: str, value: Any) -> bool:
            if isinstance(value, Mapping):
                return all(walk(f"{prefix}{key}/", inner) for key, inner in value.items())
            number = _number(value)
            if number is None:
                return False
            flat[prefix.rstrip("/")] = number
            return True

        return flat if walk("", offset) else None
    return _number(offset)


def _offset_total(offset: dict[str, float] | float | None) -> float | None:
    if offset is None:
        return None
    if isinstance(offset, dict):
        return sum(value for value in offset.values() if value >= 0)
    return offset


def source_backlog(source: Mapping[str, Any]) -> float | None:
    """``latestOffset − endOffset`` of one progress source, in offset units, or ``None``.

    Dict offsets are paired by partition (partitions missing on either side are ignored,
    negative per-partition differences count as 0); plain numbers are subtracted.
    ``None`` when either offset is missing or not numeric, or the shapes differ.
    """
    latest = flatten_offsets(source.get("latestOffset"))
    end = flatten_offsets(source.get("endOffset"))
    if latest is None or end is None:
        return None
    if isinstance(latest, dict) and isinstance(end, dict):
        return sum(max(0.0, latest[key] - end[key]) for key in latest if key in end)
    if isinstance(latest, float) and isinstance(end, float):
        return max(0.0, latest - end)
    return None


def executors_and_cores(executors: Iterable[Json]) -> tuple[int, int]:
    """``(executors, cores)`` from ``/executors``: active non-driver executors and their
    ``totalCores``; in local mode (only the ``driver`` entry) ``(1, driver totalCores)``."""
    active = [e for e in executors if e.get("isActive", True)]
    workers = [e for e in active if e.get("id") != "driver"]
    if workers:
        return len(workers), sum(int(e.get("totalCores") or 0) for e in workers)
    drivers = [e for e in active if e.get("id") == "driver"]
    if drivers and int(drivers[0].get("totalCores") or 0) > 0:
        return 1, int(drivers[0]["totalCores"])
    return 0, 0


def _is_batch_progress(progress: Mapping[str, Any]) -> bool:
    """An idle-trigger progress (no data, nothing run) has no ``addBatch`` duration."""
    return "addBatch" in (progress.get("durationMs") or {})


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


# -- the sample ---------------------------------------------------------------------------------


def sample_from_rest(
    jobs: Sequence[Json],
    stages: Sequence[Json],
    progresses: Sequence[Json],
    executors: Sequence[Json],
    *,
    run_id: str,
    trigger_interval_s: float,
    window_start_s: float,
    window_end_s: float,
    sql: Sequence[Json] | None = None,
    app_id: str = "",
    collected_at: float | None = None,
) -> JobSample:
    """Build the :class:`JobSample` of query run ``run_id`` for the window
    ``[window_start_s, window_end_s)`` (epoch seconds), from REST payloads and progress dicts.

    - ``jobs``, ``stages``, ``executors``: ``/jobs``, ``/stages``, ``/executors`` JSON lists.
    - ``progresses``: progress dicts (``recentProgress``-shaped); only those with this
      ``runId`` count. A batch is in the window when its ``timestamp`` (batch start) is.
    - ``sql``: SQL executions with ``details=true`` for vertex names (optional).
    - ``trigger_interval_s``: the query's processing-time trigger, seconds (0 = as fast as
      possible; ``batch_ratio`` is then 0).
    - ``collected_at`` defaults to ``window_end_s`` so the function stays deterministic.

    Batches in the progress whose jobs or stages are missing from REST are left out of the
    vertices, with a note in ``errors``, and out of the overhead (module docstring). Raises
    ``ValueError`` for an empty or inverted window or a negative trigger interval.
    """
    if not window_end_s > window_start_s:
        raise ValueError(
            f"window must have window_end_s > window_start_s, got [{window_start_s}, {window_end_s})"
        )
    if trigger_interval_s < 0:
        raise ValueError(f"trigger_interval_s must be >= 0 seconds, got {trigger_interval_s}")
    window_s = window_end_s - window_start_s
    errors: list[str] = []

    run_progresses = sorted(
        (p for p in progresses if p.get("runId", run_id) == run_id),
        key=lambda p: (progress_time_s(p), int(p.get("batchId", -1))),
    )
    upto_end = [p for p in run_progresses if batch_end_s(p) < window_end_s]
    in_window = [p for p in upto_end if batch_end_s(p) >= window_start_s]
    batch_by_id: dict[int, Json] = {}
    for progress in in_window:
        if _is_batch_progress(progress):
            batch_by_id[int(progress["batchId"])] = progress
    batch_progresses = [batch_by_id[b] for b in sorted(batch_by_id)]

    # -- vertices from REST --
    jobs_by_batch = batch_jobs(jobs, run_id)
    stage_index = _stage_index(stages)
    executed: list[tuple[Json, list[Json]]] = []
    stage_overheads_s: list[float] = []
    for progress in batch_progresses:
        batch_id = int(progress["batchId"])
        batch_job_list = jobs_by_batch.get(batch_id)
        if not batch_job_list:
            if int(progress.get("numInputRows") or 0) > 0:
                errors.append(
                    f"batch {batch_id}: no job with jobGroup {run_id} and 'batch = {batch_id}' in /jobs "
                    "(not yet listed, or dropped past spark.ui.retainedJobs); left out of the vertices"
                )
            continue
        ordered, missing = batch_stages(batch_job_list, stage_index)
        if not missing:
            running_s = stages_running_s(ordered)
            if running_s is not None:
                trigger_s = float(progress["durationMs"].get("triggerExecution", 0)) / 1000.0
                stage_overheads_s.append(max(0.0, trigger_s - running_s))
        if missing:
            errors.append(
                f"batch {batch_id}: stages {missing} missing from /stages (still running, or dropped "
                "past spark.ui.retainedStages); left out of the vertices"
            )
            continue
        if ordered:
            executed.append((progress, ordered))

    vertices: tuple[VertexSample, ...] = ()
    if executed:
        reference = len(executed[-1][1])
        kept = []
        for progress, ordered in executed:
            if len(ordered) != reference:
                errors.append(
                    f"batch {progress['batchId']}: ran {len(ordered)} stage(s) where the newest batch ran "
                    f"{reference}; left out of the vertices"
                )
            else:
                kept.append((progress, ordered))
        operators = stage_operators(sql or (), jobs)
        vertices = _aggregate_vertices(kept, operators)

    # -- rates and offsets from the progress --
    input_rows = sum(int(p.get("numInputRows") or 0) for p in batch_progresses)
    durations_s = [float(p.get("batchDuration") or 0) / 1000.0 for p in batch_progresses]
    if stage_overheads_s:
        batch_overhead_s = _mean(stage_overheads_s)
    else:
        batch_overhead_s = _mean(
            [
                max(0.0, float(p["durationMs"].get("triggerExecution", 0)) - float(p["durationMs"].get("addBatch", 0)))
                / 1000.0
                for p in batch_progresses
            ]
        )
        if batch_progresses:
            errors.append(
                "batch overhead: no batch in the window has all its stages with submission and completion "
                "times in /stages; triggerExecution − addBatch used, which misses the time inside addBatch "
                "when no task runs"
            )
    batch_duration_s = _mean(durations_s)
    busy_total_s = sum(durations_s)
    records_per_unit = _records_per_offset_unit(batch_progresses)
    newest = upto_end[-1] if upto_end else None
    backlog = _backlog(newest, records_per_unit, errors) if newest is not None else 0
    # The latest offsets of the last progress before the window are the baseline, so a window that
    # holds a single long batch still measures the growth of the log over the whole window.
    baseline = [p for p in upto_end if batch_end_s(p) < window_start_s][-1:]
    arrival = _arrival_rate(baseline + in_window, records_per_unit)
    if arrival is None:
        arrival = input_rows / window_s
    newest_batch = batch_progresses[-1] if batch_progresses else newest
    state_ops = (newest_batch or {}).get("stateOperators") or ()
    executor_count, cores = executors_and_cores(executors)
    named = next((p.get("name") for p in reversed(run_progresses) if p.get("name")), None)

    return JobSample(
        run_id=run_id,
        query_name=named,
        app_id=app_id,
        window_s=window_s,
        batches=len(batch_progresses),
        first_batch_id=int(batch_progresses[0]["batchId"]) if batch_progresses else None,
        last_batch_id=int(batch_progresses[-1]["batchId"]) if batch_progresses else None,
        vertices=vertices,
        backlog=backlog,
        arrival_rate_per_s=arrival,
        input_rate_per_s=input_rows / window_s,
        processed_rate_per_s=input_rows / busy_total_s if busy_total_s > 0 else 0.0,
        batch_duration_s=batch_duration_s,
        trigger_interval_s=trigger_interval_s,
        batch_overhead_s=batch_overhead_s,
        batch_ratio=batch_duration_s / trigger_interval_s if trigger_interval_s > 0 else 0.0,
        executors=executor_count,
        cores=cores,
        state_rows=sum(int(op.get("numRowsTotal") or 0) for op in state_ops),
        state_bytes=sum(int(op.get("memoryUsedBytes") or 0) for op in state_ops),
        collected_at=window_end_s if collected_at is None else collected_at,
        errors=tuple(errors),
    )


def _aggregate_vertices(
    batches: Sequence[tuple[Json, list[Json]]], operators: Mapping[int, list[str]]
) -> tuple[VertexSample, ...]:
    if not batches:
        return ()
    newest_stages = batches[-1][1]
    count = len(newest_stages)
    busy_ms = [0.0] * count
    rec_in = [0] * count
    rec_out = [0] * count
    spill = [0] * count
    for progress, ordered in batches:
        sink_value = (progress.get("sink") or {}).get("numOutputRows")
        sink_rows = int(sink_value) if sink_value is not None else -1
        for position, stage in enumerate(ordered):
            busy_ms[position] += float(stage.get("executorRunTime") or 0)
            spill[position] += int(stage.get("memoryBytesSpilled") or 0) + int(stage.get("diskBytesSpilled") or 0)
            if position == 0:
                records_in = int(stage.get("inputRecords") or 0) or int(progress.get("numInputRows") or 0)
            else:
                records_in = int(stage.get("shuffleReadRecords") or 0)
            rec_in[position] += records_in
            if position < count - 1:
                rec_out[position] += int(stage.get("shuffleWriteRecords") or 0)
            elif sink_rows >= 0:
                rec_out[position] += sink_rows
            else:
                rec_out[position] += int(stage.get("outputRecords") or 0) or records_in

    names: list[str] = []
    for position in range(count):
        name = f"stage {position}"
        for _progress, ordered in reversed(batches):
            ops = operators.get(int(ordered[position]["stageId"]))
            if ops:
                name = " → ".join(ops)
                break
        names.append(name)

    upstream = _upstream(newest_stages)
    return tuple(
        VertexSample(
            vertex_id=vertex_id(position),
            name=names[position],
            position=position,
            is_source=position == 0,
            tasks=int(newest_stages[position].get("numTasks") or 0),
            busy_s=busy_ms[position] / 1000.0,
            records_in=rec_in[position],
            records_out=rec_out[position],
            spill_bytes=spill[position],
            upstream=upstream[position],
        )
        for position in range(count)
    )


def _upstream(ordered: Sequence[Json]) -> list[tuple[str, ...]]:
    position_of = {int(stage["stageId"]): position for position, stage in enumerate(ordered)}
    if any(stage.get("parentIds") for stage in ordered):
        return [
            tuple(
                vertex_id(position_of[int(parent)])
                for parent in sorted(stage.get("parentIds") or ())
                if int(parent) in position_of
            )
            for stage in ordered
        ]
    return [() if position == 0 else (vertex_id(position - 1),) for position in range(len(ordered))]


def _records_per_offset_unit(batch_progresses: Sequence[Json]) -> list[float]:
    """Per source index: records per offset unit for plain-number offsets (1.0 for dicts)."""
    width = max((len(p.get("sources") or ()) for p in batch_progresses), default=0)
    ratios: list[float] = []
    for index in range(width):
        rows = 0.0
        units = 0.0
        for progress in batch_progresses:
            sources = progress.get("sources") or ()
            if index >= len(sources):
                continue
            start = flatten_offsets(sources[index].get("startOffset"))
            end = flatten_offsets(sources[index].get("endOffset"))
            if isinstance(start, float) and isinstance(end, float) and end > start:
                rows += float(sources[index].get("numInputRows") or 0)
                units += end - start
        ratios.append(rows / units if units > 0 and rows > 0 else 1.0)
    return ratios


def _unit_ratio(ratios: Sequence[float], index: int, offset: Any) -> float:
    if isinstance(flatten_offsets(offset), float) and index < len(ratios):
        return ratios[index]
    return 1.0


def _backlog(progress: Json, ratios: Sequence[float], errors: list[str]) -> int:
    total = 0.0
    for index, source in enumerate(progress.get("sources") or ()):
        lag = source_backlog(source)
        if lag is None:
            if source.get("latestOffset") is not None:
                errors.append(
                    f"source {index} ({str(source.get('description', '?'))[:60]}): offsets are not "
                    "numeric; its backlog and arrival rate are not counted"
                )
            continue
        total += lag * _unit_ratio(ratios, index, source.get("latestOffset"))
    return int(round(total))


def _arrival_rate(progresses: Sequence[Json], ratios: Sequence[float]) -> float | None:
    """Growth of Σ latestOffset between the first and last progress of the window, per second.

    ``None`` when fewer than two progresses with numeric offsets span a positive time.
    """
    points: list[tuple[float, list[Any]]] = [
        (progress_time_s(p), [s.get("latestOffset") for s in p.get("sources") or ()]) for p in progresses
    ]
    points = [point for point in points if point[1]]
    if len(points) < 2:
        return None
    (t0, first), (t1, last) = points[0], points[-1]
    if t1 <= t0:
        return None
    growth = 0.0
    counted = False
    for index in range(min(len(first), len(last))):
        before = _offset_total(flatten_offsets(first[index]))
        after = _offset_total(flatten_offsets(last[index]))
        if before is None or after is None:
            continue
        growth += max(0.0, after - before) * _unit_ratio(ratios, index, last[index])
        counted = True
    if not counted:
        return None
    return growth / (t1 - t0)


# -- collection ---------------------------------------------------------------------------------


def _root_execution_id(job: Json) -> int | None:
    for tag in job.get("jobTags") or ():
        match = _ROOT_EXECUTION_TAG.search(str(tag))
        if match:
            return int(match.group(1))
    return None


def _find_sql(client: RestClient, app_id: str, job_list: Sequence[Json], *, probe: int = 4) -> Json | None:
    """The SQL execution that ran ``job_list``: Spark 4 tags a job with
    ``...-execution-root-id-<R>``; the execution is ``R`` or one of the next few."""
    job_ids = {int(job["jobId"]) for job in job_list}
    root = next((r for r in (_root_execution_id(job) for job in job_list) if r is not None), None)
    if root is None:
        return None
    for execution_id in range(root, root + probe):
        execution = client.sql_execution(app_id, execution_id, True)
        ran = set(execution.get("successJobIds") or ()) | set(execution.get("runningJobIds") or ())
        ran |= set(execution.get("failedJobIds") or ())
        if job_ids & {int(j) for j in ran}:
            return execution
    return None


def collect_sample(
    client: RestClient,
    app_id: str,
    progresses: Sequence[Json],
    *,
    run_id: str,
    trigger_interval_s: float,
    window_s: float,
    now_s: float,
) -> JobSample:
    """Fetch ``/jobs``, ``/stages?status=complete``, ``/executors`` and the newest batch's SQL
    execution, and build the sample for the window ``[now_s - window_s, now_s)``.

    ``progresses``: the query's recent progress dicts; ``now_s``: epoch seconds.
    SQL lookup failures only cost the vertex names (noted in ``errors``). Raises
    :class:`sparkclient.rest.SparkRestError` when jobs, stages or executors cannot be fetched,
    ``ValueError`` for ``window_s <= 0``.
    """
    if window_s <= 0:
        raise ValueError(f"window_s must be > 0 seconds, got {window_s}")
    start_s = now_s - window_s
    jobs = client.jobs(app_id)
    stages = client.stages(app_id, "complete")
    executors = client.executors(app_id)

    notes: list[str] = []
    sql: list[Json] = []
    by_batch = batch_jobs(jobs, run_id)
    in_window = sorted(
        (
            int(p["batchId"])
            for p in progresses
            if p.get("runId", run_id) == run_id and start_s <= batch_end_s(p) < now_s and _is_batch_progress(p)
        ),
        reverse=True,
    )
    newest_with_jobs = next((b for b in in_window if b in by_batch), None)
    if newest_with_jobs is not None:
        try:
            execution = _find_sql(client, app_id, by_batch[newest_with_jobs])
        except SparkRestError as exc:
            execution = None
            notes.append(f"SQL execution of batch {newest_with_jobs} not available ({exc}); vertex names fall back")
        if execution is not None:
            sql.append(execution)
        elif not notes:
            notes.append(f"no SQL execution found for batch {newest_with_jobs}; vertex names fall back")

    sample = sample_from_rest(
        jobs,
        stages,
        progresses,
        executors,
        run_id=run_id,
        trigger_interval_s=trigger_interval_s,
        window_start_s=start_s,
        window_end_s=now_s,
        sql=sql,
        app_id=app_id,
        collected_at=now_s,
    )
    if notes:
        sample = replace(sample, errors=sample.errors + tuple(notes))
    return sample

