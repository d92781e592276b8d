"""What the one-document capture scripts under ``tests/fixtures`` share: after a query has run, read its
REST, SQL and progress, trim them to the last batches, and write one JSON document (the format that
``tests.capture_paths`` lists). Run by those scripts on a live Spark session, never by the suite."""

from __future__ import annotations

import json
import time
from typing import Any

from sparkclient.collector.collect import _root_execution_id
from sparkclient.collector.rest import SparkRestClient
from sparkclient.collector.stages import batch_jobs
from sparkclient.contract.binding import plan_stages_of, plan_stages_to_json


def dump_capture(spark: Any, query: Any, *, ui_port: int, out: str, note: str, trigger_interval_s: float,
                 batches: int = 10, extra: dict[str, Any] | None = None) -> None:
    """Stop ``query`` after reading its capture, and write it to ``out``: app_id, run_id, now_s,
    trigger_interval_s, plan_stages (the runner's :func:`sparkclient.contract.binding.plan_stages_of`), jobs,
    stages and executors of the last ``batches`` batches, the SQL executions from the first one's root
    on (a job names its root execution; the one that ran it is the root or a later one), and their
    progress (``recentProgress`` as JSON); ``extra``'s keys are added to the document as they are."""
    now = time.time()
    app_id = spark.sparkContext.applicationId
    run_id = str(query.runId)
    plan = json.loads(plan_stages_to_json(plan_stages_of(query)))
    progresses = [json.loads(p.json) for p in query.recentProgress]
    client = SparkRestClient(f"http://127.0.0.1:{ui_port}")
    jobs = client.jobs(app_id)
    stages = client.stages(app_id)
    executors = client.executors(app_id)
    sql = client.get(f"applications/{app_id}/sql", {"details": "true", "length": 10000})
    query.stop()
    by_batch = batch_jobs(jobs, run_id)
    kept = sorted(by_batch)[-batches:]
    jobs = [j for b in kept for j in by_batch[b]]
    stage_ids = {s for j in jobs for s in j["stageIds"]}
    stages = [s for s in stages if s["stageId"] in stage_ids]
    first_root = min(_root_execution_id(j) for j in jobs)
    sql = [e for e in sql if e["id"] >= first_root]
    progresses = [p for p in progresses if p["batchId"] >= kept[0]]
    with open(out, "w") as f:
        json.dump({"note": note, "app_id": app_id, "run_id": run_id, "now_s": now,
                   "trigger_interval_s": trigger_interval_s, "plan_stages": plan, "jobs": jobs, "stages": stages,
                   "executors": executors, "sql": sql, "progresses": progresses, **(extra or {})}, f, indent=1)
    print("plan", plan)
