"""Each divergence from Flink's current autoscaler (flink-kubernetes-operator, module
flink-autoscaler) has a test here, named after the Flink class, test or issue it follows."""

import json
from datetime import datetime, timezone

import pytest

from scaling.planner.microbatch import plan_micro_batch
from scaling.planner.vertex_scaler import observed_scaling_coefficient
from scaling.policy.option_types import PolicyError
from scaling.policy.periods import active_period, parse_period
from scaling.policy.policy import Policy
from scaling.scenario.format import evaluate_text
from scaling.scenario.values import ScenarioError
from scaling.values.metrics import ClusterState, VertexMetrics
from scaling.values.reasons import Limit, Reason
from scaling.values.state import PendingScaleDown, ScalerState, ScalingRecord, state_from_dict, state_to_dict
from scaling.values.topology import Edge, Topology, Vertex
from scaling.words.reason_text import reason_text
from tests.scaling.factories import steps_of


def one_vertex(policy, steps, parallelism):
    return {"format": 1, "mode": "continuous", "policy": {"restart_time_s": 0, "alignment": "off", **policy},
            "vertices": [{"id": "src", "parallelism": parallelism, "source": True}], "steps": steps}


def src_step(at_s, busy, records_in=1000.0, growth=0.0, backlog=0.0):
    return {"at_s": at_s, "metrics": {"src": {"records_in_per_s": records_in, "records_out_per_s": records_in,
                                              "busy_time_ms_per_s": busy, "backlog_growth_per_s": growth,
                                              "backlog": backlog}}}


def test_catch_up_duration_zero_disables_backlog_based_scaling():
    """Flink ``job.autoscaler.catch-up.duration``: "Set to 0 to disable" (``ScalingMetricEvaluator``:
    catch-up rate 0; ``AutoScalerUtils.getTargetProcessingCapacity``: no restart rate)."""
    doc = one_vertex({"catch_up_duration_s": 0, "restart_time_s": 300, "backlog_lag_threshold_s": 10**9},
                     [src_step(0, 500, backlog=10**6)], 2)
    src = steps_of(doc)[0]["vertices"]["src"]
    assert src["catch_up_data_rate"] == 0.0
    # round(1000 / 0.4) with no restart term (it would add 1000 × 300 / catch-up).
    assert src["scale_down_threshold"] == 2500.0
    with pytest.raises(ScenarioError, match=r"^policy.catch_up_duration_s: must be within \[0, "):
        evaluate_text(json.dumps(one_vertex({"catch_up_duration_s": -1}, [src_step(0, 500)], 2)))


def test_bounds_never_force_a_change_in_the_opposite_direction():
    """Flink clamps to [min(current, vertex.min), max(current, vertex.max)]: p4 with min 5 at 20 %
    busy is not scaled up to 5, and p12 with max 10 at 100 % busy is not scaled down to 10."""
    low = steps_of(one_vertex({"vertex_min_parallelism": 5, "scale_down_interval_s": 0}, [src_step(0, 200)], 4))[0]
    assert low["vertices"]["src"]["proposed"] <= 4
    high = steps_of(one_vertex({"vertex_max_parallelism": 10}, [src_step(0, 1000, growth=500)], 12))[0]
    assert high["vertices"]["src"]["proposed"] == 12 and high["decision"] != "scale"


def test_target_capacity_is_rounded_before_dividing_by_the_true_processing_rate():
    """Flink ``AutoScalerUtils.getTargetProcessingCapacity`` returns ``Math.round(...)``: 350.1 / 0.35 =
    1000.29 -> 1000; TPR 500 -> factor 2.0 -> p 2 (unrounded it would be ceil(2.0006) = 3)."""
    step = src_step(0, 700.2, records_in=350.1)
    out = steps_of(one_vertex({"utilization_target": 0.35}, [step], 1))[0]
    assert out["vertices"]["src"]["true_processing_rate"] == 500.0
    assert (out["decision"], out["vertices"]["src"]["proposed"]) == ("scale", 2)


