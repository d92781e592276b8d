"""Signal validity at the collector (sparkclient/collector/readiness.py): each sample says whether it
is ready, or why not, with a code. Checked on captures: the stream-stream join (two rate sources,
``tests/fixtures/spark-4.3.0-join``) with its SQL endpoint removed or garbled, the restart capture,
p1 with stages dropped, cores above the host's and a rate above its source's limit."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pytest

from scaling.planner.door import decide
from scaling.policy.policy import Policy
from scaling.values.readiness import NotReady
from scaling.values.reasons import PlanReason, VetoSignal
from scaling.values.request import PlanRequest
from sparkclient.collector.batchwindow import BatchWindow, batch_end_s
from sparkclient.collector.collect import collect_sample
from sparkclient.collector.model_inputs import model_inputs
from sparkclient.collector.readiness import sample_issues
from sparkclient.collector.rest import SparkRestError
from sparkclient.collector.sample import VertexSample
from sparkclient.collector.snapshot import load_captures
from sparkclient.collector.sources import SourcesReport
from sparkclient.collector.topology import sample_from_rest
from sparkclient.contract.binding import BindingStatus, MismatchReason, StageBinding, disagreeing_bindings
from tests.capture_paths import FIXTURES, P1_RUN_ID, spark_json
from tests.sparkclient.collector import test_topology
from tests.sparkclient.collector.captures import CaptureClient, collect_capture
from tests.sparkclient.collector.test_join import CAPTURE

Json = dict[str, Any]


class NoSql(CaptureClient):
    """The join capture without Spark's ``/sql`` endpoint (HTTP 404)."""

    def sql_execution(self, app_id: str, execution_id: int, details: bool = True) -> Json:
        raise SparkRestError("GET .../sql failed with HTTP 404", url="u", status=404, attempts=1)


class GarbledSql(CaptureClient):
    """The join capture whose SQL execution names the batch's jobs but holds no readable plan."""

    def sql_execution(self, app_id: str, execution_id: int, details: bool = True) -> Json:
        execution = copy.deepcopy(super().sql_execution(app_id, execution_id, details))
        execution["nodes"] = [{"nodeId": "x", "nodeName": 7, "metrics": "garbled"}]
        execution["edges"] = "garbled"
        return execution


def _join_sample(client_class: type[CaptureClient] = CaptureClient, **kwargs: Any):
    """The join capture collected through a ``client_class`` of it."""
    return collect_capture(CAPTURE, client_class(CAPTURE), **kwargs)


def _codes(sample) -> list[NotReady]:
    return [issue.code for issue in sample.not_ready]


def test_the_join_with_its_sql_plan_is_ready():
    sample = _join_sample()
    assert sample.ready and sample.not_ready == ()
    assert [v.is_source for v in sample.vertices] == [True, True, False]


@pytest.mark.parametrize("client_class", [NoSql, GarbledSql], ids=["sql-removed", "sql-garbled"])
def test_a_join_whose_sql_plan_is_unusable_is_not_ready(client_class):
    """Without the plan the clicks scan reads as a downstream stage with no records in: the sample
    is not ready, with the sources the progress names and the source stages found."""
    sample = _join_sample(client_class)
    assert [v.is_source for v in sample.vertices] == [True, False, False]
    assert sample.vertices[1].records_in == 0  # the second source, read as a shuffle stage
    (issue,) = sample.not_ready
    assert issue.code is NotReady.SQL_PLAN_UNUSABLE and dict(issue.data) == {"sources": 2, "source_stages": 1}
    assert not sample.ready


