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

The window rule (both modes: a live collect and a folder of captures): see
:func:`window_batches`. Sources (backlog per source kind, arrival rate from offsets over wall
time): see :mod:`sparkclient.sources`.

Every field read from Spark goes through :mod:`sparkclient.sparkjson`: a malformed payload gives
a :class:`sparkclient.sparkjson.SparkDataError` naming the field, never another exception, and a
:class:`JobSample` holds only finite, non-negative numbers (:class:`SampleError` otherwise).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from datetime import datetime, timezone
from enum import StrEnum
from typing import Any, Protocol

from sparkclient.plan import stage_operators
from sparkclient.rest import SparkRestError
from sparkclient.sources import (
    BacklogUnknown,
    batch_cut_s,
    flatten_offsets,
    measure_sources,
    rate_creation_s,
    source_backlog,
)
from sparkclient.sparkjson import (
    Problem,
    SparkDataError,
    as_dict,
    dicts,
    get_count,
    get_dict,
    get_float,
    get_list,
    get_str,
)

__all__ = [
    "BatchWindow",
    "JobSample",
    "RatesUnavailable",
    "SampleError",
    "VertexSample",
    "batch_end_s",
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
    "window_batches",
]

Json = dict[str, Any]

_BATCH_LINE = re.compile(r"^[ \t]*batch[ \t]*=[ \t]*(\d{1,18})[ \t]*$", re.MULTILINE)
_RUN_ID_LINE = re.compile(r"^[ \t]*runId[ \t]*=[ \t]*(\S+)[ \t]*$", re.MULTILINE)
_ROOT_EXECUTION_TAG = re.compile(r"-execution-root-id-(\d{1,18})$")


class SampleError(ValueError):
    """A sample value is not a finite, non-negative number (``field``, ``value``): it is refused
    before it is stored. Raised by :class:`JobSample` and :class:`VertexSample` on construction."""

    def __init__(self, field: str, value: Any) -> None:
        self.field = field
        self.value = value
        super().__init__(f"sample refused: {field} must be a finite number >= 0, got {value!r}")