def test_restart_time_limit_defaults_to_flinks_15_minutes():
    """Flink ``AutoScalerOptions.TRACKED_RESTART_TIME_LIMIT`` = 15 min."""
    assert Policy().restart_time_limit_s == 900.0
    state = ScalerState().with_restart_time(2000.0)
    assert state.restart_time_s(Policy(restart_time_tracking_enabled=True)) == 900.0


def test_delayed_scale_down_uses_the_sliding_window_maximum():
    """FLINK-36863 (``DelayedScaleDown.getMaxRecommendedParallelism(windowStart)``): interval 600 s,
    p20 at 1000 records/s, target capacity round(1000 / 0.7) = 1429, recommendation ceil(1429 × busy
    / 10^6 × 20): t=0 busy 500 -> 15; t=300 busy 250 -> 8; t=700 busy 250 -> 8. At t=700 the window
    is [100, 700]: the maximum is 8, not the 15 of t=0 (the maximum since the first trigger)."""
    doc = one_vertex({"scale_down_interval_s": 600, "scale_down_max_factor": 1.0},
                     [src_step(0, 500), src_step(300, 250), src_step(700, 250)], 20)
    steps = steps_of(doc)
    summary = [(s["decision"], s["vertices"]["src"]["proposed"]) for s in steps]
    assert summary == [("no-change", 20), ("blocked", 20), ("scale", 8)]
    held = steps[0]["vertices"]["src"]["reason"]
    assert (held["code"], held["data"]["current"], held["data"]["target"], held["data"]["due_s"]) == (
        "held-scale-down", 20, 15, 600)


def test_pending_scale_down_keeps_a_decreasing_window_and_round_trips():
    """``VertexDelayedScaleDownInfo.recordRecommendedParallelism``: a later, larger (or equal)
    recommendation evicts the smaller ones before it."""
    p = PendingScaleDown("v", 0.0, ()).record(0, 10).record(100, 6).record(200, 8, False)
    assert [r[:2] for r in p.recommendations] == [(0.0, 10), (200.0, 8)]
    assert p.max_in_window(0) == (10, True) and p.max_in_window(50) == (8, False)
    state = ScalerState(pending_scale_downs=(p,))
    assert state_from_dict(json.loads(json.dumps(state_to_dict(state)))) == state
    # A state written before (two-element recommendations) still loads.
    old = {"pending_scale_downs": [{"vertex_id": "v", "first_at_s": 0, "recommendations": [[0, 4]]}]}
    assert state_from_dict(old).pending("v").max_in_window(0) == (4, True)


def test_observed_scaling_coefficient_is_flinks_least_squares_fit():
    """``JobVertexScaler.calculateObservedScalingCoefficient``: P = 2, 4, 8 with TPR 200, 360, 560;
    baseline 200 / 2 = 100 per task; α = (400 + 1440 + 4480) / ((4 + 16 + 64) × 100) = 0.752 -> 0.76
    (rounded up to 2 decimals); fewer than 3 observations -> 1.0."""
    observed = ((2, 200), (4, 360), (8, 560))
    records = tuple(ScalingRecord(i, "v", p, p * 2, r, r * 2) for i, (p, r) in enumerate(observed))
    policy = Policy(observed_scalability_enabled=True)
    assert observed_scaling_coefficient(records, policy) == 0.76
    assert observed_scaling_coefficient(records[:2], policy) == 1.0
    assert observed_scaling_coefficient(records, Policy(observed_scalability_coefficient_min=0.9)) == 0.9


def test_observed_scalability_scales_further_on_a_sub_linear_vertex():
    """With the coefficient 0.76 the factor is divided by it: more parallelism in one step."""
    records = tuple(ScalingRecord(i, "src", p, p * 2, r, r * 2)
                    for i, (p, r) in enumerate(((2, 200), (4, 360), (8, 560))))
    from scaling.planner.continuous import plan_job

    topology = Topology((Vertex("src", parallelism=8, source=True),))
    metrics = {"src": VertexMetrics(1000, 1000, 1000, backlog_growth_per_s=400)}
    state = ScalerState(history=records)
    plain = plan_job(topology, metrics, Policy(restart_time_s=0, alignment="off"), state).vertex("src").proposed
    learned = plan_job(topology, metrics, Policy(restart_time_s=0, alignment="off", observed_scalability_enabled=True),
                       state).vertex("src").proposed
    assert plain == 16 and learned == 22  # ceil(2 × 8) and ceil(2 / 0.76 × 8) = ceil(21.05)


