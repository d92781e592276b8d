"""The jobs and stages of one micro-batch, from the REST API's ``/jobs`` and ``/stages`` JSON: which
jobs ran batch ``N`` of a query run, its executed stages in vertex order, and the wall time they
ran; and the executors and cores from ``/executors``. The rules are in :mod:`sparkclient.collector.topology`'s
docstring ("Jobs of a batch", "Stages of a batch", "Vertex = stage position", "Batch overhead").
Pure functions over JSON; a malformed payload raises :class:`sparkclient.collector.sparkjson.SparkDataError`
naming the field."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from sparkclient.collector.sparkjson import (
    MAX_CORES,
    Problem,
    SparkDataError,
    as_dict,
    as_list,
    dicts,
    finite,
    get_count,
    get_float,
    get_list,
    get_str,
    id_list,
)

__all__ = ["BATCH_STAGE_STATUSES", "BROADCAST_JOB_TAG", "FOLDED_FIELDS", "batch_jobs", "batch_stages",
           "dataflow_order", "executors_and_cores", "fold_rereads", "is_broadcast_job", "rest_time_s",
           "slowest_task_run_ms", "stage_index", "stages_running_s", "vertex_id", "vertex_order"]

Json = dict[str, Any]

_BATCH_LINE = re.compile(r"^[ \t]*batch[ \t]*=[ \t]*(\d{1,18})[ \t]*$", re.MULTILINE)
_RUN_ID_LINE = re.compile(r"^[ \t]*runId[ \t]*=[ \t]*(\S+)[ \t]*$", re.MULTILINE)


#: The ``/stages`` statuses a finished batch's stages have: a stage whose shuffle output an earlier
#: job of the batch already wrote is listed as ``skipped`` (and left out of the vertices), not ``complete``.
BATCH_STAGE_STATUSES = ("complete", "skipped")


def slowest_task_run_ms(summary: Any, where: str = "taskSummary") -> float:
    """The slowest task's ``executorRunTime``, ms, from a stage attempt's
    ``/stages/<id>/<attempt>/taskSummary?quantiles=1.0`` (Spark's ``TaskMetricDistributions``: a
    ``quantiles`` list and, per metric, one value per quantile). The value at quantile 1.0 is the
    maximum over the stage's successful tasks.

    Raises :class:`SparkDataError` naming the field when the payload is not an object, has no
    quantile 1.0, or its ``executorRunTime`` list is not as long as ``quantiles``, holds a value
    that is not a finite number >= 0, or is out of order (``Problem.UNORDERED``: quantiles ascend,
    so do their values, ``min ≤ p25 ≤ med ≤ p75 ≤ max``).
    """
    payload = as_dict(summary, where)
    quantiles = as_list(payload.get("quantiles"), f"{where}.quantiles")
    at = next((i for i, q in enumerate(quantiles)
               if not isinstance(q, bool) and isinstance(q, (int, float)) and q == 1.0), None)
    if at is None:
        raise SparkDataError(f"{where}.quantiles", Problem.MISSING, "the quantile 1.0", list(quantiles))
    run_times = as_list(payload.get("executorRunTime"), f"{where}.executorRunTime")
    if len(run_times) != len(quantiles):
        raise SparkDataError(f"{where}.executorRunTime", Problem.MALFORMED,
                             f"{len(quantiles)} values, one per quantile", list(run_times))
    values = [finite(value, f"{where}.executorRunTime[{i}]") for i, value in enumerate(run_times)]
    points = sorted(zip(quantiles, values, strict=True), key=lambda point: _quantile(point[0]))
    if any(b[1] < a[1] for a, b in zip(points, points[1:])):
        raise SparkDataError(f"{where}.executorRunTime", Problem.UNORDERED,
                             "values ascending with the quantiles", list(run_times))
    return values[at]


def _quantile(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else -1.0


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


def stage_index(stages: Iterable[Json]) -> dict[int, Json]:
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


#: The start of the job tag Spark 4 gives the job that collects a broadcast relation
#: (``BroadcastExchangeExec``: ``broadcast exchange (runId <uuid>)``); the job keeps the query's job
#: group and ``batch = N`` description, so it is listed among the batch's jobs.
BROADCAST_JOB_TAG = "broadcast exchange (runId "


def is_broadcast_job(job: Mapping[str, Any], where: str = "job") -> bool:
    """Whether ``job`` (a ``/jobs`` entry) collects a broadcast relation: one of its ``jobTags`` starts
    with :data:`BROADCAST_JOB_TAG`. Raises :class:`SparkDataError` for a tag that is not a string."""
    for index, tag in enumerate(get_list(job, "jobTags", where)):
        if not isinstance(tag, str):
            raise SparkDataError(f"{where}.jobTags[{index}]", Problem.WRONG_TYPE, "a string", tag)
        if tag.startswith(BROADCAST_JOB_TAG):
            return True
    return False


def _stage_ids(job: Mapping[str, Any], where: str) -> list[int]:
    return sorted(id_list(get_list(job, "stageIds", where), f"{where}.stageIds"))


def batch_stages(batch_job_list: Sequence[Json], stages: Mapping[int, Json] | Iterable[Json], *,
                 fold: bool = True) -> tuple[list[Json], list[int]]:
    """The executed stages of one batch in vertex order, and the stage ids missing from REST.

    ``batch_job_list``: the batch's jobs (from :func:`batch_jobs`); ``stages``: ``/stages``
    entries, or a ``stageId -> stage`` mapping. Each stage once; ``SKIPPED`` stages are dropped, and
    so are the stages of a job that collects a broadcast relation (:func:`is_broadcast_job`: the
    static side of a stream-static join, read again at every batch whatever the stream brings), which
    are no vertex of the stream's data flow; the wall time they take counts in the batch overhead.
    With ``fold`` (the default), a stage that re-reads an earlier job's stage output is folded into
    it (:func:`fold_rereads`) and the stages are in data-flow order (:func:`dataflow_order`), the
    vertex order; ``fold=False`` gives every stage that ran in ``(jobId, stageId)`` order, for the
    wall time they ran (:func:`stages_running_s`).
    Returns ``(stages_in_order, missing_stage_ids)``.
    Raises :class:`SparkDataError` for a malformed job or stage.
    """
    index = stages if isinstance(stages, Mapping) else stage_index(stages)
    ordered: list[Json] = []
    missing: list[int] = []
    seen: set[int] = set()
    jobs = dicts(batch_job_list, "jobs")
    keyed = sorted(((get_count(job, "jobId", f"jobs[{i}]"), i, job) for i, job in enumerate(jobs)),
                   key=lambda item: (item[0], item[1]))
    for job_id, _i, job in keyed:
        if is_broadcast_job(job, f"job {job_id}"):
            continue
        for stage_id in _stage_ids(job, f"job {job_id}"):
            if stage_id in seen:
                continue
            seen.add(stage_id)
            stage = index.get(stage_id)
            if stage is None:
                missing.append(stage_id)
            elif stage.get("status") != "SKIPPED":
                ordered.append(stage)
    return (vertex_order(ordered, batch_job_list) if fold else ordered), missing


def vertex_order(ran: Sequence[Json], batch_job_list: Sequence[Json]) -> list[Json]:
    """The batch's vertices' stages: the stages that ran (``(jobId, stageId)`` order, as
    ``batch_stages(..., fold=False)`` gives them) with re-reads folded (:func:`fold_rereads`), in
    data-flow order (:func:`dataflow_order`). Raises :class:`SparkDataError` as those do."""
    return dataflow_order(fold_rereads(ran, batch_job_list))


def dataflow_order(stages: Sequence[Json]) -> list[Json]:
    """The batch's stages in data-flow order, the same in every batch of a run: by the newest RDD
    each stage computes (the largest of its ``rddIds``).

    Spark numbers RDDs as the plan creates them, each operator after its inputs, and a join's left
    input before its right (``SymmetricHashJoinExec`` executes ``left`` first). A stage's last RDD
    therefore comes after every RDD of the stages it reads, and of the two inputs of a join the left
    one's RDDs come first: the order of :func:`sparkclient.contract.binding.plan_stages_of` (children first,
    left to right). Stage ids do not give that order: the ``DAGScheduler`` numbers a join's two
    parent stages in either order from batch to batch (measured: ``tests/fixtures/spark-4.3.0-join``),
    so by stage id the two scans would swap vertices. ``stages``: ``/stages`` entries in
    ``(jobId, stageId)`` order, kept as they are when a stage lists no RDD. Returns a new list.
    Raises :class:`SparkDataError` for a malformed ``rddIds``.
    """
    newest: list[int] = []
    for stage in stages:
        where = f"stage {stage.get('stageId')}"
        rdds = id_list(get_list(stage, "rddIds", where), f"{where}.rddIds")
        if not rdds:
            return list(stages)
        newest.append(max(rdds))
    return [stage for _newest, _index, stage in sorted(zip(newest, range(len(newest)), stages, strict=True),
                                                       key=lambda item: (item[0], item[1]))]


#: Stage fields (task-seconds and bytes) summed when a re-read is folded into the stage it re-reads.
FOLDED_FIELDS = ("executorRunTime", "executorCpuTime", "jvmGcTime", "memoryBytesSpilled", "diskBytesSpilled")


def fold_rereads(ordered: Sequence[Json], batch_job_list: Sequence[Json]) -> list[Json]:
    """The batch's stages with each **re-read** folded into the stage whose output it re-reads.

    A ``foreachBatch`` function that acts more than once on the batch (``df.persist()``, then two
    ``df.write``; or a ``count()`` before the write) runs one Spark job per action. Spark hands it
    the batch as an RDD over the last stage's output (``ForeachBatchSink``: ``LogicalRDD`` of
    ``queryExecution.toRdd``), so every job after the first lists the batch's shuffle-map stages
    as skipped and runs one more stage over that RDD: the cached partitions, or the last stage's
    work again. That stage is sink work on the last stage's partitions, not a vertex of the query:
    its task-seconds and spill (:data:`FOLDED_FIELDS`) are added to the stage it re-reads, whose
    records, task count, id and times stand. A stage of a later job is a re-read of an earlier
    job's stage when they share an RDD (``rddIds``: the RDDs a stage computes; stages of one job
    never share one, a shuffle ends each) and run as many tasks. Anything else stays a stage of
    its own (a shuffle inside the ``foreachBatch`` function is a stage the query's plan does not
    have, and the binding says so).

    Args: ``ordered``, the batch's executed stages in ``(jobId, stageId)`` order (``/stages``
    entries); ``batch_job_list``, its jobs. Returns a new list; folded stages are copies.
    Raises :class:`SparkDataError` for a malformed ``rddIds``, ``stageIds`` or count.
    """
    job_of: dict[int, int] = {}
    jobs = dicts(batch_job_list, "jobs")
    for index, job in sorted(enumerate(jobs), key=lambda item: (get_count(item[1], "jobId", f"jobs[{item[0]}]"),
                                                                 item[0])):
        for stage_id in _stage_ids(job, f"jobs[{index}]"):
            job_of.setdefault(stage_id, get_count(job, "jobId", f"jobs[{index}]"))
    out: list[Json] = []
    rdds: list[set[int]] = []
    for stage in ordered:
        where = f"stage {stage.get('stageId')}"
        stage_id = get_count(stage, "stageId", where)
        own = set(id_list(get_list(stage, "rddIds", where), f"{where}.rddIds"))
        tasks = get_count(stage, "numTasks", where)
        target = next((i for i in reversed(range(len(out)))
                       if rdds[i] & own and job_of.get(get_count(out[i], "stageId", "stage"), -1)
                       < job_of.get(stage_id, -1) and get_count(out[i], "numTasks", "stage") == tasks), None)
        if target is None:
            out.append(stage)
            rdds.append(own)
            continue
        merged = dict(out[target])
        for key in FOLDED_FIELDS:
            if key in merged or key in stage:
                merged[key] = get_float(merged, key, "stage") + get_float(stage, key, where)
        out[target] = merged
    return out


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


def executors_and_cores(executors: Iterable[Json]) -> tuple[int, int]:
    """``(executors, cores)`` from ``/executors``: active non-driver executors and their
    ``totalCores``; in local mode (only the ``driver`` entry) ``(1, driver totalCores)``.
    Raises :class:`SparkDataError` for a malformed entry, and (``Problem.TOO_LARGE``) for more
    than :data:`MAX_CORES` cores or executors, per executor or in all: no cluster the policy
    allows reports them."""
    entries = dicts(executors, "executors")
    active = [(i, e) for i, e in enumerate(entries) if e.get("isActive", True) is not False]
    workers = [(i, e) for i, e in active if e.get("id") != "driver"]
    if workers:
        if len(workers) > MAX_CORES:
            raise SparkDataError("executors", Problem.TOO_LARGE, f"at most {MAX_CORES} executors", len(workers))
        cores = sum(_cores(e, f"executors[{i}]") for i, e in workers)
        if cores > MAX_CORES:
            raise SparkDataError("executors[].totalCores", Problem.TOO_LARGE,
                                 f"at most {MAX_CORES} cores in all", cores)
        return len(workers), cores
    drivers = [(i, e) for i, e in active if e.get("id") == "driver"]
    if drivers:
        cores = _cores(drivers[0][1], f"executors[{drivers[0][0]}]")
        if cores > 0:
            return 1, cores
    return 0, 0


def _cores(executor: Json, where: str) -> int:
    cores = get_count(executor, "totalCores", where)
    if cores > MAX_CORES:
        raise SparkDataError(f"{where}.totalCores", Problem.TOO_LARGE, f"at most {MAX_CORES} cores", cores)
    return cores
