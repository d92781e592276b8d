"""Signal validity (scaling/values/readiness.py, scaling/planner/signals.py): a window holding a sample that is not
ready never scales down, neither the executors nor any stage's partitions, and the plan names each
code; a scale-up is still planned. Codes and data only."""

from __future__ import annotations

import pytest

from scaling.planner.door import decide
from scaling.policy.policy import Policy
from scaling.scenario.replay import ReplayStep, replay
from scaling.values.metrics import ClusterState, VertexMetrics
from scaling.values.readiness import NotReady, SampleIssue, issues_from_json, issues_to_json, not_ready_reasons
from scaling.values.reasons import PlanFormatError, PlanReason, VetoSignal
from scaling.values.request import PlanRequest
from scaling.values.state import ScalerState
from scaling.values.topology import Edge, Topology, Vertex
from scaling.words.reason_text import reason_text
from tests.scaling.factories import NOT_READY_DATA


def _agg_window(busy_ms_per_s: float, *, tasks: int = 8, growth: float = 0.0):
    """A source and an adjustable aggregation on 8 cores, 2,000 records/s, the aggregation busy
    ``busy_ms_per_s`` per task: 50 is far below the band (the model scales down), 1000 above it."""
    topology = Topology((Vertex("src", parallelism=tasks, source=True), Vertex("agg", parallelism=tasks)),
                        (Edge("src", "agg"),))
    metrics = {"src": VertexMetrics(records_in_per_s=2000.0, records_out_per_s=2000.0, busy_time_ms_per_s=20.0,
                                    backlog=0.0, backlog_growth_per_s=growth),
               "agg": VertexMetrics(records_in_per_s=2000.0, records_out_per_s=100.0,
                                    busy_time_ms_per_s=busy_ms_per_s)}
    cluster = ClusterState(executors=8, cores_per_executor=1, min_executors=1, max_executors=32,
                           trigger_interval_s=10.0)
    return topology, metrics, cluster


POLICY = Policy(scale_down_interval_s=0)


def plan_micro_batch(topology, metrics, cluster, policy, *, batch_durations_s, not_ready=(), state=None,
                     now_s=0.0):
    """The plan as the web app asks for it (``scaling.planner.algorithms.evaluate``: the policy's algorithm, DS2)."""
    return decide(PlanRequest(topology=topology, metrics=metrics, policy=policy, mode="micro-batch",
                                cluster=cluster, state=state, now_s=now_s,
                                batch_durations_s=tuple(batch_durations_s), not_ready=tuple(not_ready)))


def test_the_model_alone_scales_this_window_down():
    """The harm the validity check prevents: without an issue the plan takes cores and tasks away."""
    plan = plan_micro_batch(*_agg_window(50.0), POLICY, batch_durations_s=(1.0, 1.0))
    assert plan.decision == "scale" and plan.executors_proposed < 8
    assert any(v.proposed < v.current for v in plan.vertices)


@pytest.mark.parametrize("code", list(NotReady))
def test_a_window_with_a_not_ready_sample_never_scales_down(code):
    issue = SampleIssue(code, NOT_READY_DATA[code])
    plan = plan_micro_batch(*_agg_window(50.0), POLICY, batch_durations_s=(1.0, 1.0), not_ready=(issue,))
    assert plan.executors_proposed == 8
    assert all(v.proposed >= v.current for v in plan.vertices)
    reasons = {r.code: r for r in plan.reasons}
    named = reasons[PlanReason.SAMPLES_NOT_READY]
    assert (named.data["code"], named.data["samples"]) == (str(code), 1)
    assert {k: named.data[k] for k in NOT_READY_DATA[code]} == NOT_READY_DATA[code]
    vetoed = reasons[PlanReason.SCALE_DOWN_VETOED]
    assert (vetoed.data["signal"], vetoed.data["value"], vetoed.data["code"]) == (VetoSignal.NOT_READY, 1, str(code))


def test_no_scale_down_is_remembered_to_be_applied_later():
    """With the delayed scale-down (FLINK-36018), a not-ready window records no pending scale-down
    that a later evaluation (or a person on the job page) would apply."""
    policy = Policy(scale_down_interval_s=3600)
    issue = SampleIssue(NotReady.SQL_PLAN_UNUSABLE, NOT_READY_DATA[NotReady.SQL_PLAN_UNUSABLE])
    plan = plan_micro_batch(*_agg_window(50.0), policy, batch_durations_s=(1.0,), state=ScalerState(), now_s=1000.0,
                            not_ready=(issue,))
    assert plan.next_state is not None and not plan.next_state.pending_scale_downs and not plan.held
    held = plan_micro_batch(*_agg_window(50.0), policy, batch_durations_s=(1.0,), state=ScalerState(), now_s=1000.0)
    assert held.next_state.pending_scale_downs  # the same window, ready: the scale-down is held for later


def test_a_scale_up_is_still_planned_on_a_window_not_ready():
    issue = SampleIssue(NotReady.FIRST_BATCH, {"batch_id": 0})
    plan = plan_micro_batch(*_agg_window(1000.0, growth=500.0), POLICY, batch_durations_s=(9.0, 9.0),
                            not_ready=(issue,))
    assert plan.decision == "scale" and plan.executors_proposed > 8
    assert PlanReason.SAMPLES_NOT_READY in {r.code for r in plan.reasons}


def test_each_code_is_named_once_with_its_samples_and_newest_data():
    issues = (SampleIssue(NotReady.FIRST_BATCH, {"batch_id": 3}), SampleIssue(NotReady.MISSING_STAGES, {"batches": 1,
                                                                                                     "of": 4}),
              SampleIssue(NotReady.MISSING_STAGES, {"batches": 2, "of": 5}))
    reasons = not_ready_reasons(issues)
    assert [(r.data["code"], r.data["samples"]) for r in reasons] == [("missing-stages", 2), ("first-batch", 1)]
    assert reasons[0].data["batches"] == 2


@pytest.mark.parametrize("code", list(NotReady))
def test_every_code_has_its_words(code):
    (reason,) = not_ready_reasons([SampleIssue(code, NOT_READY_DATA[code])])
    text = reason_text(reason)
    assert text.startswith("metrics not ready in 1 sample(s): ") and str(PlanReason.SAMPLES_NOT_READY) not in text


def test_issues_round_trip_through_json_and_a_malformed_one_is_refused():
    issues = tuple(SampleIssue(code, data) for code, data in NOT_READY_DATA.items())
    assert issues_from_json(issues_to_json(issues)) == issues
    assert issues_from_json([]) == () and issues_from_json(None) == ()
    for bad in ({"code": "nope"}, [{"code": "nope"}], [{"code": "first-batch", "data": {"batch_id": [1]}}], ["x"]):
        with pytest.raises(PlanFormatError):
            issues_from_json(bad)


def test_a_backtest_replays_the_samples_readiness():
    topology, metrics, cluster = _agg_window(50.0)
    issue = SampleIssue(NotReady.RESTART_IN_WINDOW, {"batches": 1})
    steps = [ReplayStep(100.0, topology, metrics, cluster, (1.0,)),
             ReplayStep(100.0, topology, metrics, cluster, (1.0,), (issue,))]
    ready, not_ready = (replay([step], POLICY)[0] for step in steps)
    assert ready.proposed and ready.executors_proposed < 8
    assert not not_ready.proposed and not_ready.executors_proposed == 8
