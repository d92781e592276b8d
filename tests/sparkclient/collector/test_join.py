"""A stream-stream join is a user's pipeline of a common shape: two sources, each scanned by a stage
of its own, and the join's stage reading both. Checked on a real capture
(``tests/fixtures/spark-4.3.0-join``: impressions on 2 partitions, clicks on 3, joined on 4 shuffle
partitions). Before, the collector chained the stages in stage-id order: the clicks scan was a vertex
fed by the impressions scan with no records in, the join was fed by the clicks scan only, and since
Spark numbers a join's two input stages in either order from batch to batch, v0 and v1 were the
impressions in one batch and the clicks in the next."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest

from scaling.planner.ds2 import edge_output_ratio, propagate_target_rates
from scaling.policy.policy import Policy
from sparkclient.collector.collect import collect_sample
from sparkclient.collector.model_inputs import model_inputs, source_shares
from sparkclient.collector.plan import stage_plan
from sparkclient.collector.rest import SparkRestError
from sparkclient.collector.sparkjson import SparkDataError
from sparkclient.collector.stages import batch_jobs, batch_stages, dataflow_order, stage_index
from sparkclient.contract.binding import BindingStatus, MismatchReason, bind_stages, plan_stages_from_json
from sparkclient.contract.spec import Knob, KnobTarget
from tests.capture_paths import JOIN_CAPTURE
from tests.sparkclient.collector.captures import CaptureClient, collect_capture

CAPTURE: dict[str, Any] = json.loads(JOIN_CAPTURE.read_text())
KNOBS = [Knob("cores", default=2, min=1, max=2, sets=KnobTarget.EXECUTORS),
         Knob("source_partitions", default=2, min=1, max=8, sets=KnobTarget.SOURCE_PARTITIONS),
         Knob("state_partitions", default=4, min=1, max=8, sets=KnobTarget.STATE_PARTITIONS)]
IMPRESSIONS, CLICKS = 2, 3  # tasks of each scan (numPartitions of its rate source)


def test_spark_numbers_the_two_scans_in_either_order() -> None:
    """What the capture is for: by stage id, the clicks scan comes first in some batches and the
    impressions scan in others."""
    index = stage_index(CAPTURE["stages"])
    firsts = set()
    for jobs in batch_jobs(CAPTURE["jobs"], CAPTURE["run_id"]).values():
        ran, missing = batch_stages(jobs, index, fold=False)
        assert not missing and [s["numTasks"] for s in ran][2] == 4
        firsts.add(ran[0]["numTasks"])
    assert firsts == {IMPRESSIONS, CLICKS}


def test_every_batch_lists_its_stages_in_data_flow_order() -> None:
    """By the newest RDD each stage computes: the join's left input (impressions), its right input
    (clicks), then the join, in every batch; the order of the runner's published plan."""
    index = stage_index(CAPTURE["stages"])
    for jobs in batch_jobs(CAPTURE["jobs"], CAPTURE["run_id"]).values():
        ordered, _missing = batch_stages(jobs, index)
        assert [s["numTasks"] for s in ordered] == [IMPRESSIONS, CLICKS, 4]
        assert ordered[0]["inputRecords"] > ordered[1]["inputRecords"] > 0  # 800/s against 200/s
    plan = plan_stages_from_json(json.dumps(CAPTURE["plan_stages"]))
    assert [s.input.value for s in plan] == ["source", "source", "shuffle"]


def test_the_sql_plan_gives_the_join_both_inputs() -> None:
    jobs = batch_jobs(CAPTURE["jobs"], CAPTURE["run_id"])
    newest = CAPTURE["progresses"][-1]["batchId"]  # the newest batch that finished (the next one was stopped)
    ordered, _missing = batch_stages(jobs[newest], stage_index(CAPTURE["stages"]))
    imp, clk, join = (s["stageId"] for s in ordered)
    plan = stage_plan(CAPTURE["sql"], CAPTURE["jobs"], ran_stages={imp, clk, join})
    assert plan.upstream[join] == tuple(sorted((imp, clk)))
    assert plan.upstream[imp] == plan.upstream[clk] == ()
    assert plan.operators[join] == ["StreamingSymmetricHashJoin", "WriteToDataSourceV2"]


def test_the_sample_has_two_sources_feeding_the_join() -> None:
    sample = collect_capture(CAPTURE)
    assert not [e for e in sample.errors if "SQL" in e or "stage(s) where" in e], sample.errors
    imp, clk, join = sample.vertices
    assert (imp.is_source, clk.is_source, join.is_source) == (True, True, False)
    assert (imp.upstream, clk.upstream, join.upstream) == ((), (), ("v0", "v1"))
    assert (imp.tasks, clk.tasks, join.tasks) == (IMPRESSIONS, CLICKS, 4)
    assert imp.name.startswith("MicroBatchScan") and clk.name.startswith("MicroBatchScan")
    assert join.name.startswith("StreamingSymmetricHashJoin")
    # each scan's own rows (rate 800/s and 200/s), and the join reads what both wrote
    assert imp.records_in == 4 * clk.records_in > 0
    assert join.records_in == imp.records_out + clk.records_out
    assert imp.records_in + clk.records_in == round(sample.input_rate_per_s * sample.window_s)