@pytest.mark.parametrize(("text", "at", "inside"), [
    ("9:30:30-10:50:20", datetime(2026, 3, 2, 9, 30, 30), True),
    ("9:30:30-10:50:20", datetime(2026, 3, 2, 9, 30, 29), False),
    ("9:30:30-10:50:20", datetime(2026, 3, 2, 10, 50, 20), True),     # Quartz: both ends inclusive
    ("9:30:30-10:50:20", datetime(2026, 3, 2, 10, 50, 20, 1000), False),
    ("22:00-23:59:59:999", datetime(2026, 3, 4, 23, 59, 59, 999000), True),
    ("* * 9-11,14-16 * * ?", datetime(2026, 3, 2, 11, 59, 59), True),
    ("* * 9-11,14-16 * * ?", datetime(2026, 3, 2, 12, 0, 0), False),
    ("* * * ? * 2-6", datetime(2026, 3, 2, 3, 0), True),      # a Monday (Quartz 2)
    ("* * * ? * 2-6", datetime(2026, 3, 1, 3, 0), False),     # a Sunday (Quartz 1)
    ("* * * ? * MON-FRI 2026", datetime(2026, 3, 2, 3, 0), True),
    ("* * * ? * MON-FRI 2027", datetime(2026, 3, 2, 3, 0), False),
    ("9:30:30-10:50:20 && * * * ? * 2,5", datetime(2026, 3, 5, 10, 0), True),   # Thursday
    ("9:30:30-10:50:20 && * * * ? * 2,5", datetime(2026, 3, 4, 10, 0), False),  # Wednesday
    ("* 9-17 * * 1-5", datetime(2026, 3, 2, 10, 0), True),    # 5-field Unix cron still works
])
def test_excluded_periods_accept_flinks_syntax(text, at, inside):
    """Flink ``utils.CalendarUtils``: daily ``HH:mm:ss`` ranges, 6/7-field Quartz cron, ``&&``."""
    now_s = at.replace(tzinfo=timezone.utc).timestamp()
    assert (active_period((text,), now_s) == text) is inside


@pytest.mark.parametrize(("text", "why"), [
    ("9:00-10:00 && 11:00-12:00", "two daily windows"),
    ("* * * ? * 2 && * * * ? * 3", "two cron expressions"),
    ("a && b && c", "more than two"),
    ("* * * L * ?", "L, W or #"),
    ("0 0 25 * * ?", "outside 0-23"),
    ("every tuesday", "neither"),
    ("22:00-06:00", "start is not before its end"),   # Quartz DailyCalendar.setTimeRange
    ("10:00-10:00", "start is not before its end"),
    ("09:00-24:00", "bad time of day"),                # Quartz DailyCalendar.validate: hour 0-23
])
def test_excluded_periods_refuse_what_they_cannot_read(text, why):
    with pytest.raises(PolicyError, match=f"^excluded_periods: .*{why}"):
        parse_period(text)


