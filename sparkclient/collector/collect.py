"""Collect one sample from a running Spark application: fetch ``/jobs``, ``/stages``, ``/executors``
and the newest batch's SQL execution over REST, and build the :class:`sparkclient.collector.sample.JobSample`
(:func:`sparkclient.collector.topology.sample_from_rest`)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from scaling.policy.numbers import is_finite_number
from sparkclient.collector.batchwindow import window_batches
from sparkclient.collector.rest import SparkRestError
from sparkclient.collector.sample import JobSample
from sparkclient.collector.sparkjson import SparkDataError, as_dict, dicts, get_count, get_list
from sparkclient.collector.stages import BATCH_STAGE_STATUSES, batch_jobs, slowest_task_run_ms
from sparkclient.collector.topology import sample_from_rest

__all__ = ["RestClient", "collect_sample"]

Json = dict[str, Any]

_ROOT_EXECUTION_TAG = re.compile(r"-execution-root-id-(\d{1,18})$")


class RestClient(Protocol):
    """The subset of :class:`sparkclient.collector.rest.SparkRestClient` that :func:`collect_sample` uses."""

    def jobs(self, app_id: str, status: str | Sequence[str] | None = None) -> list[Json]: ...

    def stages(self, app_id: str, status: str | Sequence[str] | None = None) -> list[Json]: ...

    def executors(self, app_id: str) -> list[Json]: ...

    def sql_execution(self, app_id: str, execution_id: int, details: bool = True) -> Json: ...

    def task_summary(self, app_id: str, stage_id: int, attempt: int,
                     quantiles: Sequence[float] = (1.0,)) -> Json: ...


class _SlowestTasks:
    """``(stage_id, attempt) -> ms``: each stage attempt's slowest task from ``taskSummary`` (one REST
    call each, asked once). A call that fails or a payload that does not parse gives None, and the
    first such problem is kept in ``problem`` for the sample's notes; after ``GIVE_UP`` failures no
    more calls are made in this collect (a Spark UI without the endpoint costs 3 calls, not 32)."""

    GIVE_UP = 3

    def __init__(self, client: RestClient, app_id: str) -> None:
        self._client, self._app_id = client, app_id
        self._known: dict[tuple[int, int], float | None] = {}
        self.problem: str | None = None
        self.failed = 0

    def __call__(self, stage_id: int, attempt: int) -> float | None:
        key = (stage_id, attempt)
        if key in self._known:
            return self._known[key]
        if self.failed >= self.GIVE_UP:
            return None
        try:
            self._known[key] = slowest_task_run_ms(self._client.task_summary(self._app_id, stage_id, attempt),
                                                   f"stages/{stage_id}/{attempt}/taskSummary")
        except (SparkRestError, SparkDataError) as exc:
            self._known[key] = None
            self.failed += 1
            self.problem = self.problem or str(exc)
        return self._known[key]


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
    max_cores: int | None = None,
) -> JobSample:
    """Fetch ``/jobs``, ``/stages?status=complete&status=skipped``, ``/executors``, the newest batch's
    SQL execution and the window's stage attempts' ``taskSummary`` (the slowest task, at most
    ``sparkclient.collector.vertices.SLOWEST_TASK_FETCHES`` calls), and build the sample for the window
    ``[now_s - window_s, now_s)`` (:func:`window_batches`).

    ``progresses``: the query's recent progress dicts (any run: the previous run's last batch
    gives the span of a catch-up batch); ``now_s``: epoch seconds. SQL lookup failures only cost
    the vertex names, task-summary failures only the busiest task (noted in ``errors``). Raises
    :class:`sparkclient.collector.rest.SparkRestError` when jobs, stages or executors cannot be fetched,
    :class:`SparkDataError` when a payload or a progress is malformed, ``ValueError`` for
    ``window_s <= 0``. ``max_cores``: the cores the cluster or host has (the runner's capacity), None
    when unknown; more reported by ``/executors`` make the sample not ready (``JobSample.not_ready``).
    """
    if not is_finite_number(window_s) or window_s <= 0:
        raise ValueError(f"window_s must be a finite number > 0 seconds, got {window_s}")
    start_s = now_s - window_s
    jobs = dicts(client.jobs(app_id), "jobs")
    # Skipped stages too: a batch whose second job reuses the first one's shuffle lists the reused
    # map stage as SKIPPED, and without it the whole batch would count as "stages missing".
    stages = dicts(client.stages(app_id, BATCH_STAGE_STATUSES), "stages")
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

    slowest = _SlowestTasks(client, app_id)
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
        slowest_task_ms=slowest,
        max_cores=max_cores,
    )
    if slowest.problem is not None:
        notes.append(f"the slowest task of {slowest.failed} stage attempt(s) not available ({slowest.problem}); "
                     "their busiest-task busy time falls back to the mean")
    if notes:
        sample = replace(sample, errors=sample.errors + tuple(notes))
    return sample
