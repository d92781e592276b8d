"""DS2's activation time (Kalavri et al., OSDI 2018, §4; ``Policy.activation_evaluations``): a rescale
applies only once that many consecutive evaluations recommended one in the same direction, in both
planners; the bench gives it to ds2 alone and prints it."""

import json

import pytest

from scaling.bench.report import write_report
from scaling.bench.run import DS2_OPTIONS, Workload, bench_policy, describe_setting, make_controller, run_bench
from scaling.planner.continuous import plan_job
from scaling.planner.microbatch import plan_micro_batch
from scaling.policy.option_types import PolicyError
from scaling.policy.policy import Policy
from scaling.values.metrics import ClusterState, VertexMetrics
from scaling.values.reasons import AwaitingActivation, Direction, PlanReason, Reason, VertexReason
from scaling.values.state import ScalerState, activation, state_from_dict, state_to_dict
from scaling.values.topology import Topology, Vertex
from tests.scaling.factories import three_stages

CLUSTER_1 = ClusterState(executors=1, trigger_interval_s=1.0)
"""1 executor for a job needing 5 cores (``three_stages``): a scale-up to 5 is recommended."""
IN_BAND = ClusterState(executors=4, trigger_interval_s=1.0)
"""4 executors: load 0.76, inside [0.4, 1.0]."""


def test_the_default_acts_on_the_first_recommendation_and_keeps_no_streak():
    topology, metrics = three_stages(pinned_second=False)
    plan = plan_micro_batch(topology, metrics, CLUSTER_1, Policy(restart_time_s=0), state=ScalerState(), now_s=0)
    assert (plan.decision, plan.executors_proposed, plan.awaiting_activation) == ("scale", 5, None)
    assert plan.next_state.activation_streak == 0
    assert "activation_streak" not in state_to_dict(plan.next_state)


def test_micro_batch_scale_up_waits_for_the_second_consecutive_recommendation():
    topology, metrics = three_stages(pinned_second=False)
    policy = Policy(restart_time_s=0, activation_evaluations=2)
    first = plan_micro_batch(topology, metrics, CLUSTER_1, policy, state=ScalerState(), now_s=0)
    assert (first.decision, first.executors_proposed) == ("blocked", 1)
    assert all(v.proposed == v.current for v in first.vertices)
    assert first.awaiting_activation == AwaitingActivation(Direction.UP, 1, 2)
    assert Reason(PlanReason.ACTIVATION_PENDING, None, {"direction": "up", "count": 1, "required": 2}) in first.reasons
    assert first.next_state.activation_streak == 1 and first.next_state.history == ()
    second = plan_micro_batch(topology, metrics, CLUSTER_1, policy, state=first.next_state, now_s=60)
    assert (second.decision, second.executors_proposed, second.awaiting_activation) == ("scale", 5, None)
    assert second.next_state.activation_streak == 0


def test_an_evaluation_without_a_recommendation_resets_the_streak():
    """A spike: one evaluation above the band, the next inside it: nothing is applied."""
    topology, metrics = three_stages(pinned_second=False)
    policy = Policy(restart_time_s=0, activation_evaluations=2)
    spike = plan_micro_batch(topology, metrics, CLUSTER_1, policy, state=ScalerState(), now_s=0)
    calm = plan_micro_batch(topology, metrics, IN_BAND, policy, state=spike.next_state, now_s=60)
    assert calm.decision == "no-change" and calm.next_state.activation_streak == 0
    again = plan_micro_batch(topology, metrics, CLUSTER_1, policy, state=calm.next_state, now_s=120)
    assert again.decision == "blocked" and again.awaiting_activation.count == 1


def test_a_scale_down_needs_its_own_consecutive_recommendations():
    """Without a scale-down interval, 8 executors for a job needing 4: the first recommendation
    waits, the second applies; a scale-up streak does not count for a scale-down."""
    topology, metrics = three_stages(pinned_second=False)
    policy = Policy(restart_time_s=0, scale_down_interval_s=0, utilization_target=0.9, activation_evaluations=2)
    over = ClusterState(executors=8, trigger_interval_s=1.0)
    first = plan_micro_batch(topology, metrics, over, policy, state=ScalerState(activation_streak=1), now_s=0)
    assert first.awaiting_activation == AwaitingActivation(Direction.DOWN, 1, 2)
    assert (first.decision, first.executors_proposed, first.next_state.activation_streak) == ("blocked", 8, -1)
    second = plan_micro_batch(topology, metrics, over, policy, state=first.next_state, now_s=60)
    assert (second.decision, second.executors_proposed) == ("scale", 4)


def test_held_scale_downs_count_so_a_due_one_applies_at_once():
    """FLINK-36018 holds the scale-down for 600 s; the held evaluations are scale-down
    recommendations, so the due one is not delayed again."""
    topology, metrics = three_stages(pinned_second=False)
    policy = Policy(restart_time_s=0, scale_down_interval_s=600, utilization_target=0.9, activation_evaluations=2)
    over = ClusterState(executors=8, trigger_interval_s=1.0)
    held = plan_micro_batch(topology, metrics, over, policy, state=ScalerState(), now_s=0)
    assert held.decision == "blocked" and held.held and held.awaiting_activation is None
    assert held.next_state.activation_streak == -1
    due = plan_micro_batch(topology, metrics, over, policy, state=held.next_state, now_s=600)
    assert (due.decision, due.executors_proposed) == ("scale", 4)