def test_skewed_stage_is_the_bottleneck_and_is_not_scaled_down():
    """Micro-batch skew: 8 tasks on 8 cores, mean busy 400 ms/s but the slowest task 1020
    ms of each second (10.2 s per 10 s trigger), the backlog growing 800/s. With the mean the plan
    scaled it down 8 -> 4; with the busiest task's time (FLIP-271 MAX) it keeps its 8 cores and names
    the skewed stage. Its 8 partitions give it 8 tasks at most, so no added core can lower its
    predicted utilization (diminishing-returns: 0 % of the linear gain); without that rule the plan
    bought 15 cores that could not help."""
    topology = Topology((Vertex("scan", parallelism=8, source=True, partitions=8),))
    skewed = VertexMetrics(2000, 2000, 400, backlog_growth_per_s=800, busy_time_max_ms_per_s=1000)
    cluster = ClusterState(executors=8, max_executors=32, trigger_interval_s=10.0)
    plan = plan_micro_batch(topology, {"scan": skewed}, cluster, Policy(restart_time_s=0))
    assert plan.executors_proposed == 8
    stop = plan.limit(Limit.DIMINISHING_RETURNS)
    assert stop is not None and (stop.data["cores"], stop.data["efficiency"]) == (8, 0.0)
    assert plan_micro_batch(topology, {"scan": skewed}, cluster,
                            Policy(restart_time_s=0, scale_up_min_efficiency=0)).executors_proposed > 8
    limit = plan.limit(Limit.BOTTLENECK) or plan.limit(Limit.PARTITIONS)
    assert limit is not None and limit.vertex_id == "scan" and limit.data["skew"] == 2.5
    mean_only = VertexMetrics(2000, 2000, 400, backlog_growth_per_s=800)
    assert plan_micro_batch(topology, {"scan": mean_only}, cluster, Policy(restart_time_s=0)).decision == "no-change"


def test_scale_down_max_factor_applies_in_micro_batch_mode():
    topology = Topology((Vertex("scan", parallelism=20, source=True),))
    metrics = {"scan": VertexMetrics(1000, 1000, 10)}   # 0.2 busy cores on 20
    cluster = ClusterState(executors=20, max_executors=32, trigger_interval_s=1.0)
    assert plan_micro_batch(topology, metrics, cluster, Policy()).executors_proposed == 8   # ceil(20 × 0.4)
    assert plan_micro_batch(topology, metrics, cluster, Policy(scale_down_max_factor=1.0)).executors_proposed == 1


def test_plan_says_when_catch_up_cannot_finish_at_max_executors():
    """The arrivals (1,000/s) keep 1 core busy; at 4 cores (the max) the spare share drains
    (1 / 0.25 − 1) × 1,000 = 3,000 records/s, so a 10^7 backlog takes 3,333 s > 1,800 s."""
    topology = Topology((Vertex("scan", parallelism=4, source=True),))
    metrics = {"scan": VertexMetrics(1000, 1000, 250, backlog=10**7)}
    cluster = ClusterState(executors=2, max_executors=4, trigger_interval_s=1.0)
    plan = plan_micro_batch(topology, metrics, cluster, Policy(restart_time_s=0, catch_up_duration_s=1800))
    limit = plan.limit(Limit.CATCH_UP_UNREACHABLE)
    assert limit is not None and limit.data["catch_up_s"] == pytest.approx(10**7 / 3000)
    assert limit.data["catch_up_duration_s"] == 1800
    assert plan.limit(Limit.MAX_EXECUTORS) is not None
    assert Reason(Limit.CATCH_UP_UNREACHABLE, None, dict(limit.data)) in plan.reasons


def test_a_backlog_that_never_drains_is_said_in_words_not_as_inf_seconds():
    """The arrivals (5,000/s) need 5 busy cores and the maximum is 4: the backlog never drains. The
    reason said 'draining the backlog takes inf s' (seen on make demo's proposal page)."""
    topology = Topology((Vertex("scan", parallelism=4, source=True),))
    metrics = {"scan": VertexMetrics(5000, 5000, 1000, backlog=10**6)}
    cluster = ClusterState(executors=2, max_executors=4, trigger_interval_s=1.0)
    plan = plan_micro_batch(topology, metrics, cluster, Policy(restart_time_s=0))
    limit = plan.limit(Limit.CATCH_UP_UNREACHABLE)
    assert limit is not None and limit.data["catch_up_s"] == float("inf")
    text = reason_text(next(r for r in plan.reasons if r.code == Limit.CATCH_UP_UNREACHABLE))
    assert "never drains, even at 4 cores" in text and "inf" not in text