def test_the_unusable_join_plan_never_yields_a_scale_down():
    """At the collector: the sample's model on 8 cores is far below the band, and the
    model alone takes cores away (the other signals turned off by the policy: here the second
    source's records, missing from the sources, read as backlog growth and would veto it too);
    carried with the sample's issues, the plan keeps them whatever the policy."""
    sample = _join_sample(NoSql)
    inputs = model_inputs([sample], adjustable=lambda v: v.position == 0, cores_per_executor=1, max_executors=16)
    cluster = replace(inputs.cluster, executors=8)
    policy = Policy(scale_down_interval_s=0, scale_down_veto_batch_ratio=100.0, scale_down_veto_backlog_growth=1.0)
    durations = (sample.batch_duration_s,) * 2
    request = PlanRequest(topology=inputs.topology, metrics=inputs.metrics, policy=policy, mode="micro-batch",
                          cluster=cluster, batch_durations_s=durations)
    harm = decide(request)
    assert harm.decision == "scale" and harm.executors_proposed < 8
    plan = decide(replace(request, not_ready=sample.not_ready))
    assert plan.executors_proposed == 8 and all(v.proposed >= v.current for v in plan.vertices)
    reasons = {r.code: r for r in plan.reasons}
    assert reasons[PlanReason.SAMPLES_NOT_READY].data["code"] == NotReady.SQL_PLAN_UNUSABLE
    assert reasons[PlanReason.SCALE_DOWN_VETOED].data["signal"] == VetoSignal.NOT_READY


def test_a_single_source_query_without_its_sql_plan_stays_ready():
    """The plan only matters for the sources' shares: p1 (one rate source) without SQL data is ready."""
    sample = test_topology._p1_sample(10, 15)
    assert all(v.name == f"stage {v.position}" for v in sample.vertices) and sample.ready


def test_the_first_batch_after_a_restart_and_the_restart_in_the_window_are_not_ready():
    """r1: the query stopped for 8 s; batch 10 is the restarted run's first (the catch-up)."""
    captures = load_captures(FIXTURES / "spark-4.3.0-restart", "r1_")
    catch_up = next(p for p in captures.progresses if p["batchId"] == 10)
    previous = next(p for p in captures.progresses if p["batchId"] == 9)
    assert previous["runId"] != catch_up["runId"]
    end = batch_end_s(catch_up)

    def sample(start_s: float, end_s: float):
        return sample_from_rest(captures.jobs, captures.stages, captures.progresses, captures.executors,
                                run_id=catch_up["runId"], trigger_interval_s=2.0, window_start_s=start_s,
                                window_end_s=end_s)

    across = sample(batch_end_s(previous) - 0.5, end + 0.001)
    assert _codes(across) == [NotReady.FIRST_BATCH, NotReady.RESTART_IN_WINDOW]
    assert across.not_ready[0].data == {"batch_id": 10} and across.not_ready[1].data == {"batches": 1}
    assert _codes(sample(end - 0.5, end + 0.001)) == [NotReady.FIRST_BATCH]
    later = [p for p in captures.progresses if p["runId"] == catch_up["runId"] and p["batchId"] > 11]
    steady = sample(batch_end_s(later[0]) - 0.001, batch_end_s(later[-1]) + 0.001)
    assert steady.batches >= 2 and steady.ready


def test_a_batch_whose_stages_are_missing_is_not_ready():
    """p1 with one stage of batch 14 dropped from /stages (past ``spark.ui.retainedStages``)."""
    start, end = test_topology._window_for(10, 15)
    stages = [s for s in spark_json("p1_app_stages.json") if s["stageId"] != 28]
    sample = sample_from_rest(spark_json("p1_app_jobs.json"), stages,
                              spark_json("p1_recentProgress.json"), spark_json("p1_app_executors.json"),
                              run_id=P1_RUN_ID, trigger_interval_s=2.0, window_start_s=start,
                              window_end_s=end)
    (issue,) = sample.not_ready
    assert issue.code is NotReady.MISSING_STAGES and dict(issue.data) == {"batches": 1, "of": sample.batches}
    assert test_topology._p1_sample(10, 15).ready


def test_cores_above_what_the_cluster_has_are_not_ready():
    cores = _join_sample().cores
    assert _join_sample(max_cores=cores).ready and _join_sample(max_cores=None).ready
    (issue,) = _join_sample(max_cores=cores - 1).not_ready
    assert issue.code is NotReady.IMPLAUSIBLE_CORES and dict(issue.data) == {"cores": cores, "limit": cores - 1}