def _check_numbers(obj: Any, prefix: str) -> None:
    for f in fields(obj):
        value = getattr(obj, f.name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if not math.isfinite(value) or value < 0:
            raise SampleError(f"{prefix}{f.name}", value)


class RatesUnavailable(StrEnum):
    """Why a sample has no rates (they are then not reported as 0)."""

    NO_INPUT_RECORDS = "no-input-records"  # no progress published, and the stages report no inputRecords


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
    - ``span_s``: seconds spanned by the batches aggregated here (:func:`window_batches`); the
      vertex's per-second rates divide by it. 0 means "the sample's ``window_s``".

    Raises :class:`SampleError` for a negative or non-finite number.
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
    span_s: float = 0.0

    def __post_init__(self) -> None:
        _check_numbers(self, f"vertex {self.vertex_id}: ")


@dataclass(frozen=True)
class JobSample:
    """One collect of one streaming query (one ``runId``) over a window; see the field comments
    in ARCHITECTURE.md. Rates are records per second, durations seconds, sizes bytes.

    - ``window_s``: the seconds the window's batches span (:func:`window_batches`); every rate
      of the sample is a count over it.
    - ``arrival_rate_per_s``: records/s arriving at the sources, from their offsets over wall
      time (:mod:`sparkclient.sources`), not from the rows the batches took.
    - ``input_rate_per_s``: rows the window's batches took, per second of ``window_s``.
    - ``processed_rate_per_s``: those rows per second of batch duration.
    - ``backlog``: records waiting at the sources whose backlog is known, at the window's end;
      ``backlog_unknown`` lists the others, with the reason.
    - ``batch_overhead_s``: mean time per batch spent outside tasks (module docstring).
    - ``rates_unavailable``: set when the rows are not known at all (then every rate is 0 and
      must not be read as a measurement).

    Raises :class:`SampleError` for a negative or non-finite number.
    """

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
    backlog_unknown: tuple[BacklogUnknown, ...] = ()
    rates_unavailable: RatesUnavailable | None = None

    def __post_init__(self) -> None:
        _check_numbers(self, "")


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


def _job_batch(job: Mapping[str, Any], run_id: str, where: str) -> int | None:
    description = get_str(job, "description", where)
    run_ids = _RUN_ID_LINE.findall(description)
    if job.get("jobGroup") != run_id and run_id not in run_ids:
        return None
    match = _BATCH_LINE.search(description)
    return int(match.group(1)) if match else None


def batch_jobs(jobs: Iterable[Json], run_id: str) -> dict[int, list[Json]]:
    """Group the jobs of one query run by batch id.

    ``jobs``: ``/jobs`` entries. A job is taken when ``jobGroup == run_id`` (or its description
    has ``runId = <run_id>``) and its description has a ``batch = N`` line.
    Returns ``{batch_id: [job, ...]}`` with each list ordered by ``jobId``. Raises
    :class:`SparkDataError` for a malformed job (e.g. ``jobs[3].jobId`` not an integer).
    """
    grouped: dict[int, list[tuple[int, Json]]] = {}
    for index, job in enumerate(dicts(jobs, "jobs")):
        where = f"jobs[{index}]"
        batch = _job_batch(job, run_id, where)
        if batch is not None:
            grouped.setdefault(batch, []).append((get_count(job, "jobId", where), job))
    return {batch: [job for _id, job in sorted(items, key=lambda item: item[0])] for batch, items in grouped.items()}


def _stage_index(stages: Iterable[Json]) -> dict[int, Json]:
    """``stageId -> stage``: the highest non-skipped attempt, or the skipped entry if only that."""
    index: dict[int, Json] = {}
    attempts: dict[int, int] = {}
    for position, stage in enumerate(dicts(stages, "stages")):
        where = f"stages[{position}]"
        if stage.get("stageId") is None:
            raise SparkDataError(f"{where}.stageId", Problem.MISSING, "an integer")
        stage_id = get_count(stage, "stageId", where)
        attempt = get_count(stage, "attemptId", where)
        current = index.get(stage_id)
        if current is None:
            index[stage_id], attempts[stage_id] = stage, attempt
            continue
        skipped_now = current.get("status") == "SKIPPED"
        skipped_new = stage.get("status") == "SKIPPED"
        if (skipped_now and not skipped_new) or (skipped_now == skipped_new and attempt > attempts[stage_id]):
            index[stage_id], attempts[stage_id] = stage, attempt
    return index


def _stage_ids(job: Mapping[str, Any], where: str) -> list[int]:
    ids = get_list(job, "stageIds", where)
    out = []
    for position, value in enumerate(ids):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**53:
            raise SparkDataError(f"{where}.stageIds[{position}]", Problem.WRONG_TYPE, "a stage id (integer >= 0)",
                                 value)
        out.append(value)
    return sorted(out)


def batch_stages(batch_job_list: Sequence[Json], stages: Mapping[int, Json] | Iterable[Json]) -> tuple[list[Json], list[int]]:
    """The executed stages of one batch in vertex order, and the stage ids missing from REST.

    ``batch_job_list``: the batch's jobs (from :func:`batch_jobs`); ``stages``: ``/stages``
    entries, or a ``stageId -> stage`` mapping. Order: ``(jobId, stageId)``; each stage once;
    ``SKIPPED`` stages are dropped. Returns ``(stages_in_order, missing_stage_ids)``.
    Raises :class:`SparkDataError` for a malformed job or stage.
    """
    index = stages if isinstance(stages, Mapping) else _stage_index(stages)
    ordered: list[Json] = []
    missing: list[int] = []
    seen: set[int] = set()
    jobs = dicts(batch_job_list, "jobs")
    keyed = sorted(((get_count(job, "jobId", f"jobs[{i}]"), i, job) for i, job in enumerate(jobs)),
                   key=lambda item: (item[0], item[1]))
    for job_id, _i, job in keyed:
        for stage_id in _stage_ids(job, f"job {job_id}"):
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
    if not isinstance(value, str) or not value.strip() or len(value) > 64:
        return None
    text = value.strip()
    if text.endswith("GMT"):
        text = text[:-3] + "+00:00"
    elif text.endswith("Z"):
        text = text[:-1] + "+00:00"
    try:
        stamp = datetime.fromisoformat(text)
        if stamp.tzinfo is None:
            stamp = stamp.replace(tzinfo=timezone.utc)
        return stamp.timestamp()
    except (ValueError, OverflowError):
        return None


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


# -- progress ----------------------------------------------------------------------------------


def _where(progress: Mapping[str, Any]) -> str:
    batch = progress.get("batchId")
    return f"progress[batch {batch}]" if isinstance(batch, int) and not isinstance(batch, bool) else "progress"


def progress_time_s(progress: Mapping[str, Any]) -> float:
    """The batch start of a progress (its ``timestamp``, ISO 8601 with ``Z``) in epoch seconds.

    Raises :class:`SparkDataError` (a ``ValueError``) if the timestamp is missing or not ISO 8601.
    """
    where = _where(progress)
    stamp = progress.get("timestamp")
    if not isinstance(stamp, str):
        raise SparkDataError(f"{where}.timestamp", Problem.MISSING if stamp is None else Problem.WRONG_TYPE,
                             "an ISO 8601 time string", stamp)
    value = rest_time_s(stamp)
    if value is None:
        raise SparkDataError(f"{where}.timestamp", Problem.MALFORMED, "an ISO 8601 time string", stamp)
    return value


def _durations(progress: Mapping[str, Any]) -> Mapping[str, Any]:
    return get_dict(progress, "durationMs", _where(progress))


def _duration_s(progress: Mapping[str, Any], key: str) -> float:
    return get_float(_durations(progress), key, f"{_where(progress)}.durationMs") / 1000.0


def batch_end_s(progress: Mapping[str, Any]) -> float:
    """When the trigger of a progress completed, in epoch seconds: its ``timestamp`` plus
    ``durationMs.triggerExecution``. A batch belongs to the window that holds its completion, so
    consecutive windows count every batch exactly once.

    Raises :class:`SparkDataError` if the timestamp is missing or not ISO 8601, or the duration
    is not a finite number >= 0.
    """
    return progress_time_s(progress) + _duration_s(progress, "triggerExecution")


def _is_batch_progress(progress: Mapping[str, Any]) -> bool:
    """An idle-trigger progress (no data, nothing run) has no ``addBatch`` duration."""
    durations = progress.get("durationMs")
    return isinstance(durations, Mapping) and "addBatch" in durations


def _check_progress(progress: Any, position: int) -> Json:
    """``progress`` when every field the sample reads is well formed, else :class:`SparkDataError`."""
    p = as_dict(progress, f"progress[{position}]")
    where = _where(p)
    if p.get("batchId") is None:
        raise SparkDataError(f"{where}.batchId", Problem.MISSING, "an integer")
    get_count(p, "batchId", where)
    get_str(p, "runId", where)
    get_str(p, "id", where)
    get_str(p, "name", where)
    progress_time_s(p)
    for key, value in _durations(p).items():
        get_float({key: value}, key, f"{where}.durationMs")
    get_count(p, "numInputRows", where)
    get_float(p, "batchDuration", where)
    sink = get_dict(p, "sink", where)
    get_count(sink, "numOutputRows", f"{where}.sink", minimum=-1)
    for index, op in enumerate(get_list(p, "stateOperators", where)):
        op = as_dict(op, f"{where}.stateOperators[{index}]")
        get_count(op, "numRowsTotal", f"{where}.stateOperators[{index}]")
        get_count(op, "memoryUsedBytes", f"{where}.stateOperators[{index}]")
    for index, source in enumerate(get_list(p, "sources", where)):
        source = as_dict(source, f"{where}.sources[{index}]")
        get_count(source, "numInputRows", f"{where}.sources[{index}]")
    return p


def _query_progresses(progresses: Sequence[Any], run_id: str) -> list[Json]:
    """The checked progresses of the query that ran ``run_id`` (same ``id``; all when no ``id``)."""
    checked = [_check_progress(p, i) for i, p in enumerate(progresses)]
    query_ids = {p.get("id") for p in checked if p.get("runId") == run_id and p.get("id")}
    return [p for p in checked if not query_ids or p.get("id") in query_ids or p.get("runId") == run_id]


# -- the window rule ---------------------------------------------------------------------------


@dataclass(frozen=True)
class BatchWindow:
    """The batches of one window and the time they span (:func:`window_batches`).

    ``batches``: batch progresses counted, by ``batchId``; ``spans``: per batch id, its span
    ``(start_s, end_s)`` in epoch seconds; ``start_s``/``end_s``: the window's span.
    """

    batches: tuple[Json, ...]
    spans: Mapping[int, tuple[float, float]]
    start_s: float
    end_s: float

    @property
    def span_s(self) -> float:
        return max(0.0, self.end_s - self.start_s)

    def span_of(self, batch_ids: Iterable[int]) -> float:
        """Seconds spanned by the given batches of the window (sum of their spans)."""
        return sum(self.spans[b][1] - self.spans[b][0] for b in batch_ids if b in self.spans)


def window_batches(
    progresses: Sequence[Json],
    *,
    run_id: str,
    window_start_s: float | None,
    window_end_s: float,
) -> BatchWindow:
    """THE window rule, for a live collect and for captures alike.

    **Which batches.** A batch of run ``run_id`` (a progress with an ``addBatch`` duration) is in
    the window ``[window_start_s, window_end_s)`` when it *completed* inside it:
    ``timestamp + triggerExecution ∈ [window_start_s, window_end_s)``; ``window_start_s=None``
    takes every batch of the run that completed before ``window_end_s``. Consecutive windows
    therefore count every batch exactly once.

    **What time they span.** Each batch carries the data that arrived between two *cuts*: the
    moment the previous batch of the query fixed its end offsets and the moment it fixed its own.
    The cut ``c_i`` of batch ``i`` is its start (``timestamp``, where Spark fetches the latest
    offsets); for a query whose only source is the ``rate`` source it is exactly
    ``creation + endOffset`` (its offsets are generation seconds, :mod:`sparkclient.sources`).
    The span of batch ``i`` is ``[c_{i−1}, c_i)``, where ``i−1`` is the query's previous batch,
    *of any run*: the catch-up batch after a restart spans the downtime whose rows it carries.
    The query's very first batch has no previous one; its span starts at its own start.

    **Rates.** Every rate of a window is ``Σ_counted rows / (c_last − c_{before first})``: the
    window's span is ``[c_{i₀−1}, c_{i₁})`` for the first and last counted batches ``i₀, i₁``.
    For a steady source at R rows/s every batch carries ``R × (c_i − c_{i−1})`` rows, so the
    rate is R for any number of batches (no fencepost: N batches, N spans).

    ``progresses``: the query's progress dicts (any order, any run; other runs of the query are
    used only to find the previous batch). Raises :class:`SparkDataError` for a malformed
    progress, ``ValueError`` for an inverted window.
    """
    if window_start_s is not None and not window_end_s > window_start_s:
        raise ValueError(f"window must have window_end_s > window_start_s, got [{window_start_s}, {window_end_s})")
    query = _query_progresses(progresses, run_id)
    batch_by_id: dict[int, Json] = {}
    for p in query:
        if _is_batch_progress(p):
            batch_id = int(p["batchId"])
            # a batch id re-run after a failure: the newest attempt counts
            if batch_id not in batch_by_id or progress_time_s(p) >= progress_time_s(batch_by_id[batch_id]):
                batch_by_id[batch_id] = p
    counted = [
        batch_by_id[b] for b in sorted(batch_by_id)
        if batch_by_id[b].get("runId", run_id) == run_id
        and batch_end_s(batch_by_id[b]) < window_end_s
        and (window_start_s is None or batch_end_s(batch_by_id[b]) >= window_start_s)
    ]
    creation = rate_creation_s([p for p in query if batch_end_s(p) < window_end_s])
    spans: dict[int, tuple[float, float]] = {}
    ordered_ids = sorted(batch_by_id)
    for p in counted:
        batch_id = int(p["batchId"])
        cut = batch_cut_s(p, creation)
        assert cut is not None  # _check_progress validated the timestamp
        position = ordered_ids.index(batch_id)
        previous = batch_by_id[ordered_ids[position - 1]] if position > 0 else None
        before = batch_cut_s(previous, creation) if previous is not None else None
        start = progress_time_s(p) if before is None or before > cut else before
        spans[batch_id] = (min(start, cut), cut)
    if not counted:
        end = window_end_s
        return BatchWindow((), {}, window_start_s if window_start_s is not None else end, end)
    start_s = spans[int(counted[0]["batchId"])][0]
    end_s = spans[int(counted[-1]["batchId"])][1]
    if end_s <= start_s:  # only the query's first batch: its own run time
        end_s = max(batch_end_s(counted[-1]), start_s + 0.001)
        spans[int(counted[-1]["batchId"])] = (spans[int(counted[-1]["batchId"])][0], end_s)
    return BatchWindow(tuple(counted), spans, start_s, end_s)


def executors_and_cores(executors: Iterable[Json]) -> tuple[int, int]:
    """``(executors, cores)`` from ``/executors``: active non-driver executors and their
    ``totalCores``; in local mode (only the ``driver`` entry) ``(1, driver totalCores)``.
    Raises :class:`SparkDataError` for a malformed entry."""
    entries = dicts(executors, "executors")
    active = [(i, e) for i, e in enumerate(entries) if e.get("isActive", True) is not False]
    workers = [(i, e) for i, e in active if e.get("id") != "driver"]
    if workers:
        return len(workers), sum(get_count(e, "totalCores", f"executors[{i}]") for i, e in workers)
    drivers = [(i, e) for i, e in active if e.get("id") == "driver"]
    if drivers:
        cores = get_count(drivers[0][1], "totalCores", f"executors[{drivers[0][0]}]")
        if cores > 0:
            return 1, cores
    return 0, 0


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
    window_start_s: float | None,
    window_end_s: float,
    sql: Sequence[Json] | None = None,
    app_id: str = "",
    collected_at: float | None = None,
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

    Batches in the progress whose jobs or stages are missing from REST are left out of the
    vertices, with a note in ``errors``, and out of the overhead (module docstring). Raises
    :class:`SparkDataError` for a malformed payload (naming the field), ``ValueError`` for an
    inverted window or a negative or non-finite trigger interval.
    """
    if not math.isfinite(trigger_interval_s) or trigger_interval_s < 0:
        raise ValueError(f"trigger_interval_s must be a finite number >= 0 seconds, got {trigger_interval_s}")
    if not math.isfinite(window_end_s) or (window_start_s is not None and not math.isfinite(window_start_s)):
        raise ValueError(f"window bounds must be finite, got [{window_start_s}, {window_end_s})")
    progresses = dicts(progresses, "progress")
    window = window_batches(progresses, run_id=run_id, window_start_s=window_start_s, window_end_s=window_end_s)
    batch_progresses = list(window.batches)
    window_s = window.span_s if batch_progresses else (
        window_end_s - window_start_s if window_start_s is not None else 0.0)
    errors: list[str] = []
    now_s = window_end_s if collected_at is None else collected_at

    # -- vertices from REST --
    jobs_by_batch = batch_jobs(jobs, run_id)
    stage_index = _stage_index(stages)
    executed: list[tuple[Json, list[Json]]] = []
    stage_overheads_s: list[float] = []
    for progress in batch_progresses:
        batch_id = int(progress["batchId"])
        batch_job_list = jobs_by_batch.get(batch_id)
        if not batch_job_list:
            if get_count(progress, "numInputRows", _where(progress)) > 0:
                errors.append(
                    f"batch {batch_id}: no job with jobGroup {run_id} and 'batch = {batch_id}' in /jobs "
                    "(not yet listed, or dropped past spark.ui.retainedJobs); left out of the vertices"
                )
            continue
        ordered, missing = batch_stages(batch_job_list, stage_index)
        if not missing:
            running_s = stages_running_s(ordered)
            if running_s is not None:
                stage_overheads_s.append(max(0.0, _duration_s(progress, "triggerExecution") - running_s))
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
        try:
            operators = stage_operators(dicts(sql or [], "sql"), jobs)
        except SparkDataError as exc:
            operators = {}
            errors.append(f"SQL plan not usable ({exc}); vertex names fall back")
        span_s = window.span_of(int(p["batchId"]) for p, _stages in kept)
        vertices = _aggregate_vertices(kept, operators, span_s=span_s)

    # -- rates and offsets from the progress --
    rates_unavailable: RatesUnavailable | None = None
    if batch_progresses and all(p.get("numInputRows") is None for p in batch_progresses) \
            and not any(v.records_in for v in vertices[:1]):
        rates_unavailable = RatesUnavailable.NO_INPUT_RECORDS
        errors.append("rates unavailable: no progress is published for this query and its source stages report "
                      "no inputRecords; publish the progress (RedisProgressListener) to measure rates")
    input_rows = sum(get_count(p, "numInputRows", _where(p)) for p in batch_progresses)
    rebuilt = bool(batch_progresses) and all(p.get("numInputRows") is None for p in batch_progresses)
    if input_rows == 0 and vertices and rebuilt:
        input_rows = vertices[0].records_in  # progress rebuilt from /jobs: rows from the stages
    durations_s = [get_float(p, "batchDuration", _where(p)) / 1000.0 for p in batch_progresses]
    if stage_overheads_s:
        batch_overhead_s = _mean(stage_overheads_s)
    else:
        batch_overhead_s = _mean(
            [max(0.0, _duration_s(p, "triggerExecution") - _duration_s(p, "addBatch")) for p in batch_progresses]
        )
        if batch_progresses:
            errors.append(
                "batch overhead: no batch in the window has all its stages with submission and completion "
                "times in /stages; triggerExecution − addBatch used, which misses the time inside addBatch "
                "when no task runs"
            )
    batch_duration_s = _mean(durations_s)
    busy_total_s = sum(durations_s)
    history = sorted((p for p in _query_progresses(progresses, run_id) if batch_end_s(p) < window_end_s),
                     key=progress_time_s)
    report = measure_sources(history, batch_progresses, now_s=now_s)
    input_rate = input_rows / window_s if window_s > 0 else 0.0
    arrival = report.arrival_per_s
    if arrival is None:
        arrival = input_rate
        if batch_progresses and rates_unavailable is None:
            errors.append("arrival rate: a source gives no offsets to measure it; the rows the batches took "
                          "per second of the time they span are used instead")
    errors.extend(entry.message for entry in report.unknown)
    newest_batch = batch_progresses[-1] if batch_progresses else (history[-1] if history else None)
    where = _where(newest_batch or {})
    state_ops = [as_dict(op, f"{where}.stateOperators") for op in get_list(newest_batch or {}, "stateOperators", where)]
    executor_count, cores = executors_and_cores(executors)
    run_progresses = [p for p in progresses if p.get("runId", run_id) == run_id]
    named = next((p.get("name") for p in reversed(run_progresses) if isinstance(p.get("name"), str) and p.get("name")),
                 None)

    return JobSample(
        run_id=run_id,
        query_name=named,
        app_id=app_id,
        window_s=window_s,
        batches=len(batch_progresses),
        first_batch_id=int(batch_progresses[0]["batchId"]) if batch_progresses else None,
        last_batch_id=int(batch_progresses[-1]["batchId"]) if batch_progresses else None,
        vertices=vertices,
        backlog=report.backlog,
        arrival_rate_per_s=arrival,
        input_rate_per_s=input_rate,
        processed_rate_per_s=input_rows / busy_total_s if busy_total_s > 0 else 0.0,
        batch_duration_s=batch_duration_s,
        trigger_interval_s=trigger_interval_s,
        batch_overhead_s=batch_overhead_s,
        batch_ratio=batch_duration_s / trigger_interval_s if trigger_interval_s > 0 else 0.0,
        executors=executor_count,
        cores=cores,
        state_rows=sum(get_count(op, "numRowsTotal", f"{where}.stateOperators") for op in state_ops),
        state_bytes=sum(get_count(op, "memoryUsedBytes", f"{where}.stateOperators") for op in state_ops),
        collected_at=now_s,
        errors=tuple(errors),
        backlog_unknown=report.unknown,
        rates_unavailable=rates_unavailable,
    )


def _aggregate_vertices(
    batches: Sequence[tuple[Json, list[Json]]], operators: Mapping[int, list[str]], *, span_s: float = 0.0
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
        batch_where = _where(progress)
        sink_rows = get_count(get_dict(progress, "sink", batch_where), "numOutputRows", f"{batch_where}.sink",
                              default=-1, minimum=-1)
        for position, stage in enumerate(ordered):
            where = f"stage {stage.get('stageId')}"
            busy_ms[position] += get_float(stage, "executorRunTime", where)
            spill[position] += (get_count(stage, "memoryBytesSpilled", where)
                                + get_count(stage, "diskBytesSpilled", where))
            if position == 0:
                records_in = get_count(stage, "inputRecords", where) or get_count(progress, "numInputRows", batch_where)
            else:
                records_in = get_count(stage, "shuffleReadRecords", where)
            rec_in[position] += records_in
            if position < count - 1:
                rec_out[position] += get_count(stage, "shuffleWriteRecords", where)
            elif sink_rows >= 0:
                rec_out[position] += sink_rows
            else:
                rec_out[position] += get_count(stage, "outputRecords", where) or records_in

    names: list[str] = []
    for position in range(count):
        name = f"stage {position}"
        for _progress, ordered in reversed(batches):
            ops = operators.get(get_count(ordered[position], "stageId", "stage"))
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
            tasks=get_count(newest_stages[position], "numTasks", f"stage {newest_stages[position].get('stageId')}"),
            busy_s=busy_ms[position] / 1000.0,
            records_in=rec_in[position],
            records_out=rec_out[position],
            spill_bytes=spill[position],
            upstream=upstream[position],
            span_s=span_s,
        )
        for position in range(count)
    )


def _upstream(ordered: Sequence[Json]) -> list[tuple[str, ...]]:
    position_of = {get_count(stage, "stageId", "stage"): position for position, stage in enumerate(ordered)}
    parents = [_stage_parent_ids(stage) for stage in ordered]
    if any(parents):
        return [
            tuple(vertex_id(position_of[parent]) for parent in sorted(ids) if parent in position_of)
            for ids in parents
        ]
    return [() if position == 0 else (vertex_id(position - 1),) for position in range(len(ordered))]


def _stage_parent_ids(stage: Mapping[str, Any]) -> list[int]:
    where = f"stage {stage.get('stageId')}"
    out = []
    for position, value in enumerate(get_list(stage, "parentIds", where)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise SparkDataError(f"{where}.parentIds[{position}]", Problem.WRONG_TYPE, "a stage id", value)
        out.append(value)
    return out


# -- collection ---------------------------------------------------------------------------------


def _root_execution_id(job: Json) -> int | None:
    tags = job.get("jobTags")
    for tag in tags if isinstance(tags, list) else ():
        match = _ROOT_EXECUTION_TAG.search(str(tag))
        if match:
            return int(match.group(1))
    return None


def _job_ids(execution: Mapping[str, Any]) -> set[int]:
    ran: set[int] = set()
    for key in ("successJobIds", "runningJobIds", "failedJobIds"):
        for value in get_list(execution, key, "sql execution"):
            if isinstance(value, int) and not isinstance(value, bool):
                ran.add(value)
    return ran


def _find_sql(client: RestClient, app_id: str, job_list: Sequence[Json], *, probe: int = 4) -> Json | None:
    """The SQL execution that ran ``job_list``: Spark 4 tags a job with
    ``...-execution-root-id-<R>``; the execution is ``R`` or one of the next few."""
    job_ids = {get_count(job, "jobId", "job") for job in job_list}
    root = next((r for r in (_root_execution_id(job) for job in job_list) if r is not None), None)
    if root is None:
        return None
    for execution_id in range(root, root + probe):
        execution = client.sql_execution(app_id, execution_id, True)
        if job_ids & _job_ids(as_dict(execution, f"sql/{execution_id}")):
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
    execution, and build the sample for the window ``[now_s - window_s, now_s)``
    (:func:`window_batches`).

    ``progresses``: the query's recent progress dicts (any run: the previous run's last batch
    gives the span of a catch-up batch); ``now_s``: epoch seconds. SQL lookup failures only cost
    the vertex names (noted in ``errors``). Raises :class:`sparkclient.rest.SparkRestError` when
    jobs, stages or executors cannot be fetched, :class:`SparkDataError` when a payload or a
    progress is malformed, ``ValueError`` for ``window_s <= 0``.
    """
    if not window_s > 0 or not math.isfinite(window_s):
        raise ValueError(f"window_s must be a finite number > 0 seconds, got {window_s}")
    start_s = now_s - window_s
    jobs = dicts(client.jobs(app_id), "jobs")
    stages = dicts(client.stages(app_id, "complete"), "stages")
    executors = dicts(client.executors(app_id), "executors")

    notes: list[str] = []
    sql: list[Json] = []
    by_batch = batch_jobs(jobs, run_id)
    window = window_batches(dicts(progresses, "progress"), run_id=run_id,
                            window_start_s=start_s, window_end_s=now_s)
    in_window = [int(p["batchId"]) for p in reversed(window.batches)]
    newest_with_jobs = next((b for b in in_window if b in by_batch), None)
    if newest_with_jobs is not None:
        try:
            execution = _find_sql(client, app_id, by_batch[newest_with_jobs])
        except (SparkRestError, SparkDataError) as exc:
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