def test_max_executors_says_the_utilization_at_the_target_rate_the_page_shows_and_with_the_catch_up():
    """At the maximum (4 cores) the arrivals alone fill 0.25 of each core: the same number as the
    plan's ``predicted_utilization`` on the proposal page; the catch-up needs more."""
    topology = Topology((Vertex("scan", parallelism=4, source=True),))
    metrics = {"scan": VertexMetrics(1000, 1000, 250, backlog=10**7)}
    cluster = ClusterState(executors=2, max_executors=4, trigger_interval_s=1.0)
    plan = plan_micro_batch(topology, metrics, cluster, Policy(restart_time_s=0))
    limit = plan.limit(Limit.MAX_EXECUTORS)
    assert plan.executors_proposed == 4
    assert limit.data["predicted_utilization"] == pytest.approx(plan.predicted_utilization) == pytest.approx(0.25)
    assert limit.data["utilization_with_catch_up"] > limit.data["predicted_utilization"]
    assert Reason(Limit.MAX_EXECUTORS, None, dict(limit.data)) in plan.reasons


def test_plan_warns_when_the_backlog_nears_the_sources_retention():
    topology = Topology((Vertex("scan", parallelism=4, source=True, retention_s=3600),))
    metrics = {"scan": VertexMetrics(1000, 1000, 500, backlog=3_000_000)}   # 3,000 s old
    plan = plan_micro_batch(topology, metrics, ClusterState(executors=4, trigger_interval_s=1.0), Policy())
    limit = plan.limit(Limit.RETENTION_RISK)
    assert limit is not None and limit.vertex_id == "scan" and limit.data["lag_s"] == 3000


def test_cores_that_cannot_help_a_partition_bound_stage_are_not_added():
    """The source has 2 partitions (2 tasks at most) and needs 1.8 busy cores: it
    alone fills 90 % of each trigger; the plan names it (``partitions``) and does not buy cores for it:
    the other stage (0.2 busy cores) is served by the cores the source already has."""
    topology = Topology((Vertex("scan", parallelism=2, source=True, partitions=2), Vertex("map", parallelism=2)),
                        (Edge("scan", "map", "forward"),))
    metrics = {"scan": VertexMetrics(1000, 1000, 900), "map": VertexMetrics(1000, 1000, 100)}
    plan = plan_micro_batch(topology, metrics, ClusterState(executors=2, max_executors=16, trigger_interval_s=1.0),
                            Policy(restart_time_s=0))
    limit = plan.limit(Limit.PARTITIONS)
    assert limit is not None and limit.vertex_id == "scan" and limit.data["tasks"] == 2
    assert plan.executors_proposed == 2
    assert plan.limit(Limit.DIMINISHING_RETURNS).data["cores"] == 2


def test_a_load_change_inside_the_window_is_evaluated_on_the_part_after_it():
    """Converge in one step: a 180 s window with 3 samples at 1,000/s and 3 at 3,000/s
    averages to 2,000/s, and the first action would be too small. The window detects the step and
    evaluates on the samples after it (DS2's warm-up / activation time). Noise is not a step."""
    from scaling.values.metrics import MetricWindow, change_point

    assert change_point([1000, 1010, 990, 3000, 3050, 2990]) == 3
    assert change_point([1000, 1030, 970, 1010, 990, 1020]) is None
    assert change_point([1000, 1000, 1000, 1000, 3000, 3000]) == 4
    assert change_point([1000, 1000, 1000, 1000, 1000, 3000]) is None   # one sample is not a level yet
    assert change_point([1000, 3000, 1000, 3000, 1000, 3000]) is None   # not a step
    rows = [{"src": VertexMetrics(rate, rate, rate / 10)} for rate in (1000, 1000, 1000, 3000, 3000, 3000)]
    window = MetricWindow.from_metrics(rows)
    assert window.aggregate()["src"].records_in_per_s == 2000
    assert window.aggregate(("src",), after_change=True)["src"].records_in_per_s == 3000