def test_the_model_shares_the_backlog_and_arrival_out_and_propagates_both_sources() -> None:
    sample = collect_capture(CAPTURE)
    assert source_shares(sample) == pytest.approx({"v0": 0.8, "v1": 0.2})
    inputs = model_inputs([sample], adjustable=lambda v: True)
    assert inputs.topology.is_source("v0") and inputs.topology.is_source("v1")
    assert sorted((e.source, e.target) for e in inputs.topology.edges) == [("v0", "v2"), ("v1", "v2")]
    m = inputs.metrics
    assert m["v0"].backlog + m["v1"].backlog == pytest.approx(sample.backlog)
    assert m["v0"].backlog == pytest.approx(4 * m["v1"].backlog)
    rates = propagate_target_rates(inputs.topology, m, Policy())
    # the join must sustain what both scans send it (DS2: the sum over its inputs)
    topology = inputs.topology
    assert rates["v2"].target_data_rate == pytest.approx(
        rates["v0"].target_data_rate * edge_output_ratio(topology, m, "v0", "v2")
        + rates["v1"].target_data_rate * edge_output_ratio(topology, m, "v1", "v2"))
    assert rates["v2"].target_data_rate > rates["v0"].target_data_rate


def test_the_binding_sees_the_plan_s_stages_in_the_same_order() -> None:
    """Source partitions at 2 bind the impressions scan; the clicks scan runs 3 tasks (its rate
    source's own numPartitions), which the knob does not set; the join binds to the state knob.
    Before, which scan was 'stage 0' changed from batch to batch."""
    sample = collect_capture(CAPTURE)
    plan = plan_stages_from_json(json.dumps(CAPTURE["plan_stages"]))
    bindings = bind_stages(plan, KNOBS, {"cores": 2, "source_partitions": 2, "state_partitions": 4},
                           [v.tasks for v in sample.vertices])
    assert [b.status for b in bindings] == [BindingStatus.BOUND, BindingStatus.MISMATCH, BindingStatus.BOUND]
    assert bindings[1].reason is MismatchReason.TASKS


def test_without_the_sql_plan_the_stages_are_chained_in_the_same_order() -> None:
    """No SQL data: the edges fall back to a chain, but the vertices stay in data-flow order."""
    class NoSql(CaptureClient):
        def sql_execution(self, app_id: str, execution_id: int, details: bool = True) -> dict[str, Any]:
            raise SparkRestError("GET .../sql failed with HTTP 404", url="u", status=404, attempts=1)

    sample = collect_sample(NoSql(CAPTURE), CAPTURE["app_id"], CAPTURE["progresses"], run_id=CAPTURE["run_id"],
                            trigger_interval_s=2.0, window_s=16.0, now_s=CAPTURE["now_s"])
    assert [v.tasks for v in sample.vertices] == [IMPRESSIONS, CLICKS, 4]
    assert [v.upstream for v in sample.vertices] == [(), ("v0",), ("v1",)]
    assert [v.is_source for v in sample.vertices] == [True, False, False]


def test_data_flow_order_keeps_stages_without_rdds_as_they_are_and_names_a_bad_rdd_list() -> None:
    a = {"stageId": 1, "rddIds": [9, 3]}
    b = {"stageId": 2, "rddIds": [5]}
    assert dataflow_order([a, b]) == [b, a]
    assert dataflow_order([a, {"stageId": 2, "rddIds": []}]) == [a, {"stageId": 2, "rddIds": []}]
    with pytest.raises(SparkDataError) as info:
        dataflow_order([a, {"stageId": 2, "rddIds": ["x"]}])
    assert "rddIds" in info.value.field


def _single_task_scans(execution: dict[str, Any]) -> dict[str, Any]:
    """``execution`` as Spark prints it when both scans run one task: no ``(stage X.Y: task Z)``
    reference in any metric outside the join's stage (Spark prints one only for two or more task values)."""
    out = copy.deepcopy(execution)
    for node in out["nodes"]:
        if node["nodeName"] not in ("StreamingSymmetricHashJoin", "WriteToDataSourceV2"):
            for metric in node["metrics"]:
                metric["value"] = re.sub(r"\(stage \d+\.\d+: task \d+\)", "", metric["value"])
    return out


def test_a_join_of_single_task_scans_is_named_and_linked_by_its_data_flow_order() -> None:
    """The scans' plan segments carry no stage reference; by position in the batch's data-flow
    order (left input first, as the plan numbers its nodes) they are named and the join reads both.
    Without that order, the two scans have no unique order and nothing but the join is named."""
    jobs = batch_jobs(CAPTURE["jobs"], CAPTURE["run_id"])
    newest = CAPTURE["progresses"][-1]["batchId"]
    ordered, _missing = batch_stages(jobs[newest], stage_index(CAPTURE["stages"]))
    ids = [s["stageId"] for s in ordered]
    job_ids = {job["jobId"] for job in jobs[newest]}
    execution = next(e for e in CAPTURE["sql"] if set(e["successJobIds"]) & job_ids)
    stripped = [_single_task_scans(execution)]
    plan = stage_plan(stripped, CAPTURE["jobs"], ran_stages=set(ids), stage_order=ids)
    assert plan.upstream == {ids[0]: (), ids[1]: (), ids[2]: tuple(sorted(ids[:2]))}
    assert plan.operators[ids[0]][0] == plan.operators[ids[1]][0] == "MicroBatchScan"
    # by position, each scan gets the stage its references name in the plan as Spark printed it
    assert plan.operators == stage_plan([execution], CAPTURE["jobs"], ran_stages=set(ids)).operators
    unordered = stage_plan(stripped, CAPTURE["jobs"], ran_stages=set(ids))
    assert set(unordered.operators) == {ids[2]} and ids[2] not in unordered.upstream
