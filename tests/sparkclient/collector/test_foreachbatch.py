"""A ``foreachBatch`` function that acts twice on each batch (persist, two writes) is a user's own
pipeline of the commonest shape; each batch then runs two Spark jobs, and the second runs one more
stage over the batch's cached output. Checked on a real capture (``tests/fixtures/spark-4.3.0-foreachbatch``):
that stage is folded into the stage it re-reads, so the query keeps the two vertices of its plan and
both bind to their knobs. Before, the third stage made every stage a "stage count" mismatch, and
nothing could ever be proposed for the job."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sparkclient.collector.collect import collect_sample
from sparkclient.collector.sparkjson import SparkDataError
from sparkclient.collector.stages import (
    FOLDED_FIELDS,
    batch_jobs,
    batch_stages,
    fold_rereads,
    stage_index,
    stages_running_s,
)
from sparkclient.contract.binding import BindingStatus, bind_stages, plan_stages_from_json
from sparkclient.contract.spec import Knob, KnobTarget
from tests.capture_paths import FOREACHBATCH_CAPTURE
from tests.sparkclient.collector.captures import CaptureClient

CAPTURE: dict[str, Any] = json.loads(FOREACHBATCH_CAPTURE.read_text())
KNOBS = [Knob("cores", default=1, min=1, max=2, sets=KnobTarget.EXECUTORS),
         Knob("source_partitions", default=2, min=1, max=8, sets=KnobTarget.SOURCE_PARTITIONS),
         Knob("state_partitions", default=3, min=1, max=8, sets=KnobTarget.STATE_PARTITIONS)]


def _batches() -> dict[int, list[dict[str, Any]]]:
    return batch_jobs(CAPTURE["jobs"], CAPTURE["run_id"])


def test_every_batch_runs_a_second_job_whose_stage_re_reads_the_state_store_stage() -> None:
    """The capture is what the fold is for: two jobs per batch, the second's shuffle-map stage
    skipped and its one stage sharing RDDs with the first job's last stage, at 3 tasks each."""
    index = stage_index(CAPTURE["stages"])
    for batch_id, jobs in _batches().items():
        assert len(jobs) == 2, batch_id
        ran, missing = batch_stages(jobs, index, fold=False)
        assert not missing and len(ran) == 3
        scan, state, reread = ran
        assert (scan["numTasks"], state["numTasks"], reread["numTasks"]) == (2, 3, 3)
        assert set(state["rddIds"]) & set(reread["rddIds"]) and not set(scan["rddIds"]) & set(state["rddIds"])
        assert index[min(jobs[1]["stageIds"])]["status"] == "SKIPPED"


def test_a_re_read_is_folded_into_the_stage_it_re_reads() -> None:
    index = stage_index(CAPTURE["stages"])
    for jobs in _batches().values():
        ran, _missing = batch_stages(jobs, index, fold=False)
        folded, _missing = batch_stages(jobs, index)
        assert [s["stageId"] for s in folded] == [ran[0]["stageId"], ran[1]["stageId"]]
        assert folded[0] == ran[0]
        for key in FOLDED_FIELDS:
            assert folded[1][key] == ran[1][key] + ran[2][key], key
        for key in ("numTasks", "shuffleReadRecords", "outputRecords", "submissionTime", "completionTime"):
            assert folded[1][key] == ran[1][key], key
        assert ran[1]["executorRunTime"] != folded[1]["executorRunTime"]  # the input is not changed


def test_the_foreachbatch_query_keeps_its_plans_two_vertices_and_both_bind() -> None:
    sample = collect_sample(CaptureClient(CAPTURE), CAPTURE["app_id"], CAPTURE["progresses"], run_id=CAPTURE["run_id"],
                            trigger_interval_s=CAPTURE["trigger_interval_s"], window_s=20.0, now_s=CAPTURE["now_s"])
    assert [v.vertex_id for v in sample.vertices] == ["v0", "v1"]
    assert not [e for e in sample.errors if "stage(s) where the newest batch ran" in e]
    scan, state = sample.vertices
    assert "StateStoreSave" in state.name and state.tasks == 3 and scan.tasks == 2
    # v1's busy time is the state store stage's and the re-read's, over the window's batches.
    index = stage_index(CAPTURE["stages"])
    window_batches = [p["batchId"] for p in CAPTURE["progresses"]
                      if p["batchId"] in _batches() and p["numInputRows"] > 0]
    both = [sum(s["executorRunTime"] for s in batch_stages(_batches()[b], index, fold=False)[0][1:])
            for b in window_batches]
    assert any(abs(state.busy_s * 1000 - sum(both[i:])) < 1e-6 for i in range(len(both)))  # the window's last batches
    assert state.records_out > 0  # the rows the function received, not the re-read's 0 shuffle writes
    # The batch overhead counts the re-read's wall time as stage time, as before the fold.
    raw = [batch_stages(_batches()[b], index, fold=False)[0] for b in window_batches]
    assert all(stages_running_s(stages) > stages_running_s(stages[:2]) for stages in raw)

    plan = plan_stages_from_json(json.dumps(CAPTURE["plan_stages"]))
    assert plan is not None and len(plan) == 2
    bindings = bind_stages(plan, KNOBS, {"source_partitions": 2, "state_partitions": 3},
                           [v.tasks for v in sample.vertices])
    assert [(b.status, b.knob) for b in bindings] == [(BindingStatus.BOUND, "source_partitions"),
                                                      (BindingStatus.BOUND, "state_partitions")]


def _stage(stage_id: int, tasks: int, rdds: list[int], busy: int = 100) -> dict[str, Any]:
    return {"stageId": stage_id, "attemptId": 0, "status": "COMPLETE", "numTasks": tasks, "rddIds": rdds,
            "executorRunTime": busy, "memoryBytesSpilled": 0, "diskBytesSpilled": 0}


def test_only_a_later_jobs_stage_with_a_shared_rdd_and_as_many_tasks_is_folded() -> None:
    """Not folded: a stage of the same job (a shuffle ends each stage, so they never share an RDD,
    but the rule does not rely on it), one with other tasks (a ``coalesce`` or ``repartition`` in the
    function), one sharing nothing (adaptive execution's map stage run as a job of its own)."""
    jobs = [{"jobId": 1, "stageIds": [10, 11]}, {"jobId": 2, "stageIds": [12, 13, 14]}]
    stages = [_stage(10, 2, [1, 2]), _stage(11, 3, [3, 4]), _stage(12, 3, [4, 9], busy=7),
              _stage(13, 1, [3, 20]), _stage(14, 3, [30])]
    folded = fold_rereads(stages, jobs)
    assert [s["stageId"] for s in folded] == [10, 11, 13, 14]
    assert folded[1]["executorRunTime"] == 107
    same_job = fold_rereads([_stage(10, 3, [1, 2]), _stage(11, 3, [2, 3])], [{"jobId": 1, "stageIds": [10, 11]}])
    assert [s["stageId"] for s in same_job] == [10, 11]


@pytest.mark.parametrize("bad", ["x", [1.5], [True], [-1], {"a": 1}])
def test_a_malformed_rdd_id_list_names_the_field(bad: object) -> None:
    jobs = [{"jobId": 1, "stageIds": [10]}, {"jobId": 2, "stageIds": [11]}]
    stages = [_stage(10, 3, [1]), dict(_stage(11, 3, [1]), rddIds=bad)]
    with pytest.raises(SparkDataError, match=r"stage 11\.rddIds"):
        fold_rereads(stages, jobs)