def test_a_spike_that_ended_inside_the_window_is_left_out_of_it():
    """Spikes are evaluated on the part after the change: a 30 s spike at 3x, over before
    the window ends, is a shift back down; the window keeps the samples after it. The threshold is a
    share of the lower level, so the fall counts like the rise: the spike's own high samples raise
    the mean before the fall (the bench's spikes/nexmark-q5 window at t = 420 s, seed 7: a fall of
    8.5k/s from a mean of 34.1k/s, 24.9 % of it, but 35 % of the 24.3k/s level it fell to)."""
    from scaling.values.metrics import MetricWindow, change_point

    assert change_point([1000, 1000, 1000, 3000, 1000, 1000]) == 4
    assert change_point([1000, 1000, 2000, 2000, 1000, 1000]) == 4      # a spike over two collects
    assert change_point([24300, 24749, 26204, 26162, 35170, 68096, 25646, 24100]) == 6
    rows = [{"src": VertexMetrics(rate, rate, rate / 10)} for rate in (1000, 1000, 1000, 3000, 1000, 1000)]
    window = MetricWindow.from_metrics(rows)
    assert window.aggregate()["src"].records_in_per_s == pytest.approx(4000 / 3)
    assert window.aggregate(("src",), after_change=True)["src"].records_in_per_s == 1000


def test_a_plan_with_limits_and_held_scale_downs_converts_with_asdict():
    """The web app stores ``dataclasses.asdict(plan)``: the structured limits must survive it."""
    from dataclasses import asdict

    topology = Topology((Vertex("scan", parallelism=4, source=True, retention_s=3600),))
    metrics = {"scan": VertexMetrics(1000, 1000, 500, backlog=3_000_000)}
    plan = plan_micro_batch(topology, metrics, ClusterState(executors=4, trigger_interval_s=1.0),
                            Policy(catch_up_duration_s=1800))
    data = json.loads(json.dumps(asdict(plan), default=str))
    assert data["limits"][0]["code"] == "retention-risk" and data["decision"] in ("scale", "no-change", "blocked")


def test_vertex_plans_carry_the_structured_reason_of_their_note():
    from scaling.planner.continuous import plan_job
    from scaling.values.reasons import VertexReason

    topology = Topology((Vertex("src", parallelism=8, source=True),))
    plan = plan_job(topology, {"src": VertexMetrics(1000, 1000, 200)},
                    Policy(restart_time_s=0, scale_down_interval_s=600), ScalerState(), now_s=0)
    src = plan.vertex("src")
    assert src.reason.code == VertexReason.HELD_SCALE_DOWN and src.reason.data["due_s"] == 600
    assert plan.held[0].target == src.reason.data["target"] and plan.held[0].due_s == 600


@pytest.mark.parametrize(("parallelism", "target", "tpr", "utilization", "expected"), [
    (10, 50, 100, 1.0, (5, True)), (10, 50, 100, 0.8, (8, False)), (10, 80, 100, 0.8, (10, False)),
    (10, 60, 100, 0.8, (8, False)), (10, 59, 100, 0.8, (8, False)), (2, 100, 40, 0.5, (10, True)),
])
def test_flink_job_vertex_scaler_test_parallelism_scaling(parallelism, target, tpr, utilization, expected):
    """Flink ``JobVertexScalerTest.testParallelismScaling`` (hash input, max parallelism 720, catch-up 0,
    scale-down interval 0): ``ParallelismChange.build(new, current, outsideUtilizationBound)``. E.g.
    target 0.8: round(50 / 0.8) = 63, ceil(0.63 × 10) = 7, balanced alignment -> 8 (720 // 8 < 720 // 7)."""
    from scaling.planner.ds2 import evaluate_job
    from scaling.planner.vertex_scaler import decide_vertex

    topology = Topology((Vertex("a", parallelism=1, source=True),
                         Vertex("b", parallelism=parallelism, max_parallelism=720)), (Edge("a", "b", "hash"),))
    metrics = {"a": VertexMetrics(target, target, true_processing_rate=1e9),
               "b": VertexMetrics(target, target, true_processing_rate=tpr)}
    policy = Policy(utilization_target=utilization, catch_up_duration_s=0, scale_down_interval_s=0)
    evaluation = evaluate_job(topology, metrics, policy)
    decision = decide_vertex(topology, topology.vertex("b"), evaluation.vertices["b"], policy, ScalerState(), 0)
    assert (decision.proposed, decision.outside_bounds) == expected