def test_a_rate_above_the_source_s_own_limit_is_not_ready():
    """The impressions source (rowsPerSecond=800) claiming three times its rows in the newest batch."""
    edited = copy.deepcopy(CAPTURE["progresses"])
    newest = max((p for p in edited if p["runId"] == CAPTURE["run_id"]), key=lambda p: p["batchId"])
    newest["sources"][0]["numInputRows"] *= 3
    sample = collect_sample(CaptureClient(CAPTURE), CAPTURE["app_id"], edited, run_id=CAPTURE["run_id"],
                            trigger_interval_s=CAPTURE["trigger_interval_s"], window_s=16.0, now_s=CAPTURE["now_s"])
    (issue,) = sample.not_ready
    assert issue.code is NotReady.IMPLAUSIBLE_RATE
    assert (issue.data["source"], issue.data["limit_per_s"]) == (0, 800.0) and issue.data["rate_per_s"] > 800 * 1.1
    assert sample.arrival_rate_per_s <= 1000.0 * 1.0001  # taken at the sources' limits, 800 + 200


def _binding(position: int, knob: str, value: int, tasks: int, reason: MismatchReason | None) -> StageBinding:
    status = BindingStatus.MISMATCH if reason else BindingStatus.BOUND
    return StageBinding(position, status, knob=knob, reason=reason, knob_value=value, tasks_ran=tasks)


def test_a_knob_that_ran_its_value_in_no_stage_disagrees_with_spark():
    wrong = _binding(1, "state_partitions", 1, 200, MismatchReason.TASKS)
    assert disagreeing_bindings([_binding(0, "source_partitions", 2, 2, None), wrong]) == (wrong,)
    # the join: the source knob sets the impressions scan; the clicks scan runs its own 3 partitions
    clicks = _binding(1, "source_partitions", 2, 3, MismatchReason.TASKS)
    assert disagreeing_bindings([_binding(0, "source_partitions", 2, 2, None), clicks]) == ()
    # a stale published plan (its partitions differ) while Spark ran the knob's value: no disagreement
    stale = StageBinding(1, BindingStatus.MISMATCH, knob="p", reason=MismatchReason.PLAN_PARTITIONS, knob_value=6,
                         plan_partitions=1, tasks_ran=6)
    assert disagreeing_bindings([stale]) == ()
    coalesced = _binding(2, "shuffle_partitions", 8, 3, MismatchReason.COALESCED)
    assert disagreeing_bindings([coalesced]) == ()


def _plan_issues(names: tuple[str, ...], sources: tuple[bool, ...], *, read: int = 2) -> list[NotReady]:
    """The issue codes of a window of two batches of run ``r`` that each read ``read`` sources, on vertices
    named ``names`` (``sources``: which are source vertices)."""
    batches = tuple({"batchId": b, "runId": "r", "timestamp": f"2026-01-01T00:00:0{b}.000Z", "batchDuration": 1000,
                     "sources": [{"description": f"s{i}"} for i in range(read)]} for b in (4, 5))
    window = BatchWindow(batches=batches, spans={4: (0.0, 5.0), 5: (5.0, 10.0)}, start_s=0.0, end_s=10.0)
    vertices = [VertexSample(f"v{i}", name, i, source, 4, 1.0, 100, 100, 0, ()) for i, (name, source)
                in enumerate(zip(names, sources, strict=True))]
    issues = sample_issues(batches, window, run_id="r", window_start_s=None, vertices=vertices,
                           missing_stage_batches=(), cores=4, max_cores=None, sources=SourcesReport(0, 10.0))
    return [issue.code for issue in issues]


@pytest.mark.parametrize("names, sources, read, codes", [
    # A union of two sources read in one stage, named from the plan: ready.
    (("Union → Project", "HashAggregate"), (True, False), 2, []),
    # The same stages without plan operators: the edges fell back to a chain, not ready.
    (("stage 0", "HashAggregate"), (True, False), 2, [NotReady.SQL_PLAN_UNUSABLE]),
    (("Union → Project", "stage 1"), (True, False), 2, [NotReady.SQL_PLAN_UNUSABLE]),
    # As many source stages as sources, or a single source: the plan does not matter.
    (("stage 0", "stage 1"), (True, True), 2, []),
    (("stage 0", "stage 1"), (True, False), 1, []),
])
def test_a_union_read_in_one_stage_is_ready_and_an_unnamed_one_is_not(names, sources, read, codes):
    assert _plan_issues(names, sources, read=read) == codes
