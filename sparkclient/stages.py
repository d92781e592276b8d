"""The jobs and stages of one micro-batch, from the REST API's ``/jobs`` and ``/stages`` JSON: which
jobs ran batch ``N`` of a query run, its executed stages in vertex order, and the wall time they
ran; and the executors and cores from ``/executors``. The rules are in :mod:`sparkclient.topology`'s
docstring ("Jobs of a batch", "Stages of a batch", "Vertex = stage position", "Batch overhead").
Pure functions over JSON; a malformed payload raises :class:`sparkclient.sparkjson.SparkDataError`
naming the field."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from sparkclient.sparkjson import (
    Problem, SparkDataError, as_dict, as_list, dicts, finite, get_count, get_list, get_str,
)

__all__ = ["BATCH_STAGE_STATUSES", "batch_jobs", "batch_stages", "executors_and_cores", "rest_time_s",
           "slowest_task_run_ms", "stage_index", "stages_running_s", "vertex_id"]

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
    quantile 1.0, or its ``executorRunTime`` list is not as long as ``quantiles`` or holds a value
    that is not a finite number >= 0.
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
    return finite(run_times[at], f"{where}.executorRunTime[{at}]")


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


def _stage_ids(job: Mapping[str, Any], where: str) -> list[int]:
    ids = get_list(job, "stageIds", where)
    out = []
    for position, value in enumerate(ids):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**53:
            raise SparkDataError(f"{where}.stageIds[{position}]", Problem.WRONG_TYPE, "a stage id (integer >= 0)",
                                 value)
        out.append(value)
    return sorted(out)


def batch_stages(batch_job_list: Sequence[Json],
                 stages: Mapping[int, Json] | Iterable[Json]) -> tuple[list[Json], list[int]]:
    """The executed stages of one batch in vertex order, and the stage ids missing from REST.

    ``batch_job_list``: the batch's jobs (from :func:`batch_jobs`); ``stages``: ``/stages``
    entries, or a ``stageId -> stage`` mapping. Order: ``(jobId, stageId)``; each stage once;
    ``SKIPPED`` stages are dropped. Returns ``(stages_in_order, missing_stage_ids)``.
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