def _flink_vertex(parallelism, target, tpr, policy, state=ScalerState(), now_s=0.0):
    """Flink ``JobVertexScalerTest.evaluated(parallelism, targetDataRate, trueProcessingRate)`` on a
    vertex without hash inputs (``NOT_ADJUST_INPUTS``), catch-up 0; returns the decision."""
    from scaling.planner.ds2 import evaluate_job
    from scaling.planner.vertex_scaler import decide_vertex

    topology = Topology((Vertex("a", parallelism=1, source=True),
                         Vertex("b", parallelism=parallelism, max_parallelism=720)), (Edge("a", "b", "rebalance"),))
    metrics = {"a": VertexMetrics(target, target, true_processing_rate=1e9),
               "b": VertexMetrics(target, target, true_processing_rate=tpr)}
    evaluation = evaluate_job(topology, metrics, policy)
    return decide_vertex(topology, topology.vertex("b"), evaluation.vertices["b"], policy, state, now_s)


def test_flink_min_and_max_parallelism_limits():
    """``testMinParallelismLimitIsUsed`` / ``testMaxParallelismLimitIsUsed``."""
    low = Policy(vertex_min_parallelism=5, scale_down_interval_s=0, catch_up_duration_s=0)
    assert (_flink_vertex(10, 100, 500, low).proposed, _flink_vertex(4, 100, 500, low).proposed) == (5, 4)
    high = Policy(vertex_max_parallelism=10, utilization_target=1.0, catch_up_duration_s=0)
    assert (_flink_vertex(10, 500, 100, high).proposed, _flink_vertex(12, 500, 100, high).proposed) == (10, 12)


def test_flink_scale_down_after_interval():
    """``testScaleDownAfterInterval``: p100, TPR 1000, interval 60 s; targets 800, 900, 720, 640 at
    t = 0, 10, 40, 59 are held; at t = 60 (target 700) the largest recommendation of the window, 90."""
    policy = Policy(utilization_target=1.0, scale_down_interval_s=60, catch_up_duration_s=0)
    state = ScalerState()
    for at, target in ((0, 800), (10, 900), (40, 720), (59, 640)):
        d = _flink_vertex(100, target, 1000, policy, state, at)
        assert d.proposed == 100 and d.kind == "held"
        state = ScalerState(pending_scale_downs=(d.pending,))
    d = _flink_vertex(100, 700, 1000, policy, state, 60)
    assert (d.proposed, d.kind, d.outside_bounds) == (90, "required", False)


def test_flink_max_recommended_parallelism_used_after_scale_down_interval():
    """``testMaxRecommendedParallelismUsedAfterScaleDownInterval``: t=0 -> 50 (held), t=30 -> 60 replaces
    it, t=65 (window start 5 s) -> build(60, 100, outside=true)."""
    policy = Policy(utilization_target=1.0, scale_down_interval_s=60, catch_up_duration_s=0)
    d0 = _flink_vertex(100, 500, 1000, policy, ScalerState(), 0)
    assert d0.kind == "held" and [r[1] for r in d0.pending.recommendations] == [50]
    d1 = _flink_vertex(100, 600, 1000, policy, ScalerState(pending_scale_downs=(d0.pending,)), 30)
    assert d1.kind == "held" and [r[1] for r in d1.pending.recommendations] == [60]
    d2 = _flink_vertex(100, 600, 1000, policy, ScalerState(pending_scale_downs=(d1.pending,)), 65)
    assert (d2.proposed, d2.kind, d2.outside_bounds) == (60, "required", True)


def test_flink_max_recommended_parallelism_equal_to_current_is_no_change():
    """``testMaxRecommendedParallelismEqualsCurrentParallelismReturnsNoChange``: a recommendation of 100
    at t=5 is still in the window at t=65, so the due scale-down to 80 is no change."""
    policy = Policy(utilization_target=1.0, scale_down_interval_s=60, catch_up_duration_s=0)
    injected = PendingScaleDown("b", 5.0, ()).record(5.0, 100, True)
    d = _flink_vertex(100, 800, 1000, policy, ScalerState(pending_scale_downs=(injected,)), 65)
    assert (d.proposed, d.kind) == (100, "none")


