"""Ports of Flink's executor-level autoscaler tests (apache/flink-kubernetes-operator, module
flink-autoscaler, main): ``ScalingExecutorTest``, ``DelayedScaleDownTest``,
``DelayedScaleDownEndToEndTest``, ``alignment.AlignmentModeTest`` and ``utils.CalendarUtilsTest``.

Each test is named after the Flink test it ports and is driven, where the scenario format can say
it, through a scenario document evaluated by ``scaling.scenario.format`` (the path of ``python -m scaling
evaluate``); multi-step scenarios carry the autoscaler state (delayed scale-downs, history) between
steps as a running autoscaler does. Flink's ``EvaluatedMetrics`` (target data rate, true processing
rate) are written as DS2's directly given rates: ``true_processing_rate`` per vertex, and each
vertex's ``records_in_per_s`` is its Flink target data rate, so the propagated target data rate is
Flink's. Tests of things this model does not have (memory tuning, resource checks and quotas, GC
pressure, scaling events and ``scaling.enabled``, custom executor plugins, custom alignment modes)
are not ported.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone

import pytest

from scaling.policy.options import flink_defaults
from scaling.scenario.format import evaluate_text, parse, render, run_scenario
from scaling.scenario.values import ScenarioError
from scaling.values.state import PendingScaleDown, ScalerState
from tests.scaling.factories import steps_of

# --------------------------------------------------------------------------------------------------
# DelayedScaleDownEndToEndTest
# --------------------------------------------------------------------------------------------------

E2E_SOURCE_P = 200
E2E_SINK_P = 1000
E2E_TARGET = 0.8
E2E_INTERVAL_S = 3600 - 1      # Duration.ofMinutes(60).minus(Duration.ofSeconds(1))


def _e2e_run(source_busy, sink_busy, records_per_minute=4_800_000):
    """Flink ``DelayedScaleDownEndToEndTest``: source p200 -> (rebalance) sink p1000, max parallelism
    4000, utilization 0.8 in [0.7, 0.9], scale-down interval 59:59, catch-up and restart 0, scale
    factors unbounded. Each busy value holds for 10 one-minute collections; the 10-minute metric
    window first fills at minute 10, and every later minute evaluates the mean busy time of the last
    10 collections (the window the Flink test's oracle averages).

    Returns ``[(minute, output step, plan)]`` from minute 10 on.
    """
    assert len(source_busy) == len(sink_busy)
    rate = records_per_minute / 60
    minutes = 10 * len(source_busy)
    per_minute = [(source_busy[m // 10], sink_busy[m // 10]) for m in range(minutes)]   # minute m + 1
    steps = []
    for minute in range(10, minutes + 1):
        window = per_minute[minute - 10:minute]
        src = sum(b for b, _ in window) / 10
        snk = sum(b for _, b in window) / 10
        steps.append({"at_s": minute * 60, "metrics": {
            "source": {"records_in_per_s": rate, "records_out_per_s": rate, "busy_time_ms_per_s": src},
            "sink": {"records_in_per_s": rate, "records_out_per_s": rate, "busy_time_ms_per_s": snk}}})
    doc = {"format": 1, "mode": "continuous",
           "policy": {"utilization_target": E2E_TARGET, "utilization_min": E2E_TARGET - 0.1,
                      "utilization_max": E2E_TARGET + 0.1, "restart_time_s": 0, "catch_up_duration_s": 0,
                      "vertex_max_parallelism": 10000, "scale_down_max_factor": 1.0,
                      "scale_up_max_factor": float(2**31 - 1), "scale_down_interval_s": E2E_INTERVAL_S},
           "vertices": [{"id": "source", "parallelism": E2E_SOURCE_P, "max_parallelism": 4000, "source": True},
                        {"id": "sink", "parallelism": E2E_SINK_P, "max_parallelism": 4000}],
           "edges": [{"from": "source", "to": "sink", "ship": "rebalance"}],
           "steps": steps}
    scenario = parse(json.dumps(doc))
    results = run_scenario(scenario)
    rendered = render(scenario, results)["steps"]
    assert rendered == evaluate_text(json.dumps(doc))["steps"]   # the same path as ``python -m scaling evaluate``
    return [(10 + i, out, plan) for i, (out, (_, plan)) in enumerate(zip(rendered, results))]


def _expected_parallelism(busy, current):
    """The Flink test's ``getExpectedParallelism(busyTime, currentParallelism)``."""
    return math.ceil(current * (busy / 1000) / E2E_TARGET)


def _expected_from_list(busy_list, current):
    """``getExpectedParallelism(taskBusyList, current)``: the largest busy time of the last 6 windows."""
    return _expected_parallelism(max(busy_list[-6:]), current)


def _proposed(out):
    return out["vertices"]["source"]["proposed"], out["vertices"]["sink"]["proposed"]


def _pending_scale_downs(plan):
    return {p.vertex_id for p in plan.next_state.pending_scale_downs}


def _assert_no_scaling(minute, out):
    assert out["decision"] != "scale" and _proposed(out) == (E2E_SOURCE_P, E2E_SINK_P), (minute, out)


def test_delayed_scale_down_happen_in_last_metric_window():
    """Flink ``DelayedScaleDownEndToEndTest.testDelayedScaleDownHappenInLastMetricWindow``: the sink's
    scale-down (first recommended at minute 10) waits for the full 59:59 interval and happens at
    minute 70 with the largest recommendation of the window (busy 400 -> 500), not the latest
    (busy 100 -> 125)."""
    source_busy = [800] * 7
    sink_busy = [350, 300, 150, 200, 400, 250, 100]
    runs = _e2e_run(source_busy, sink_busy)
    for minute, out, _ in runs[:-1]:
        _assert_no_scaling(minute, out)
    minute, out, _ = runs[-1]
    assert minute == 70 and out["decision"] == "scale"
    assert _proposed(out) == (_expected_from_list(source_busy, E2E_SOURCE_P),
                              _expected_from_list(sink_busy, E2E_SINK_P)) == (200, 500)


@pytest.mark.parametrize("sink_busy", [
    [700, 690, 690, 690, 690, 690] * 5 + [700],
    [700, 690] * 7 + [700],
    [790, 200, 200, 200, 200, 200] * 5 + [790],
    [790, 200] * 7 + [790],
])
def test_scale_down_never_happen_when_max_recommended_parallelism_within_utilization_boundary(sink_busy):
    """Flink ``DelayedScaleDownEndToEndTest.testScaleDownNeverHappenWhenMaxRecommendedParallelismWithin
    UtilizationBoundary``: the largest recommendation of every 59:59 window comes from a busy time
    inside [0.7, 0.9], so the due scale-down is not outside the utilization bounds and never runs."""
    runs = _e2e_run([800] * len(sink_busy), sink_busy)
    for minute, out, plan in runs:
        _assert_no_scaling(minute, out)
    assert "sink" in _pending_scale_downs(runs[-1][2])


@pytest.mark.parametrize(("source_busy", "sink_busy"), [
    ([780] * 17, [800, 790, 780, 770, 760, 750, 740, 730, 720, 710, 700, 690, 680, 670, 660, 660, 660]),
    ([780] * 17, [700] * 11 + [690, 680, 670, 660, 660, 660]),
    ([780] * 18, [800] + [790] * 10 + [690, 680, 670, 660, 660, 660, 660]),
    ([780] * 17, [800, 790, 780, 770, 760, 750, 740, 730, 720, 710, 700, 100, 100, 100, 100, 100, 100]),
    ([780] * 23, [800, 790, 780, 770, 760, 750, 740, 730, 720, 710, 700, 200, 200, 200, 200, 200, 700,
                  100, 100, 100, 100, 100, 100]),
])
def test_scale_down_utilization_boundary_from_within_to_outside(source_busy, sink_busy):
    """Flink ``DelayedScaleDownEndToEndTest.testScaleDownUtilizationBoundaryFromWithinToOutside``: the
    scale-downs recommended inside the utilization band do not run; the job scales once the sink's
    recommendations have been outside the band for a whole interval (60 evaluations), to the largest
    recommendation of that stretch for both vertices (the Flink test's oracle, ported as is)."""
    runs = _e2e_run(source_busy, sink_busy)
    per_minute = [(source_busy[m // 10], sink_busy[m // 10]) for m in range(10 * len(source_busy))]
    source_recs, sink_recs = [], []
    scaled = False
    for minute, out, _ in runs:
        window = per_minute[minute - 10:minute]
        source_avg = sum(b for b, _ in window) / 10
        sink_avg = sum(b for _, b in window) / 10
        if sink_avg < 700:
            source_recs.append(_expected_parallelism(source_avg, E2E_SOURCE_P))
            sink_recs.append(_expected_parallelism(sink_avg, E2E_SINK_P))
        else:
            source_recs.clear()
            sink_recs.clear()
        if len(sink_recs) >= 60:
            assert out["decision"] == "scale", (minute, out)
            assert _proposed(out) == (max(source_recs), max(sink_recs)), minute
            scaled = True
            break
        _assert_no_scaling(minute, out)
    assert scaled


def test_delayed_scale_down_is_reset_when_another_task_scale_up():
    """Flink ``DelayedScaleDownEndToEndTest.testDelayedScaleDownIsResetWhenAnotherTaskScaleUp``: the
    source scales up (window mean busy > 900) while the sink's scale-down is still held; the held
    scale-down does not join (FLINK-36535), and the scaling clears every delayed scale-down."""
    source_busy = [800, 800, 800, 800, 950]
    sink_busy = [200] * 5
    runs = _e2e_run(source_busy, sink_busy)
    per_minute = [b for b in source_busy for _ in range(10)]
    for minute, out, plan in runs:
        busy_avg = sum(per_minute[minute - 10:minute]) / 10
        if busy_avg > 900:
            assert out["decision"] == "scale", (minute, out)
            assert _proposed(out) == (math.ceil(E2E_SOURCE_P * busy_avg / 1000 / E2E_TARGET), E2E_SINK_P)
            assert _pending_scale_downs(plan) == set()
            break
        _assert_no_scaling(minute, out)
        assert _pending_scale_downs(plan) != set()
    else:
        pytest.fail("the source never scaled up")


def test_delayed_scale_down_is_reset_when_another_task_scale_down():
    """Flink ``DelayedScaleDownEndToEndTest.testDelayedScaleDownIsResetWhenAnotherTaskScaleDown``: the
    source's scale-down (first at minute 10) is due at minute 70 and runs alone (busy 200 -> 50);
    the sink's, first recommended at minute 21, is still held, does not join, and is cleared."""
    source_busy = [200] * 7
    sink_busy = [800, 800, 200, 200, 200, 200, 200]
    runs = _e2e_run(source_busy, sink_busy)
    for minute, out, plan in runs[:-1]:
        _assert_no_scaling(minute, out)
        assert _pending_scale_downs(plan) != set()
    minute, out, plan = runs[-1]
    assert minute == 70 and out["decision"] == "scale"
    assert _proposed(out) == (_expected_from_list(source_busy, E2E_SOURCE_P), E2E_SINK_P) == (50, 1000)
    assert _pending_scale_downs(plan) == set()


@pytest.mark.parametrize("sink_busy", [
    [200, 200, 200, 200, 800], [700, 700, 700, 700, 800], [780, 780, 780, 780, 800], [790, 800], [760, 800],
    [750, 800], [350, 800],
    [200, 200, 200, 200, 850], [700, 700, 700, 700, 850], [780, 780, 780, 780, 850], [790, 850], [760, 850],
    [750, 850], [350, 850],
    [200, 200, 200, 200, 900], [700, 700, 700, 700, 900], [780, 780, 780, 780, 900], [790, 900], [760, 900],
    [750, 900], [350, 900],
])
def test_delayed_scale_down_is_canceled_when_recommended_parallelism_is_greater_or_equal(sink_busy):
    """Flink ``DelayedScaleDownEndToEndTest.testDelayedScaleDownIsCanceledWhenRecommendedParallelismIs
    GreaterOrEqual`` (480M records per minute): the sink's delayed scale-down is dropped as soon as
    its recommendation reaches the current parallelism (window mean busy >= 800); nothing scales."""
    runs = _e2e_run([800] * len(sink_busy), sink_busy, records_per_minute=480_000_000)
    per_minute = [b for b in sink_busy for _ in range(10)]
    for minute, out, plan in runs:
        _assert_no_scaling(minute, out)
        if sum(per_minute[minute - 10:minute]) / 10 >= 800:
            assert _pending_scale_downs(plan) == set()
            break
        assert _pending_scale_downs(plan) == {"sink"}
    else:
        pytest.fail("the sink's busy time never reached 800")


# --------------------------------------------------------------------------------------------------
# ScalingExecutorTest
# --------------------------------------------------------------------------------------------------

MAX_PARALLELISM = 720
EXECUTOR_POLICY = {**flink_defaults(), "scale_down_max_factor": 1.0, "scale_up_max_factor": float(2**31 - 1),
                   "catch_up_duration_s": 0}
"""``ScalingExecutorTest.setup``: max scale-down factor 1, max scale-up factor Integer.MAX_VALUE, catch-up 0."""
AT_S = datetime(2026, 3, 2, 10, 0, 0, tzinfo=timezone.utc).timestamp()   # a Monday, 10:00:00 UTC


def _executor_doc(policy, vertices, edges=(), *, at_s=AT_S):
    """A one-step scenario from Flink ``ScalingExecutorTest.evaluated(parallelism, target,
    trueProcessingRate[, catchUpRate])`` per vertex: ``vertices`` is ``[(id, parallelism, target,
    tpr[, catch_up])]`` (max parallelism 720), ``edges`` ``[(from, to, ship)]``. Every vertex takes
    ``target`` in and out, so each edge carries its downstream vertex's own target data rate; a
    source's catch-up rate is written as a backlog drained in a 1 s catch-up duration (no restart
    rate: restart time 0), so catch-up 0 elsewhere still means no catch-up."""
    policy = {**EXECUTOR_POLICY, **policy}
    metrics, spec = {}, []
    for vid, parallelism, target, tpr, *catch_up in vertices:
        m = {"records_in_per_s": target, "records_out_per_s": target, "true_processing_rate": tpr}
        if catch_up and catch_up[0]:
            m["backlog"] = catch_up[0]
            policy = {**policy, "catch_up_duration_s": 1, "restart_time_s": 0}
        metrics[vid] = m
        spec.append({"id": vid, "parallelism": parallelism, "max_parallelism": MAX_PARALLELISM,
                     "source": not any(e[1] == vid for e in edges)})
    return {"format": 1, "mode": "continuous", "policy": policy, "vertices": spec,
            "edges": [{"from": a, "to": b, "ship": ship} for a, b, ship in edges],
            "steps": [{"at_s": at_s, "metrics": metrics}]}


def _scaling_summary(doc):
    """Flink ``ScalingExecutor.computeScalingSummary``'s keys: the vertices that change when the job
    scales (a vertex outside its utilization bounds), else none."""
    out = steps_of(doc)[0]
    if out["decision"] != "scale":
        return set()
    return {vid for vid, v in out["vertices"].items() if v["proposed"] != v["current"]}


SOURCE_SINK = (("source", "sink", "hash"),)


def test_utilization_boundaries():
    """Flink ``ScalingExecutorTest.testUtilizationBoundaries`` (restart 0, catch-up 0, scale-down
    interval 0): the job scales only when some vertex's true processing rate lies outside the
    thresholds of [utilization.min, utilization.max]; then every changed vertex joins."""
    def summary(band, source, sink):
        return _scaling_summary(_executor_doc(
            {"restart_time_s": 0, "scale_down_interval_s": 0, "utilization_target": 0.6,
             "utilization_min": band[0], "utilization_max": band[1]},
            [("source", 10, *source), ("sink", 10, *sink)], SOURCE_SINK))

    # 0.7 is outside [0.6, 0.6]: the source scales 10 -> 12; the sink's round(60 / 0.6) = 100 keeps 10.
    assert summary((0.6, 0.6), (70, 100), (60, 100)) == {"source"}
    # 0.7 and 0.6 are within [0.4, 0.8].
    assert summary((0.4, 0.8), (70, 100), (60, 100)) == set()
    # 0.85 is outside [0.4, 0.8]: both change.
    assert summary((0.4, 0.8), (70, 100), (85, 100)) == {"source", "sink"}
    assert summary((0.4, 0.8), (70, 100), (70, 100)) == set()
    # Backlog: a catch-up rate of 15 puts the source below round(15 + 70 / 0.8) = 103.
    assert summary((0.4, 0.8), (70, 100, 15), (70, 100)) == {"source", "sink"}


def test_no_scale_down_on_zero_lower_utilization_boundary():
    """Flink ``ScalingExecutorTest.testNoScaleDownOnZeroLowerUtilizationBoundary``: utilization.min 0
    makes the scale-down threshold infinite, so even an infinite true processing rate (p100, target
    1000/s, recommendation 1) is within bounds and nothing scales. (Flink sets utilization.max 1.2,
    which its capacity formula clamps to 1.0 and its validator refuses; 1.0 here.)"""
    doc = _executor_doc({"utilization_target": 0.6, "utilization_max": 1.0, "utilization_min": 0.0},
                        [("vertex", 100, 1000, "inf")])
    out = steps_of(doc)[0]
    vertex = out["vertices"]["vertex"]
    assert vertex["scale_down_threshold"] == "inf" and vertex["outside_bounds"] is False
    assert out["decision"] != "scale" and vertex["proposed"] == 100
    # With the scale-down interval off the vertex would go to 1 if it counted as outside its bounds.
    out = steps_of(_executor_doc({"utilization_target": 0.6, "utilization_max": 1.0, "utilization_min": 0.0,
                                  "scale_down_interval_s": 0}, [("vertex", 100, 1000, "inf")]))[0]
    assert out["decision"] == "no-change" and out["vertices"]["vertex"]["proposed"] == 100


def test_utilization_boundaries_and_utilization_min_max_compatibility():
    """Flink ``ScalingExecutorTest.testUtilizationBoundariesAndUtilizationMinMaxCompatibility`` (restart
    0, catch-up 0, scale-down interval 0). The deprecated ``target.utilization.boundary`` is not
    modelled; each case gives the band Flink derives from it explicitly (target ± boundary, and
    utilization.min / .max prevail when set)."""
    def summary(target, band, source, sink):
        return _scaling_summary(_executor_doc(
            {"restart_time_s": 0, "scale_down_interval_s": 0, "utilization_target": target,
             "utilization_min": band[0], "utilization_max": band[1]},
            [("source", 10, *source), ("sink", 10, *sink)], SOURCE_SINK))

    # target 0.6, boundary 0.1 -> [0.5, 0.7]; and the same band given as min / max.
    assert summary(0.6, (0.5, 0.7), (70, 100), (85, 100)) == {"source", "sink"}
    # boundary 1 with min 0.3 / max 0.7 set: min / max prevail.
    assert summary(0.6, (0.3, 0.7), (60, 100), (85, 100)) == {"sink"}
    # target 0.5, boundary 1, max 0.6: min = max(0, 0.5 - 1) = 0.
    assert summary(0.5, (0.0, 0.6), (100, 99999), (80, 99999)) == set()
    assert summary(0.5, (0.0, 0.6), (50, 100), (85, 100)) == {"sink"}
    # target 0.5, boundary 1, min 0.3: max = min(1, 0.5 + 1) = 1.
    assert summary(0.5, (0.3, 1.0), (80, 81), (100, 101)) == set()
    assert summary(0.5, (0.3, 1.0), (80, 79), (100, 101)) == {"source", "sink"}


def test_vertexes_exclusion_for_scaling():
    """Flink ``ScalingExecutorTest.testVertexesExclusionForScaling``: the filter (busy 0.3 at target
    0.8) is the only vertex outside its bounds; listed in ``vertex.exclude.ids`` it is ignored and
    the job does not scale; unlisted it scales 10 -> 4."""
    def doc(excluded):
        return _executor_doc({"scale_down_interval_s": 0, "utilization_target": 0.8, "excluded_vertices": excluded},
                             [("source", 10, 80, 100), ("filter", 10, 30, 100), ("sink", 10, 80, 100)],
                             (("source", "filter", "hash"), ("filter", "sink", "hash")))

    excluded = steps_of(doc(["filter"]))[0]
    assert excluded["decision"] != "scale"
    assert all(v["proposed"] == v["current"] for v in excluded["vertices"].values())
    included = steps_of(doc([]))[0]
    assert included["decision"] == "scale" and included["vertices"]["filter"]["proposed"] == 4
    assert _scaling_summary(doc([])) == {"filter"}


def test_excluded_periods_for_scaling():
    """Flink ``ScalingExecutorTest.testExcludedPeriodsForScaling``: a scale-up (both vertices at TPR
    100 for a target of 110) is not executed inside the daily window ``now-(now + 300 s)``, and is
    outside ``(now + 100 s)-(now + 300 s)``."""
    def doc(period):
        return _executor_doc({"excluded_periods": [period]}, [("source", 10, 110, 100), ("sink", 10, 110, 100)],
                             SOURCE_SINK)

    inside = steps_of(doc("10:00:00-10:05:00"))[0]
    assert inside["decision"] == "blocked"
    assert all(v["proposed"] == v["current"] for v in inside["vertices"].values())
    assert {"code": "excluded-period", "vertex_id": None, "data": {"period": "10:00:00-10:05:00"},
            "text": "excluded period '10:00:00-10:05:00': the plan is computed but not executable"} in inside["reasons"]
    outside = steps_of(doc("10:01:40-10:05:00"))[0]
    assert outside["decision"] == "scale"
    assert all(v["proposed"] > v["current"] for v in outside["vertices"].values())


def test_scaling_events():
    """Flink ``ScalingExecutorTest.testScalingEvents`` (run by ``testScalingEventsWith0IntervalConfig``,
    ``...WithIntervalConfig`` and ``...WithDefaultIntervalConfig``), its model part: the scaling
    summary entry of a vertex at p1, TPR 100, target 110 is ``1 -> 2``, expected rate 200, target
    110. The events, their interval and ``scaling.enabled`` are not modelled."""
    out = steps_of(_executor_doc({}, [("vertex", 1, 110, 100)]))[0]
    vertex = out["vertices"]["vertex"]
    assert out["decision"] == "scale"
    assert (vertex["current"], vertex["proposed"], vertex["true_processing_rate"], vertex["expected_processing_rate"],
            vertex["target_data_rate"]) == (1, 2, 100.0, 200.0, 110.0)
    # The second evaluation (TPR 101) scales the same way.
    assert steps_of(_executor_doc({}, [("vertex", 1, 110, 101)]))[0]["vertices"]["vertex"]["proposed"] == 2


def test_adjust_by_max_parallelism():
    """Flink ``ScalingExecutorTest.testAdjustByMaxParallelism``: source -> (rebalance) filter -> (hash)
    sink, p2, max parallelism 720, target utilization 1, TPR 20 for a target of 70: each computes 7;
    only the keyed sink is aligned to the key groups (balanced: 720 // 8 < 720 // 7 -> 8)."""
    out = steps_of(_executor_doc({"utilization_target": 1.0},
                                 [("source", 2, 70, 20), ("filter", 2, 70, 20), ("sink", 2, 70, 20)],
                                 (("source", "filter", "rebalance"), ("filter", "sink", "hash"))))[0]
    assert out["decision"] == "scale"
    assert {vid: v["proposed"] for vid, v in out["vertices"].items()} == {"source": 7, "filter": 7, "sink": 8}


# --------------------------------------------------------------------------------------------------
# alignment.AlignmentModeTest
# --------------------------------------------------------------------------------------------------


def _aligned(current, target, *, partitions=0, max_parallelism=128, lower=1, upper=None, ship="hash", **policy):
    """Flink ``AlignmentModeTest.ctx(current, newParallelism, numSourcePartitions, maxParallelism[,
    parallelismLowerLimit, parallelismUpperLimit, inputShipStrategies])`` as a scenario, returning
    the proposed parallelism: with ``partitions`` a source with that many partitions, else a vertex
    behind a ``ship`` edge; metrics that compute exactly ``target`` (utilization target 1, TPR
    ``current`` × 1000 for a target rate of ``target`` × 1000); the limits are
    ``vertex_min_parallelism`` / ``vertex_max_parallelism`` (Flink's ``Integer.MAX_VALUE`` upper
    limit: the largest ours, 32768)."""
    rate, tpr = target * 1000, current * 1000
    policy = {"utilization_target": 1.0, "catch_up_duration_s": 0, "restart_time_s": 0,
              "scale_up_max_factor": 1000.0, "vertex_min_parallelism": lower,
              "vertex_max_parallelism": 32768 if upper is None else upper, **policy}
    vertex = {"id": "v", "parallelism": current, "max_parallelism": max_parallelism}
    metrics = {"v": {"records_in_per_s": rate, "records_out_per_s": rate, "true_processing_rate": tpr}}
    if partitions:
        vertices, edges = [{**vertex, "partitions": partitions, "source": True}], []
    else:
        vertices = [{"id": "up", "parallelism": 1, "source": True}, vertex]
        edges = [{"from": "up", "to": "v", "ship": ship}]
        metrics["up"] = {"records_in_per_s": rate, "records_out_per_s": rate, "true_processing_rate": 1e12}
    doc = {"format": 1, "mode": "continuous", "policy": policy, "vertices": vertices, "edges": edges,
           "steps": [{"at_s": 0, "metrics": metrics}]}
    out = steps_of(doc)[0]
    assert out["decision"] == "scale" or out["vertices"]["v"]["proposed"] == current, out
    return out["vertices"]["v"]["proposed"]


def test_balanced_reduces_load_and_never_emits():
    """Flink ``AlignmentModeTest.balancedReducesLoadAndNeverEmits``: N=128, 16 -> 24: BALANCED accepts
    26 (128 // 26 = 4 < 128 // 24 = 5), EVENLY_SPREAD snaps to 32."""
    assert _aligned(16, 24, alignment="balanced") == 26
    assert _aligned(16, 24, alignment="evenly_spread") == 32
    assert _aligned(16, 24) == 26   # unset: balanced


def test_off_returns_computed_target():
    """Flink ``AlignmentModeTest.offReturnsComputedTarget``."""
    assert _aligned(16, 24, alignment="off") == 24


def test_built_in_modes_fall_back_to_target_instead_of_blocking():
    """Flink ``AlignmentModeTest.builtInModesFallBackToTargetInsteadOfBlocking``: 22 -> 25 on 35
    source partitions, limits [20, 30]: no aligned value in [25, 30]; the built-in modes keep 25."""
    for mode in ("evenly_spread", "balanced"):
        assert _aligned(22, 25, partitions=35, lower=20, upper=30, alignment=mode) == 25


def test_built_in_modes_search_one_region_and_do_not_relax_below_target():
    """Flink ``AlignmentModeTest.builtInModesSearchOneRegionAndDoNotRelaxBelowTarget``: 12 partitions,
    5 -> 7 with the region capped at 8 (max parallelism): no divisor in [7, 8]; the built-in mode
    keeps 7, the legacy mode relaxes below the target to the divisor 6."""
    assert _aligned(5, 7, partitions=12, max_parallelism=8, alignment="evenly_spread") == 7
    assert _aligned(5, 7, partitions=12, max_parallelism=8, key_group_partitions_adjust_mode="evenly_spread") == 6


def test_legacy_modes_block_and_emit():
    """Flink ``AlignmentModeTest.legacyModesBlockAndEmit``: the case above under the deprecated
    ``scaling.key-group.partitions.adjust.mode`` keeps the current 22 (the fallback 20 would reverse
    the scale-up); Flink's ``SCALING_LIMITED`` event is the vertex's note here."""
    assert _aligned(22, 25, partitions=35, lower=20, upper=30, key_group_partitions_adjust_mode="evenly_spread") == 22
    policy = {"utilization_target": 1.0, "catch_up_duration_s": 0, "restart_time_s": 0, "vertex_min_parallelism": 20,
              "vertex_max_parallelism": 30, "key_group_partitions_adjust_mode": "evenly_spread"}
    out = steps_of({"format": 1, "policy": policy,
                    "vertices": [{"id": "v", "parallelism": 22, "max_parallelism": 128, "partitions": 35,
                                  "source": True}],
                    "steps": [{"metrics": {"v": {"records_in_per_s": 25000, "true_processing_rate": 22000}}}]})[0]
    assert out["vertices"]["v"]["reason"]["code"] == "alignment-blocked" and out["decision"] != "scale"


def test_modes_do_not_apply_to_non_source_non_hash_vertices():
    """Flink ``AlignmentModeTest.modesDoNotApplyToNonSourceNonHashVertices``: a vertex behind a
    rebalance edge is not aligned; a keyBy (hash) vertex is."""
    for mode in ("balanced", "evenly_spread", "off"):
        assert _aligned(16, 24, ship="rebalance", alignment=mode) == 24
        assert _aligned(16, 24, ship="forward", alignment=mode) == 24
    assert _aligned(16, 24, ship="hash", alignment="balanced") == 26


def test_resolve_selects_built_in_by_name():
    """Flink ``AlignmentModeTest.resolveSelectsBuiltInByName`` (``ParallelismAligner.resolve``): Flink's
    value is the enum name ``EVENLY_SPREAD``; the scenario's lower-case name means the same."""
    from scaling.policy.policy import Policy

    assert Policy(alignment="EVENLY_SPREAD").alignment_mode == ("evenly_spread", False)
    assert Policy(alignment="evenly_spread").alignment_mode == ("evenly_spread", False)
    assert _aligned(16, 24, alignment="EVENLY_SPREAD") == 32
    assert _aligned(16, 24, alignment="OFF") == 24


def test_resolve_defaults_to_balanced():
    """Flink ``AlignmentModeTest.resolveDefaultsToBalanced``."""
    from scaling.policy.policy import Policy

    assert Policy().alignment_mode == ("balanced", False)
    assert _aligned(16, 24) == 26


def test_resolve_honors_deprecated_key():
    """Flink ``AlignmentModeTest.resolveHonorsDeprecatedKey``: with only the deprecated key set, its
    mode applies with the legacy behaviour; 16 -> 24 on 128 key groups under MAXIMIZE_UTILISATION
    takes the first load-reducing value, 26."""
    from scaling.policy.policy import Policy

    assert Policy(key_group_partitions_adjust_mode="MAXIMIZE_UTILISATION").alignment_mode == \
        ("maximize_utilisation", True)
    assert _aligned(16, 24, key_group_partitions_adjust_mode="maximize_utilisation") == 26


def test_new_key_takes_precedence_over_deprecated_key():
    """Flink ``AlignmentModeTest.newKeyTakesPrecedenceOverDeprecatedKey``: OFF with the deprecated
    EVENLY_SPREAD also set is OFF."""
    from scaling.policy.policy import Policy

    assert Policy(alignment="OFF", key_group_partitions_adjust_mode="EVENLY_SPREAD").alignment_mode == ("off", False)
    assert _aligned(16, 24, alignment="off", key_group_partitions_adjust_mode="evenly_spread") == 24


# --------------------------------------------------------------------------------------------------
# utils.CalendarUtilsTest
# --------------------------------------------------------------------------------------------------

def _valid(periods):
    """Flink ``CalendarUtils.validateExcludedPeriods(conf).isEmpty()`` through the scenario parser:
    an invalid ``excluded.periods`` is exit 2 with ``policy.excluded_periods`` named."""
    doc = _executor_doc({"excluded_periods": periods}, [("vertex", 1, 110, 100)])
    try:
        evaluate_text(json.dumps(doc))
    except ScenarioError as exc:
        assert str(exc).startswith("policy.excluded_periods: "), exc
        return False
    return True


@pytest.mark.parametrize(("periods", "valid"), [
    (["09:13:17-08:15:18"], False),
    (["09:13:17-25:15:18"], False),
    (["09:13:17-11:15:18", "18:01:20-16:00:00"], False),
    (["09:13:17-11:15:18 && 12:01:20-16:00:00"], False),
    (["09:13:17-11:15:18", "14:01:20-16:00:00"], True),
    (["* * * ? * 2,5555"], False),
    (["* * * ? * 2,5 && 18:01:20-16:00:00"], False),
    (["* * * ? * 2,5 && * * 11-13 * * ?"], False),
    (["* * * ? * 2,5 && 14:01:20-16:00:00"], True),
    # Quartz ``CronExpression``: '?' in exactly one of day-of-month and day-of-week.
    (["* * * * * *"], False),
    (["* * * ? * ?"], False),
    (["0 0 9 ? * MON"], True),
])
def test_validate_excluded_periods(periods, valid):
    """Flink ``CalendarUtilsTest.testValidateExcludedPeriods`` (the last three cases are Quartz's own
    rule that Flink's ``interpretAsCron`` inherits)."""
    assert _valid(periods) is valid


THURSDAY = datetime(2023, 12, 14, 14, 1, 30, tzinfo=timezone.utc).timestamp()   # "2023-12-04 is Thursday" (sic)


@pytest.mark.parametrize(("periods", "at_s", "excluded"), [
    (["09:13:17-11:15:18", "14:01:20-16:00:00"], THURSDAY, True),
    (["09:13:17-11:15:18", "14:01:20-16:00:00"], THURSDAY - 20, False),
    (["09:13:17-11:15:18", "14:01:20-16:00:00"], THURSDAY - 4 * 3600, True),
    (["* * 14-16 * * ?"], THURSDAY, True),
    (["* * 14-16 * * ?"], THURSDAY - 100, False),
    (["* * * ? * 2,5 && 14:01:20-16:00:00"], THURSDAY, True),              # Monday and Thursday
    (["* * * ? * 2,5 && 14:01:20-16:00:00"], THURSDAY - 86400, False),     # Wednesday
    (["* * * ? * 2,5 && 14:01:20-16:00:00"], THURSDAY - 3 * 86400, True),  # Monday
])
def test_excluded_periods(periods, at_s, excluded):
    """Flink ``CalendarUtilsTest.testExcludedPeriods`` (Flink uses the JVM's zone; the scenario's
    times are UTC): inside an excluded period the scale-up is computed but blocked."""
    out = steps_of(_executor_doc({"excluded_periods": periods}, [("vertex", 1, 110, 100)], at_s=at_s))[0]
    assert out["vertices"]["vertex"]["proposed"] == (1 if excluded else 2)
    assert out["decision"] == ("blocked" if excluded else "scale")


def test_excluded_periods_daily_window_includes_its_end():
    """Not a Flink test: Quartz ``DailyCalendar.isTimeIncluded`` (Flink ``CalendarUtils.interpretAsDaily``
    sets ``invertTimeRange``) includes both ends: at exactly 16:00:00 '14:01:20-16:00:00' holds."""
    end = datetime(2023, 12, 14, 16, 0, 0, tzinfo=timezone.utc).timestamp()
    out = steps_of(_executor_doc({"excluded_periods": ["14:01:20-16:00:00"]}, [("vertex", 1, 110, 100)], at_s=end))[0]
    assert out["decision"] == "blocked"


# --------------------------------------------------------------------------------------------------
# DelayedScaleDownTest
# --------------------------------------------------------------------------------------------------


def _window_max(info, window_start):
    """``getMaxRecommendedParallelism(windowStart)`` as Flink's ``RecommendedParallelism(triggerTime,
    parallelism, outsideUtilizationBound)``: the first kept recommendation at or after the window start,
    checked against ``PendingScaleDown.max_in_window``."""
    first = next(r for r in info.recommendations if r[0] >= window_start)
    assert info.max_in_window(window_start) == (first[1], first[2])
    return first


def test_wrong_window_start_time():
    """Flink ``DelayedScaleDownTest.testWrongWindowStartTime``."""
    info = PendingScaleDown("v", 0.0, ()).record(0, 5, True)
    assert info.first_at_s == 0 and _window_max(info, 0) == (0, 5, True)
    with pytest.raises(ValueError):
        info.max_in_window(1)


def test_max_recommended_parallelism_for_initial_window():
    """Flink ``DelayedScaleDownTest.testMaxRecommendedParallelismForInitialWindow``."""
    info = PendingScaleDown("v", 0.0, ())
    for at, parallelism, outside in ((0, 5, True), (1, 9, False), (2, 4, True), (3, 5, True), (4, 6, True)):
        info = info.record(at, parallelism, outside)
    assert info.first_at_s == 0
    assert _window_max(info, 0) == (1, 9, False)   # [5, 9, 4, 5, 6] -> 9
    assert _window_max(info, 1) == (1, 9, False)   # 5, [9, 4, 5, 6] -> 9
    assert _window_max(info, 2) == (4, 6, True)    # 5, 9, [4, 5, 6] -> 6
    assert _window_max(info, 3) == (4, 6, True)
    assert _window_max(info, 4) == (4, 6, True)


def test_max_recommended_parallelism_for_sliding_window():
    """Flink ``DelayedScaleDownTest.testMaxRecommendedParallelismForSlidingWindow``: each new
    recommendation, then the window max."""
    info = PendingScaleDown("v", 0.0, ())
    for at, parallelism, outside, window_start, expected in (
            (0, 5, True, 0, (0, 5, True)),      # [5] -> 5
            (1, 8, False, 0, (1, 8, False)),    # [5, 8] -> 8
            (2, 6, True, 0, (1, 8, False)),     # [5, 8, 6] -> 8
            (3, 4, True, 0, (1, 8, False)),     # [5, 8, 6, 4] -> 8
            (4, 3, True, 1, (1, 8, False)),     # 5, [8, 6, 4, 3] -> 8
            (5, 3, True, 2, (2, 6, True)),      # 5, 8, [6, 4, 3, 3] -> 6
            (6, 3, True, 3, (3, 4, True))):     # 5, 8, 6, [4, 3, 3, 3] -> 4
        info = info.record(at, parallelism, outside)
        assert info.first_at_s == 0 and _window_max(info, window_start) == expected
    # The latest of equal recommendations keeps its own time.
    info = info.record(7, 3, True)
    for window_start in range(4, 8):
        assert _window_max(info, window_start) == (7, 3, True)
    info = info.record(9, 9, False)   # 5, 8, 6, 4, 3, 3, 3, [3, 9] -> 9
    assert _window_max(info, 7) == (9, 9, False)


def test_trigger_update_and_clean():
    """Flink ``DelayedScaleDownTest.testTriggerUpdateAndClean``: the first trigger time stays; a higher
    recommendation replaces the lower ones; clearing the vertex (its recommendation reaches the current
    parallelism) or every vertex (a rescale) starts over with a new first trigger time. Driven through
    a scenario: one vertex at p10, TPR 100, utilization target 1, target rate 10 × the recommendation,
    scale-down interval 60 s."""
    def step(at_s, recommendation):
        rate = 10 * recommendation
        return {"at_s": at_s, "metrics": {"v": {"records_in_per_s": rate, "records_out_per_s": rate,
                                                "true_processing_rate": 100}}}

    doc = {"format": 1, "policy": {**EXECUTOR_POLICY, "utilization_target": 1.0, "scale_down_interval_s": 60},
           "vertices": [{"id": "v", "parallelism": 10, "source": True}],
           "steps": [step(0, 5), step(5, 3), step(10, 8), step(12, 10), step(15, 4)]}
    scenario = parse(json.dumps(doc))
    states = [plan.next_state.pending("v") for _, plan in run_scenario(scenario)]
    assert (states[0].first_at_s, _window_max(states[0], 0)) == (0, (0, 5, True))
    assert (states[1].first_at_s, _window_max(states[1], 0)) == (0, (0, 5, True))    # lower: no update
    # higher: updates (within the band: round(80 / 0.7) = 114 > TPR 100, so not outside it)
    assert (states[2].first_at_s, _window_max(states[2], 0)) == (0, (10, 8, False))
    assert states[3] is None                                                        # clearVertex
    assert (states[4].first_at_s, _window_max(states[4], 0)) == (15, (15, 4, True))  # re-triggered
    # clearAll: applying a rescale drops every delayed scale-down.
    state = ScalerState(pending_scale_downs=(states[4], PendingScaleDown("w", 1.0, ()).record(1, 2)))
    cleared = state.with_records(())
    assert cleared.pending_scale_downs == ()
    retriggered = (cleared.pending("v") or PendingScaleDown("v", 16.0, ())).record(16, 2, True)
    assert (retriggered.first_at_s, _window_max(retriggered, 0)) == (16, (16, 2, True))
