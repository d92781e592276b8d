"""What ``/jobs`` says of a streaming query's runs, for a live application whose progress is not
published: the newest run of a query name (:func:`newest_run_id`), and its batches rebuilt as minimal
progress dicts (:func:`progresses_from_jobs`). Used by ``python -m sparkclient snapshot --url``."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from typing import Any

from sparkclient.collector.sparkjson import get_count
from sparkclient.collector.stages import batch_jobs, batch_stages, rest_time_s, stage_index

__all__ = ["newest_run_id", "progresses_from_jobs"]

Json = dict[str, Any]


def progresses_from_jobs(jobs: Sequence[Json], run_id: str, stages: Sequence[Json] = ()) -> list[Json]:
    """Minimal progress dicts rebuilt from the jobs of run ``run_id`` (one per batch: start,
    duration, no offsets), for a live application whose progress is not published anywhere.

    ``numInputRows`` is the sum of the ``inputRecords`` of the batch's stages (``/stages``): only
    source scans read input. It is ``None`` (unknown, not 0) when no stage of the batch reports
    input records, e.g. Python data sources, or the stages are not in ``stages``; the sample then
    says its rates are unavailable (:class:`sparkclient.collector.sample.RatesUnavailable`).
    """
    index = stage_index(stages)
    out: list[Json] = []
    for batch_id, job_list in sorted(batch_jobs(jobs, run_id).items()):
        if any(j.get("status") != "SUCCEEDED" or not j.get("completionTime") for j in job_list):
            continue
        starts = [rest_time_s(j.get("submissionTime")) for j in job_list]
        ends = [rest_time_s(j.get("completionTime")) for j in job_list]
        if any(t is None for t in starts + ends):
            continue
        start = min(t for t in starts if t is not None)
        end = max(t for t in ends if t is not None)
        duration_ms = int(round(max(0.0, end - start) * 1000))
        ordered, missing = batch_stages(job_list, index)
        rows = sum(get_count(stage, "inputRecords", f"stage {stage.get('stageId')}") for stage in ordered)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(start)) + f".{int(start * 1000) % 1000:03d}Z"
        out.append({"runId": run_id, "batchId": batch_id, "timestamp": stamp, "batchDuration": duration_ms,
                    "numInputRows": rows if rows > 0 and not missing else None,
                    "durationMs": {"addBatch": duration_ms, "triggerExecution": duration_ms},
                    "sources": []})
    return out


def newest_run_id(jobs: Sequence[Json], query: str) -> str | None:
    """The ``runId`` of the newest job whose description starts with the query name ``query``."""
    best: tuple[int, str] | None = None
    for job in jobs:
        description = job.get("description") or ""
        lines = description.splitlines()
        if not lines or lines[0].strip() != query:
            continue
        match = re.search(r"^\s*runId\s*=\s*(\S+)\s*$", description, re.MULTILINE)
        run = match.group(1) if match else job.get("jobGroup")
        if run and (best is None or int(job["jobId"]) > best[0]):
            best = (int(job["jobId"]), str(run))
    return best[1] if best else None
