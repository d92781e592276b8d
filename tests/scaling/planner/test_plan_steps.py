"""The planners' named steps, each alone: the job-level gate both planners share (scaling/planner/gate.py)
and the micro-batch planner's steps (evaluate the stages, size the cores, clamp, delayed
scale-down, per-stage thresholds)."""

import math

import pytest

from scaling.planner.gate import backlog_reason, job_gate, next_state
from scaling.planner.microbatch import _band_thresholds, _clamp_by_scale_factors, _delayed_scale_down, _others
from scaling.planner.sizing import EXECUTORS_KEY, evaluate_stages, size_cores
from scaling.policy.policy import Policy
from scaling.values.metrics import ClusterState
from scaling.values.reasons import AwaitingActivation, Decision, Direction, PlanReason, Reason
from scaling.values.state import PendingScaleDown, ScalerState, ScalingRecord
from tests.scaling.factories import three_stages

TWO = Policy(activation_evaluations=2)


def test_the_gate_holds_a_scale_until_the_activation_time_agrees():
    first = job_gate(Decision.SCALE, 1, state=ScalerState(), policy=TWO, now_s=0)
    awaiting = AwaitingActivation(Direction.UP, 1, 2)
    assert (first.decision, first.awaiting, first.streak) == (Decision.BLOCKED, awaiting, 1)
    assert first.activation_reason == Reason(PlanReason.ACTIVATION_PENDING, None,
                                             {"direction": "up", "count": 1, "required": 2})
    second = job_gate(Decision.SCALE, 1, state=ScalerState(activation_streak=1), policy=TWO, now_s=60)
    assert (second.decision, second.awaiting, second.streak) == (Decision.SCALE, None, 0)
    assert job_gate(Decision.SCALE, 1, state=None, policy=TWO, now_s=0).decision == Decision.SCALE
    # A held scale-down (blocked, direction -1) counts towards a scale-down's activation time.
    held = job_gate(Decision.BLOCKED, -1, state=ScalerState(), policy=TWO, now_s=0)
    assert (held.decision, held.awaiting, held.streak) == (Decision.BLOCKED, None, -1)


def test_the_gate_blocks_a_scale_inside_an_excluded_period():
    policy = Policy(excluded_periods=("00:00-06:00",))
    inside = job_gate(Decision.SCALE, 1, state=None, policy=policy, now_s=3600)
    assert (inside.decision, inside.period) == (Decision.BLOCKED, "00:00-06:00")
    assert inside.period_reason == Reason(PlanReason.EXCLUDED_PERIOD, None, {"period": "00:00-06:00"})
    outside = job_gate(Decision.SCALE, 1, state=None, policy=policy, now_s=12 * 3600)
    assert (outside.decision, outside.period, outside.period_reason) == (Decision.SCALE, None, None)
    assert job_gate(Decision.NO_CHANGE, 0, state=None, policy=policy, now_s=3600).decision == Decision.NO_CHANGE


def test_next_state_records_a_scale_and_keeps_pending_scale_downs_otherwise():
    pending = (PendingScaleDown("v", 0.0, ((0.0, 2, True),)),)
    record = ScalingRecord(60.0, "v", 4, 8, 100.0, 200.0)
    scaled = next_state(ScalerState(), job_gate(Decision.SCALE, 1, state=None, policy=Policy(), now_s=60), pending,
                        [record])
    assert (scaled.history, scaled.pending_scale_downs, scaled.activation_streak) == ((record,), (), 0)
    held = next_state(ScalerState(), job_gate(Decision.SCALE, 1, state=ScalerState(), policy=TWO, now_s=60), pending,
                      [record])
    assert (held.history, held.pending_scale_downs, held.activation_streak) == ((), pending, 1)
    assert backlog_reason(Policy(), "micro-batch").data == {"lag_threshold_s": Policy().backlog_lag_threshold_s,
                                                            "mode": "micro-batch"}


def test_others_sums_every_other_term_in_one_pass():
    assert _others([1.0, 2.0, 3.0]) == [5.0, 4.0, 3.0]
    assert _others([]) == [] and _others([7.0]) == [0.0]
    assert _others([math.inf, 1.0]) == [1.0, math.inf]


def test_band_thresholds_equal_the_per_stage_resum():
    """The thresholds from prefix + suffix sums are those of summing the other stages per stage."""
    topology, metrics = three_stages(pinned_second=True)
    job = evaluate_stages(topology, metrics, ClusterState(executors=2, trigger_interval_s=1.0), Policy(), None)
    slots = {vid: min(topology.vertex(vid).parallelism, 2) for vid in job.stages}
    for vid, (up, down) in _band_thresholds(job).items():
        others_up = sum(s.need_up / slots[k] for k, s in job.stages.items() if k != vid)
        others_down = sum(s.need_target / slots[k] for k, s in job.stages.items() if k != vid)
        room_up = (job.high * (1 - job.overhead) - others_up) * slots[vid]
        room_down = (job.low * (1 - job.overhead) - others_down) * slots[vid]
        st, restart = job.stages[vid], job.rates[vid].restart_data_rate
        assert up == pytest.approx(st.lam / room_up if room_up > 0 else math.inf)
        assert down == pytest.approx((st.lam + restart) / room_down if room_down > 0 else math.inf)


def test_size_cores_finds_the_worked_examples_five_cores():
    """tests/scaling/planner/test_planner.py's worked example: C* = ceil(2.75 / 0.7 / 0.9) = 5."""
    topology, metrics = three_stages(pinned_second=False)
    job = evaluate_stages(topology, metrics, ClusterState(executors=1, trigger_interval_s=1.0),
                          Policy(restart_time_s=0), None)
    sizing = size_cores(job)
    assert (sizing.executors, sizing.chosen, sizing.cores_needed) == (5, True, 5)
    assert job.at(5, "need_sized") <= 0.7 < job.at(4, "need_sized")


def test_the_scale_factors_clamp_the_executor_change():
    cluster = ClusterState(executors=10, max_executors=40)
    assert _clamp_by_scale_factors(1, cluster, Policy(scale_down_max_factor=0.6), backlog_mode=False) == 4
    assert _clamp_by_scale_factors(40, cluster, Policy(scale_up_max_factor=1.0), backlog_mode=False) == 20
    assert _clamp_by_scale_factors(1, cluster, Policy(scale_down_max_factor=0.6), backlog_mode=True) == 10


def test_the_delayed_scale_down_holds_then_applies_the_windows_largest():
    topology, metrics = three_stages(pinned_second=False)
    cluster = ClusterState(executors=8, trigger_interval_s=1.0)
    policy = Policy(restart_time_s=0, scale_down_interval_s=600, utilization_target=0.9)
    job = evaluate_stages(topology, metrics, cluster, policy, None)
    assert _delayed_scale_down(job, 4, True, None, 0).executors == 4   # stateless: at once
    held = _delayed_scale_down(job, 4, True, ScalerState(), 0)
    expected = (8, PlanReason.HELD_EXECUTOR_SCALE_DOWN, 600)
    assert (held.executors, held.reason.code, held.reason.data["due_s"]) == expected
    state = ScalerState(pending_scale_downs=tuple(held.pending.values()))
    due = _delayed_scale_down(job, 4, True, state, 600)
    assert (due.executors, due.reason, due.held) == (4, None, ())
    assert EXECUTORS_KEY in due.pending