def test_a_stateless_evaluation_acts_at_once():
    topology, metrics = three_stages(pinned_second=False)
    plan = plan_micro_batch(topology, metrics, CLUSTER_1, Policy(restart_time_s=0, activation_evaluations=3))
    assert (plan.decision, plan.executors_proposed) == ("scale", 5)


def test_continuous_scale_up_waits_for_the_second_consecutive_recommendation():
    topology = Topology((Vertex("src", parallelism=2, source=True),))
    # 1,500 records/s arrive (500 more than the 2 saturated slots process): 2 -> ceil(2 × 1500 / 1000 / 0.7) = 5
    metrics = {"src": VertexMetrics(1000, 1000, 1000, backlog_growth_per_s=500)}
    policy = Policy(restart_time_s=0, activation_evaluations=2)
    first = plan_job(topology, metrics, policy, ScalerState(), now_s=0)
    assert first.decision == "blocked" and first.vertex("src").proposed == 2
    assert first.awaiting_activation == AwaitingActivation(Direction.UP, 1, 2)
    reason = first.vertex("src").reason
    assert (reason.code, reason.data["current"], reason.data["computed"]) == (VertexReason.AWAITING_ACTIVATION, 2, 5)
    assert reason.cause.code == VertexReason.SCALE_UP
    second = plan_job(topology, metrics, policy, first.next_state, now_s=60)
    assert second.decision == "scale" and second.vertex("src").proposed == 5
    assert second.next_state.activation_streak == 0 and second.next_state.history
    assert plan_job(topology, metrics, policy, None, now_s=0).decision == "scale"


@pytest.mark.parametrize(("previous", "direction", "required", "expected"), [
    (0, 1, 2, (False, 1)), (1, 1, 2, (True, 0)), (-1, 1, 2, (False, 1)), (-1, -1, 2, (True, 0)),
    (2, 1, 4, (False, 3)), (3, 0, 4, (True, 0)), (5, 1, 1, (True, 0)),
])
def test_activation_counts_consecutive_recommendations_per_direction(previous, direction, required, expected):
    assert activation(ScalerState(activation_streak=previous), Policy(activation_evaluations=required),
                      direction) == expected


def test_the_streak_survives_the_state_document_and_the_option_is_validated():
    state = ScalerState(activation_streak=-2)
    assert state_from_dict(json.loads(json.dumps(state_to_dict(state)))) == state
    with pytest.raises(PolicyError, match=r"activation_evaluations: must be within \[1, 100\]"):
        Policy(activation_evaluations=0)


def test_the_bench_gives_activation_to_ds2_alone_and_prints_it(tmp_path):
    policy = bench_policy("flink-defaults")
    assert policy.activation_evaluations == 1
    assert make_controller("ds2", "micro-batch", policy, [], 60.0).policy.activation_evaluations == 2
    assert make_controller("batch-ratio", "micro-batch", policy, [], 60.0).policy == policy
    assert DS2_OPTIONS == {"activation_evaluations": 2}
    assert describe_setting("tuned").endswith("ds2 only: activation_evaluations 2")
    result = run_bench(workloads_=(Workload("step", "demo", "micro-batch", 0.5),), setting="tuned")
    assert "ds2 only: activation_evaluations 2" in write_report(result, tmp_path / "report.html").read_text()


def test_a_spike_shorter_than_a_policy_interval_is_not_taken_for_a_new_load_level(monkeypatch):
    """The bench's spikes (3× for 30 s every 10 min) at Flink's defaults: with one evaluation each
    spike that the window's change detection takes for a new level scales the job up and the 1 h
    scale-down interval holds it; with DS2's activation time of 2 the next evaluation sees the
    spike gone and nothing is applied, with no SLO violation."""
    from scaling.bench import run

    workload = run.Workload("spikes", "nexmark-q8", "micro-batch", 2.0)
    policy = run.bench_policy("flink-defaults")
    with_activation = run.rows_for(run.run_workload(workload, seed=7, policies=("ds2", "oracle"),
                                                    setting="flink-defaults"), policy)[0]
    monkeypatch.setattr(run, "DS2_OPTIONS", {})
    without = run.rows_for(run.run_workload(workload, seed=7, policies=("ds2", "oracle"),
                                            setting="flink-defaults"), policy)[0]
    assert without.rescales >= 1
    assert (with_activation.rescales, with_activation.slo_violation_s, with_activation.records_lost) == (0, 0, 0)
    assert with_activation.core_hours < without.core_hours


def test_a_scenario_sets_the_option_and_its_output_says_what_waits():
    from scaling.scenario.format import evaluate_text

    step = {"metrics": {"src": {"records_in_per_s": 1000.0, "records_out_per_s": 1000.0, "busy_time_ms_per_s": 1000.0,
                                "backlog_growth_per_s": 500.0}}}
    doc = {"format": 1, "mode": "continuous", "policy": {"restart_time_s": 0, "activation_evaluations": 2},
           "vertices": [{"id": "src", "parallelism": 2, "source": True}],
           "steps": [{"at_s": 0, **step}, {"at_s": 60, **step}]}
    first, second = evaluate_text(json.dumps(doc))["steps"]
    assert first["decision"] == "blocked"
    assert first["awaiting_activation"] == {"direction": "up", "count": 1, "required": 2}
    assert second["decision"] == "scale" and "awaiting_activation" not in second
