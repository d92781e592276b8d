"""A stream joined with a static table (a dimension table, broadcast to the stream's tasks) is a
user's pipeline of a common shape. Spark 4 runs the broadcast as a job of its own in every batch,
with the query's job group and batch description, so the collector took its stage for the query's
first vertex: a source reading the table's 20,000 rows at every batch, the stream's own scan a vertex
with no records in, and three vertices against the runner's two plan stages, so every stage was a
'stage count' mismatch and nothing was ever proposed. Checked on a real capture
(``tests/fixtures/spark-4.3.0-broadcast``)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sparkclient.collector.sparkjson import SparkDataError
from sparkclient.collector.stages import batch_jobs, batch_stages, is_broadcast_job, stage_index, stages_running_s
from sparkclient.contract.binding import BindingStatus, bind_stages, plan_stages_from_json
from sparkclient.contract.spec import Knob, KnobTarget
from tests.capture_paths import BROADCAST_CAPTURE
from tests.sparkclient.collector.captures import collect_capture

CAPTURE: dict[str, Any] = json.loads(BROADCAST_CAPTURE.read_text())
KNOBS = [Knob("cores", default=2, min=1, max=2, sets=KnobTarget.EXECUTORS),
         Knob("source_partitions", default=2, min=1, max=8, sets=KnobTarget.SOURCE_PARTITIONS),
         Knob("state_partitions", default=3, min=1, max=8, sets=KnobTarget.STATE_PARTITIONS)]
TABLE_ROWS = 20_000


def _finished_batches() -> dict[int, list[dict[str, Any]]]:
    done = {p["batchId"] for p in CAPTURE["progresses"]}
    return {b: jobs for b, jobs in batch_jobs(CAPTURE["jobs"], CAPTURE["run_id"]).items() if b in done}


def test_every_batch_runs_a_broadcast_job_that_reads_the_table() -> None:
    index = stage_index(CAPTURE["stages"])
    for jobs in _finished_batches().values():
        broadcast = [job for job in jobs if is_broadcast_job(job)]
        assert len(jobs) == 2 and len(broadcast) == 1
        (stage_id,) = broadcast[0]["stageIds"]
        assert index[stage_id]["inputRecords"] == TABLE_ROWS


def test_the_broadcast_job_is_no_stage_of_the_batch() -> None:
    index = stage_index(CAPTURE["stages"])
    for jobs in _finished_batches().values():
        ordered, missing = batch_stages(jobs, index)
        assert not missing and [s["numTasks"] for s in ordered] == [2, 3]
        assert ordered[0]["inputRecords"] < TABLE_ROWS  # the stream's rows (1,000/s, 2 s trigger)


def test_the_sample_has_the_plan_s_two_vertices_the_stream_scan_as_source_and_the_broadcast_in_the_overhead() -> None:
    sample = collect_capture(CAPTURE)
    assert not [e for e in sample.errors if "SQL" in e or "stage(s) where" in e], sample.errors
    scan, agg = sample.vertices
    assert scan.is_source and not agg.is_source and agg.upstream == ("v0",)
    assert scan.name == "MicroBatchScan → Filter → Project → BroadcastHashJoin → Project → HashAggregate"
    assert agg.name.startswith("HashAggregate → StateStoreRestore")
    assert scan.records_in == round(sample.input_rate_per_s * sample.window_s) > 0
    # the broadcast's wall time is per-batch work outside the stream's stages: in the batch overhead
    index = stage_index(CAPTURE["stages"])
    broadcast_s = [stages_running_s([index[sid] for job in jobs if is_broadcast_job(job) for sid in job["stageIds"]])
                   for jobs in _finished_batches().values()]
    assert sample.batch_overhead_s >= min(broadcast_s) > 0


def test_both_stages_bind_to_their_knobs() -> None:
    """Before, three vertices against two plan stages: every stage a 'stage count' mismatch."""
    sample = collect_capture(CAPTURE)
    plan = plan_stages_from_json(json.dumps(CAPTURE["plan_stages"]))
    assert len(plan) == 2 and "BroadcastExchange" not in plan[0].operators  # the runner stops at the broadcast
    bindings = bind_stages(plan, KNOBS, {"cores": 2, "source_partitions": 2, "state_partitions": 3},
                           [v.tasks for v in sample.vertices])
    assert [b.status for b in bindings] == [BindingStatus.BOUND, BindingStatus.BOUND]
    assert [b.knob for b in bindings] == ["source_partitions", "state_partitions"]


def test_a_job_tag_that_is_not_a_string_is_named() -> None:
    assert not is_broadcast_job({"jobId": 1}) and not is_broadcast_job({"jobId": 1, "jobTags": None})
    assert is_broadcast_job({"jobTags": ["x", "broadcast exchange (runId 1-2)"]})
    with pytest.raises(SparkDataError) as info:
        is_broadcast_job({"jobTags": ["x", 3]}, "jobs[4]")
    assert info.value.field == "jobs[4].jobTags[1]"