def test_denormal_rates_give_a_plan_not_a_division_by_zero():
    """Found by the 10,000-scenario fuzzer in CI: a source at 5e-324 records/s, busy 667 ms/s,
    made ``tpr × utilization target`` underflow to 0 in the ideal parallelism."""
    topology = Topology((Vertex("v0", parallelism=1, source=True), Vertex("v1", parallelism=1)),
                        (Edge("v0", "v1"),))
    tiny = 5e-324
    metrics = {"v0": VertexMetrics(tiny, tiny, 667.0, backlog=10.0), "v1": VertexMetrics(tiny, tiny, 500.0)}
    cluster = ClusterState(executors=1, max_executors=30, trigger_interval_s=1.0)
    plan = plan_micro_batch(topology, metrics, cluster, Policy(utilization_target=0.5))
    assert 1 <= plan.executors_proposed <= 30
    assert all(v.proposed >= 1 for v in plan.vertices)


# Flink ``AutoscalerValidatorTest.boundedOptions`` (FLINK-39826): (option, the feature that must be on
# for it to be checked, min, max).
GATED_OPTIONS = [("effectiveness_threshold", "effectiveness_detection_enabled", 0.0, 1.0),
                 ("observed_scalability_coefficient_min", "observed_scalability_enabled", 0.01, 1.0)]


@pytest.mark.parametrize(("option", "feature", "low", "high"), GATED_OPTIONS)
def test_a_features_option_is_checked_only_when_the_feature_is_on(option, feature, low, high):
    """Flink ``AutoscalerValidator.validateNumberIfEnabled``: out of [low, high] is refused with the
    option named when its feature is on (``testValueAboveMaxIsRejected``, ``testValueBelowMinIsRejected``),
    both ends are accepted (``testBoundaryValuesAreAccepted``), and out of range is ignored when the
    feature is off (``testOutOfRangeIgnoredWhenFeatureDisabled``)."""
    step = [src_step(0, 500)]
    for value in (high + 0.0001, low - 0.0001):
        with pytest.raises(ScenarioError, match=f"^policy.{option}: must be within"):
            evaluate_text(json.dumps(one_vertex({feature: True, option: value}, step, 2)))
    for value in (low, high):
        assert steps_of(one_vertex({feature: True, option: value}, step, 2))[0]["vertices"]["src"]["proposed"] >= 1
    assert steps_of(one_vertex({feature: False, option: high + 1.0}, step, 2))[0]["vertices"]["src"]["proposed"] >= 1


def test_scale_factors_are_at_least_zero_without_an_upper_bound():
    """Flink ``AutoscalerValidator``: ``scale-up.max-factor`` and ``scale-down.max-factor`` are only
    bounded below, by 0 (FLINK-39826). An up factor of 0 never scales up; a down factor above 1 leaves
    a scale-down unclamped, as 1 does (``JobVertexScaler``: ``1 - max-factor`` <= 0)."""
    for option in ("scale_up_max_factor", "scale_down_max_factor"):
        with pytest.raises(ScenarioError, match=rf"^policy.{option}: must be within \[0, .*\], got -0.1"):
            evaluate_text(json.dumps(one_vertex({option: -0.1}, [src_step(0, 500)], 2)))
    busy = steps_of(one_vertex({"scale_up_max_factor": 0.0}, [src_step(0, 1000, growth=500)], 4))[0]
    assert busy["vertices"]["src"]["proposed"] == 4
    idle = {"scale_down_interval_s": 0}
    unclamped = steps_of(one_vertex({**idle, "scale_down_max_factor": 1.5}, [src_step(0, 0, records_in=0.0)], 10))[0]
    at_one = steps_of(one_vertex({**idle, "scale_down_max_factor": 1.0}, [src_step(0, 0, records_in=0.0)], 10))[0]
    assert unclamped["vertices"]["src"]["proposed"] == at_one["vertices"]["src"]["proposed"] == 1
