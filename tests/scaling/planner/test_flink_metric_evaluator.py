"""Flink's metric-evaluation tests, ported to our model.

Each test is named after a test of Apache Flink's autoscaler (flink-kubernetes-operator, module
flink-autoscaler, ``src/test/java/org/apache/flink/autoscaler/``) and drives the same case through a
scenario evaluated by ``scaling.scenario.format.evaluate_text``, the path of ``python -m scaling evaluate``,
or through the public ``scaling`` functions where the scenario format cannot express it.

A scenario gives the window's averages (records/s, busy ms/s) where Flink collects cumulative
counters and takes ``getRate`` over the window, so each port feeds Flink's window rates directly:
e.g. ``LAG`` 950 -> 1000 over 1 s is ``backlog`` 1000 with ``backlog_growth_per_s`` 50.

Not ported (we do not model them): custom evaluator plugins (``testEvaluateWithCustomEvaluator``,
``testEvaluatorPluginContextExtendsCanonicalContext``, ``testRunCustomEvaluator``,
``testMergeEvaluatedMetricsMaps``, ``testMergeEvaluatedScalingMetric``,
``testGetCustomEvaluatorIfRequired``); the observed true processing rate from backpressure during
catch-up (``testObservedTprEvaluation``, ``testMissingBusyTimeTpr``,
``ScalingMetricsTest.testComputeTprWithBackpressure`` / ``computeObservedTpr``); heap, GC and slot
metrics (``testGlobalMetricEvaluation``, ``ScalingMetricsTest.testGlobalMetrics``); Flink's
counter-to-rate conversion and gauge-vs-counter choice (``getRateTest``, ``computeTprInputRateTest``,
``ScalingMetricsTest.testProcessingAndOutputMetrics``); legacy sources without busy time
(``ScalingMetricsTest.testLegacySourceScaling``); the stabilization interval and the operator's event
and restart-time bookkeeping (``BacklogBasedScalingTest.testNoEvaluationDuringStabilization``).
"""

import json

import pytest

from scaling.planner.ds2 import edge_output_ratio, propagate_target_rates
from scaling.policy.policy import Policy
from scaling.scenario.format import evaluate_text
from scaling.scenario.values import ScenarioError
from scaling.values.metrics import MetricWindow, VertexMeasurement, VertexMetrics
from scaling.values.topology import Edge, Topology, Vertex
from tests.scaling.factories import steps_of


def scenario(policy, vertices, steps, edges=()):
    return {"format": 1, "mode": "continuous", "policy": {"alignment": "off", **policy},
            "vertices": vertices, "edges": list(edges), "steps": steps}


def step(at_s, metrics, **extra):
    return {"at_s": at_s, "metrics": metrics, **extra}


SOURCE_SINK = [{"id": "source", "parallelism": 1, "max_parallelism": 1, "source": True},
               {"id": "sink", "parallelism": 1, "max_parallelism": 1}]
REBALANCE = [{"from": "source", "to": "sink", "ship": "rebalance"}]


# --- ScalingMetricEvaluatorTest ---------------------------------------------------------------------

def test_lag_based_source_scaling():
    """``ScalingMetricEvaluatorTest.testLagBasedSourceScaling``: lag 950 -> 1000 and records in
    0 -> 100 over 1 s give the source a target of 100 + 50 = 150/s; output ratio 2 gives the sink
    300/s. The catch-up rate is lag / catch-up duration, times the output ratio downstream; the
    restart time does not change the evaluated rates; catch-up 0 turns lag-based scaling off."""
    metrics = {"source": {"records_in_per_s": 100, "records_out_per_s": 200, "busy_time_ms_per_s": 700,
                          "backlog": 1000, "backlog_growth_per_s": 50},
               "sink": {"records_in_per_s": 200, "busy_time_ms_per_s": 350}}

    def evaluated(**policy):
        out = steps_of(scenario(policy, SOURCE_SINK, [step(2, metrics)], REBALANCE))[0]["vertices"]
        return {vid: (v["target_data_rate"], v["catch_up_data_rate"]) for vid, v in out.items()}, out

    rates, out = evaluated(catch_up_duration_s=2)
    assert (out["source"]["utilization"], out["sink"]["utilization"]) == (0.7, 0.35)   # LOAD avg(.8, .6), avg(.4, .3)
    assert rates == {"source": (150, 500), "sink": (300, 1000)}
    assert evaluated(catch_up_duration_s=1)[0] == {"source": (150, 1000), "sink": (300, 2000)}
    assert evaluated(catch_up_duration_s=1, restart_time_s=2)[0] == {"source": (150, 1000), "sink": (300, 2000)}
    assert evaluated(catch_up_duration_s=0)[0] == {"source": (150, 0), "sink": (300, 0)}

    # 0 lag: lag 0 -> 0, records in 100 -> 200 over 1 s, catch-up 1 min.
    no_lag = {"source": {"records_in_per_s": 100, "records_out_per_s": 200, "busy_time_ms_per_s": 600,
                         "backlog": 0, "backlog_growth_per_s": 0},
              "sink": {"records_in_per_s": 200, "busy_time_ms_per_s": 300}}
    out = steps_of(scenario({"catch_up_duration_s": 60}, SOURCE_SINK, [step(4, no_lag)], REBALANCE))[0]["vertices"]
    assert (out["source"]["target_data_rate"], out["sink"]["target_data_rate"]) == (100, 200)

    # The same rates from the public function, without the scenario path.
    topology = Topology((Vertex("source", source=True), Vertex("sink")), (Edge("source", "sink", "rebalance"),))
    typed = {"source": VertexMetrics(100, 200, 700, backlog=1000, backlog_growth_per_s=50),
             "sink": VertexMetrics(200, None, 350)}
    rates = propagate_target_rates(topology, typed, Policy(catch_up_duration_s=2, restart_time_s=2))
    assert (rates["source"].target_data_rate, rates["source"].catch_up_data_rate) == (150, 500)
    assert (rates["sink"].target_data_rate, rates["sink"].catch_up_data_rate) == (300, 1000)
    assert rates["sink"].restart_data_rate == 300   # target × restart / catch-up, used only in the capacity


def _thresholds(target_rate, catch_up_rate, policy, catching_up=False, measured_restart_times_s=()):
    """Flink ``ScalingMetricEvaluatorTest.getThresholds``: the (scale-up, scale-down) thresholds of a
    vertex with this target and catch-up rate. The catch-up rate comes from a backlog of
    ``catch_up_rate × catch_up_duration_s``; ``catching_up`` (Flink's ``processingBacklog``) is set by
    a second source whose lag is far above ``backlog_lag_threshold_s``."""
    catch_up_s = policy.get("catch_up_duration_s", 1800)
    backlog = catch_up_rate * catch_up_s if catch_up_rate else 0
    assert catch_up_rate == 0 or catch_up_s > 0
    vertices = [{"id": "v", "parallelism": 1, "source": True}]
    metrics = {"v": {"records_in_per_s": target_rate, "busy_time_ms_per_s": 500, "backlog": backlog}}
    if catching_up:
        vertices.append({"id": "lagging", "parallelism": 1, "source": True})
        metrics["lagging"] = {"records_in_per_s": 1, "busy_time_ms_per_s": 500, "backlog": 10**7}
    steps = [step(i, metrics, measured_restart_time_s=t) for i, t in enumerate(measured_restart_times_s)]
    out = steps_of(scenario(policy, vertices, steps or [step(0, metrics)]))[-1]["vertices"]["v"]
    up, down = out["scale_up_threshold"], out["scale_down_threshold"]
    return up, float("inf") if down == "inf" else down


def test_utilization_boundary_computation():
    """``ScalingMetricEvaluatorTest.testUtilizationBoundaryComputation``: target 0.8 in [0.7, 0.9],
    restart 1 s. Scale-up: round(catch-up + target / 0.9); scale-down: round(catch-up + target ×
    restart / catch-up duration + target / 0.7); while catching up the band is [0, 1] (no
    scale-down: infinity)."""
    policy = {"utilization_target": 0.8, "utilization_max": 0.9, "utilization_min": 0.7, "restart_time_s": 1,
              "catch_up_duration_s": 0}
    assert _thresholds(700, 0, policy) == (778, 1000)   # restart time does not factor in
    policy["catch_up_duration_s"] = 2
    assert _thresholds(700, 350, policy) == (1128, 1700)
    assert _thresholds(700, 0, policy) == (778, 1350)
    assert _thresholds(700, 350, policy, catching_up=True) == (1050, float("inf"))
    assert _thresholds(700, 0, policy, catching_up=True) == (700, float("inf"))


def test_utilization_boundary_computation_with_restart_times_tracking():
    """``ScalingMetricEvaluatorTest.testUtilizationBoundaryComputationWithRestartTimesTracking``:
    configured restart 10 min, tracked restarts of 3 and 5 min: the maximum tracked, 5 min, is used
    (``ScalingTracking.getMaxRestartTimeOrDefault``, capped at the 15 min limit)."""
    policy = {"utilization_target": 0.8, "utilization_max": 0.9, "utilization_min": 0.7, "restart_time_s": 600,
              "catch_up_duration_s": 0, "restart_time_tracking_enabled": True}
    tracked = {"measured_restart_times_s": (180, 300)}
    assert _thresholds(700, 0, policy, **tracked) == (778, 1000)   # restart time does not factor in
    policy["catch_up_duration_s"] = 60
    assert _thresholds(700, 350, policy, **tracked) == (1128, 4850)   # 350 + 700 × 300 / 60 + 1000
    assert _thresholds(700, 0, policy, **tracked) == (778, 4500)
    assert _thresholds(700, 350, policy, catching_up=True, **tracked) == (1050, float("inf"))
    assert _thresholds(700, 0, policy, catching_up=True, **tracked) == (700, float("inf"))
    # A tracked restart above ``restart.time-tracking.limit`` (15 min) is capped at it: 350 + 700 × 900 / 60 + 1000.
    assert _thresholds(700, 350, policy, measured_restart_times_s=(180, 1200)) == (1128, 11850)
    # Without tracking the configured 10 min apply: 350 + 700 × 600 / 60 + 1000.
    assert _thresholds(700, 350, {**policy, "restart_time_tracking_enabled": False}, **tracked) == (1128, 8350)


def test_backlog_processing_evaluation():
    """``ScalingMetricEvaluatorTest.testBacklogProcessingEvaluation``: the job processes backlog when
    a source's lag / input rate exceeds ``backlog-processing.lag-threshold`` (5 min); then the
    scale-down threshold is infinite. No lag or a missing lag: no backlog."""

    def backlog_mode(source_metrics):
        metrics = {"source": {"busy_time_ms_per_s": 500, **source_metrics},
                   "sink": {"records_in_per_s": source_metrics["records_in_per_s"], "busy_time_ms_per_s": 500}}
        out = steps_of(scenario({}, SOURCE_SINK, [step(1, metrics)], REBALANCE))[0]
        return out["vertices"]["source"]["scale_down_threshold"] == "inf"

    assert not backlog_mode({"records_in_per_s": 100, "backlog": 0})
    assert not backlog_mode({"records_in_per_s": 100})   # missing lag
    assert backlog_mode({"records_in_per_s": 200, "backlog": 250 * 300})       # 375 s of lag at 200/s
    assert not backlog_mode({"records_in_per_s": 200, "backlog": 180 * 300})   # 270 s


def _tpr(records_in, busy):
    metrics = {"source": {"records_in_per_s": records_in, "busy_time_ms_per_s": busy}}
    out = steps_of(scenario({}, SOURCE_SINK[:1], [step(0, metrics)]))[0]["vertices"]["source"]
    return float("inf") if out["true_processing_rate"] == "inf" else out["true_processing_rate"]


def test_missing_observed_tpr():
    """``ScalingMetricEvaluatorTest.testMissingObservedTpr``: without observed TPR the busy-time TPR
    is used, even when infinite: 35/s at 100 ms/s busy -> 350; no busy time or no input -> infinity.
    (Flink's NaN inputs give NaN; a scenario refuses NaN, exit 2.)"""
    assert _tpr(35, 100) == 350
    assert _tpr(100, 0) == float("inf")
    assert _tpr(0, 0) == float("inf")


def test_zero_values_for_rates_or_busyness():
    """``ScalingMetricEvaluatorTest.testZeroValuesForRatesOrBusyness``: busy 0 or input 0 gives an
    infinite TPR ("Nothing is coming in, we assume infinite processing power"); such a vertex has
    scale factor 0 and scales down by at most ``scale_down_max_factor`` (p10 -> 4)."""
    assert _tpr(0, 0) == _tpr(1, 0) == _tpr(0, 1) == float("inf")
    vertices = [{"id": "source", "parallelism": 10, "source": True}]
    metrics = {"source": {"records_in_per_s": 0, "busy_time_ms_per_s": 1}}
    out = steps_of(scenario({"scale_down_interval_s": 0}, vertices, [step(0, metrics)]))[0]["vertices"]["source"]
    assert out["proposed"] == 4


def test_busy_time_evaluation():
    """``ScalingMetricEvaluatorTest.testBusyTimeEvaluation``. MAX (Flink's default aggregator): the
    busy time is the window average of the busiest subtask's (LOAD 0.2, 0.3, 0.4 -> 300 ms/s, whatever
    the parallelism); a scenario gives that average as ``busy_time_max_ms_per_s`` and the true
    processing rate uses it. AVG: the accumulated busy time 10,000 -> 10,400 ms over 2 s is 200 ms/s
    for the vertex, divided by the parallelism: 100 ms/s at p2, 200 at p1."""
    vertices = [{"id": "source", "parallelism": 2, "source": True}]
    metrics = {"source": {"records_in_per_s": 300, "busy_time_ms_per_s": 100, "busy_time_max_ms_per_s": 300}}
    out = steps_of(scenario({}, vertices, [step(0, metrics)]))[0]["vertices"]["source"]
    assert out["true_processing_rate"] == 1000   # 300 / 0.3 (MAX), not 300 / 0.1 (AVG)
    for tasks, expected in ((2, 100), (1, 200)):
        rows = [{"v": VertexMeasurement(span_s=1, tasks=tasks, busy_s=0.2, records_in=100, records_out=100)}
                for _ in range(2)]
        assert MetricWindow.from_measurements(rows).aggregate()["v"].busy_time_ms_per_s == pytest.approx(expected)


def _four_vertices(op_edges):
    return [{"id": "source1", "parallelism": 1, "source": True}, {"id": "source2", "parallelism": 1, "source": True},
            *({"id": op, "parallelism": 1} for op in op_edges)], [
        {"from": src, "to": op, "ship": "rebalance"} for op, sources in op_edges.items() for src in sources]


def test_computable_output_ratios():
    """``ScalingMetricEvaluatorTest.testComputableOutputRatios``: sources in 100/s each, out 200/s and
    50/s, op1 in 250/s, sink1 in 50/s. source1 -> op1 = (250 − 50) / 100 = 2 (the other input has one
    output, so its output is subtracted), source2 -> op1 = (250 − 200) / 100 = 0.5, op1 -> sink1 =
    50 / 250 = 0.2. Targets: op1 100 × 2 + 100 × 0.5 = 250, sink1 50."""
    vertices, edges = _four_vertices({"op1": ("source1", "source2"), "sink1": ("op1",)})
    metrics = {"source1": {"records_in_per_s": 100, "records_out_per_s": 200, "busy_time_ms_per_s": 500},
               "source2": {"records_in_per_s": 100, "records_out_per_s": 50, "busy_time_ms_per_s": 500},
               "op1": {"records_in_per_s": 250, "records_out_per_s": 50, "busy_time_ms_per_s": 500},
               "sink1": {"records_in_per_s": 50, "busy_time_ms_per_s": 500}}
    out = steps_of(scenario({}, vertices, [step(0, metrics)], edges))[0]["vertices"]
    assert (out["op1"]["target_data_rate"], out["sink1"]["target_data_rate"]) == (250, 50)
    topology = Topology(tuple(Vertex(v["id"], source=v.get("source", False)) for v in vertices),
                        tuple(Edge(e["from"], e["to"], "rebalance") for e in edges))
    typed = {vid: VertexMetrics(**m) for vid, m in metrics.items()}
    assert edge_output_ratio(topology, typed, "source1", "op1") == 2
    assert edge_output_ratio(topology, typed, "source2", "op1") == 0.5
    assert edge_output_ratio(topology, typed, "op1", "sink1") == 0.2
    # Flink's main code (computeEdgeOutputRatio, FLINK-34266): an upstream vertex with no input, or an
    # edge whose data rate is not positive (op1 in 40/s, less than source2's 50/s), has ratio 0.
    assert edge_output_ratio(topology, {**typed, "source1": VertexMetrics(0, 0, 0)}, "source1", "op1") == 0
    assert edge_output_ratio(topology, {**typed, "op1": VertexMetrics(40, 40, 500)}, "source1", "op1") == 0
    stalled = {"source": {"records_in_per_s": 0, "records_out_per_s": 0, "busy_time_ms_per_s": 0, "backlog": 1000,
                          "backlog_growth_per_s": 50},
               "sink": {"records_in_per_s": 0, "busy_time_ms_per_s": 0}}
    out = steps_of(scenario({"catch_up_duration_s": 2}, SOURCE_SINK, [step(0, stalled)], REBALANCE))[0]["vertices"]
    assert (out["source"]["target_data_rate"], out["source"]["catch_up_data_rate"]) == (50, 500)
    assert (out["sink"]["target_data_rate"], out["sink"]["catch_up_data_rate"]) == (0, 0)


def test_output_ratio_fallback_to_out_per_second():
    """``ScalingMetricEvaluatorTest.testOutputRatioFallbackToOutPerSecond``: both sources feed op1 and
    op2, so no input rate can be split by subtraction; each edge falls back to the source's output per
    input record: source1 2, source2 0.5, on either op; op1 and op2 then target 250/s. The same when the
    ops report an input rate (the other input has two outputs, so Flink's case 2 does not apply)."""
    vertices, edges = _four_vertices({"op1": ("source1", "source2"), "op2": ("source1", "source2")})
    topology = Topology(tuple(Vertex(v["id"], source=v.get("source", False)) for v in vertices),
                        tuple(Edge(e["from"], e["to"], "rebalance") for e in edges))
    sources = {"source1": {"records_in_per_s": 100, "records_out_per_s": 200, "busy_time_ms_per_s": 500},
               "source2": {"records_in_per_s": 100, "records_out_per_s": 50, "busy_time_ms_per_s": 500}}
    for op_metrics in ({"true_processing_rate": 1000}, {"records_in_per_s": 500, "busy_time_ms_per_s": 500}):
        metrics = {**sources, "op1": op_metrics, "op2": op_metrics}
        out = steps_of(scenario({}, vertices, [step(0, metrics)], edges))[0]["vertices"]
        assert (out["op1"]["target_data_rate"], out["op2"]["target_data_rate"]) == (250, 250)
        typed = {vid: VertexMetrics(**m) for vid, m in metrics.items()}
        assert [edge_output_ratio(topology, typed, s, op) for op in ("op1", "op2") for s in ("source1", "source2")] \
            == [2, 0.5, 2, 0.5]


# --- ScalingMetricsTest -----------------------------------------------------------------------------

def test_load_metrics():
    """``ScalingMetricsTest.testLoadMetrics``: subtask busy times min 100, max 200, avg 150 ms/s give
    LOAD 0.2 with the MAX aggregator (Flink's default, ours when the busiest subtask's busy time is
    given) and 0.15 with AVG (ours when only the mean is given). MIN is not modelled."""
    vertices = [{"id": "source", "parallelism": 2, "source": True}]

    def load(**busy):
        metrics = {"source": {"records_in_per_s": 100, **busy}}
        return steps_of(scenario({}, vertices, [step(0, metrics)]))[0]["vertices"]["source"]["utilization"]

    assert load(busy_time_ms_per_s=150, busy_time_max_ms_per_s=200) == 0.2
    assert load(busy_time_ms_per_s=150) == 0.15


# --- BacklogBasedScalingTest -------------------------------------------------------------------------

BACKLOG_POLICY = {"restart_time_s": 1, "catch_up_duration_s": 2, "scale_down_max_factor": 1.0,
                  "scale_up_max_factor": 2**31 - 1, "utilization_target": 0.8, "utilization_max": 0.9,
                  "utilization_min": 0.7, "scale_down_interval_s": 0, "backlog_lag_threshold_s": 1}
BACKLOG_VERTICES = [{"id": "source", "parallelism": 1, "max_parallelism": 720, "source": True},
                    {"id": "sink", "parallelism": 1, "max_parallelism": 720}]


def _pair(records_in, busy, backlog, growth, sink_in=None):
    return {"source": {"records_in_per_s": records_in, "records_out_per_s": records_in, "busy_time_ms_per_s": busy,
                       "backlog": backlog, "backlog_growth_per_s": growth},
            "sink": {"records_in_per_s": records_in if sink_in is None else sink_in, "busy_time_ms_per_s": busy}}


def test_backlog_based_scaling():
    """``BacklogBasedScalingTest.test`` (restart 1 s, catch-up 2 s, target 0.8 in [0.7, 0.9], lag
    threshold 1 s, scale-down interval 0, max scale-down factor 1), with Flink's window rates:

    - t=1: 500/s at 850 ms/s, 2000 pending: capacity round(1000 + 250 + 625) = 1875 over TPR 588.2
      -> 4 / 4;
    - t=4 (p4, window t=2..4): 1800/s at 1000 ms/s, pending 6000 -> 2000: target max(0, 1800 − 2000)
      = 0, catch-up 1000, lag 1.1 s: backlog, TPR 1800 >= 1000: no change;
    - t=5 (window t=3..5): pending 3600 -> 400: target 200, catch-up 200, capacity round(200 + 100 +
      250) = 550, ceil(550 / 1800 × 4) = 2 -> 2 / 2;
    - t=8 (p2, window t=6..8): 900/s, pending 2000 -> 800: target 300, catch-up 400, thresholds 733 /
      979, TPR 900 within: no change;
    - t=9 (window t=7..9): pending 1400 -> 300: target 350, catch-up 150; TPR 900 is above the
      scale-down threshold 825 but ceil(763 / 900 × 2) = 2: no change.
    """
    steps = [step(1, _pair(500, 850, 2000, 0)),
             step(4, _pair(1800, 1000, 2000, -2000)),
             step(5, _pair(1800, 1000, 400, -1600)),
             step(8, _pair(900, 1000, 800, -600)),
             step(9, _pair(900, 1000, 300, -550))]
    out = steps_of(scenario(BACKLOG_POLICY, BACKLOG_VERTICES, steps, REBALANCE))
    proposed = [(s["decision"], s["vertices"]["source"]["proposed"], s["vertices"]["sink"]["proposed"]) for s in out]
    assert proposed == [("scale", 4, 4), ("no-change", 4, 4), ("scale", 2, 2), ("no-change", 2, 2),
                        ("no-change", 2, 2)]
    assert out[1]["vertices"]["source"]["target_data_rate"] == 0
    assert (out[1]["vertices"]["source"]["scale_up_threshold"], out[1]["vertices"]["source"]["scale_down_threshold"]) \
        == (1000, "inf")
    assert (out[3]["vertices"]["source"]["scale_up_threshold"], out[3]["vertices"]["source"]["scale_down_threshold"]) \
        == (733, 979)
    last = out[4]["vertices"]["source"]
    assert last["scale_down_threshold"] == 825 and last["outside_bounds"]


def test_should_track_restart_duration_correctly():
    """``BacklogBasedScalingTest.shouldTrackRestartDurationCorrectly``, the part we model: the same
    scale-up with the sink at 100/s (output ratio 0.2) still gives 4 / 4 (sink: capacity round(200 +
    50 + 125) = 375 over TPR 117.6). Measuring the restart is the runner's (``measured_restart_time_s``
    in a scenario); with tracking on, the measured downtime replaces the configured restart time."""
    steps = [step(1, _pair(500, 850, 2000, 0, sink_in=100))]
    out = steps_of(scenario(BACKLOG_POLICY, BACKLOG_VERTICES, steps, REBALANCE))[0]
    assert (out["decision"], out["vertices"]["source"]["proposed"], out["vertices"]["sink"]["proposed"]) \
        == ("scale", 4, 4)
    # After the rescale at p4: 1800/s, no lag; the tracked 9 s restart adds 1800 × 9 / 2 to the scale-down threshold.
    policy = {**BACKLOG_POLICY, "restart_time_tracking_enabled": True}
    steps.append(step(12, _pair(1800, 500, 0, 0), measured_restart_time_s=9))
    after = steps_of(scenario(policy, BACKLOG_VERTICES, steps, REBALANCE))[1]["vertices"]["source"]
    assert after["current"] == 4 and after["scale_down_threshold"] == round(1800 * 9 / 2 + 1800 / 0.7)


def test_event_on_error():
    """``BacklogBasedScalingTest.testEventOnError``: an option that cannot be parsed is reported, not
    acted on: a scenario gives exit 2 with the option named."""
    doc = scenario({"scaling_sources_enabled": "3"}, BACKLOG_VERTICES, [step(1, _pair(500, 850, 2000, 0))], REBALANCE)
    with pytest.raises(ScenarioError, match=r"^policy\.scaling_sources_enabled: must be true or false"):
        evaluate_text(json.dumps(doc))


# --- RecommendedParallelismTest ----------------------------------------------------------------------

def test_recommended_parallelism_end_to_end():
    """``RecommendedParallelismTest.endToEnd`` (restart 1 s, catch-up 2 s, target 0.8 in [0.7, 0.9],
    lag threshold 5 min): once the 3 s window is full, records in 0 -> 1500 and pending 2000 -> 1900
    give the source a target of 500 − 33.3 = 466.7/s and a catch-up of 950/s; capacity round(950 +
    233.3 + 583.3) = 1767 over TPR 500 / 0.85 = 588.2 gives 4 for both vertices, recommended the same
    whether or not scaling is enabled. (Recommending only once the window is full, and dropping the
    evaluation while the job restarts, is the collector's.)"""
    policy = {**BACKLOG_POLICY, "backlog_lag_threshold_s": 300}
    metrics = _pair(500, 850, 1900, -100 / 3)
    out = steps_of(scenario(policy, BACKLOG_VERTICES, [step(3, metrics)], REBALANCE))[0]["vertices"]
    assert (out["source"]["proposed"], out["sink"]["proposed"]) == (4, 4)
    assert (out["source"]["target_data_rate"], out["source"]["catch_up_data_rate"]) == (466.667, 950)
    assert out["source"]["scale_up_threshold"] == 1469   # round(950 + 466.7 / 0.9)


# --- AutoScalerUtilsTest -----------------------------------------------------------------------------

def test_vertex_exclusion():
    """``AutoScalerUtilsTest.testVertexExclusion``: excluded vertex ids form a set (adding one twice
    changes nothing); an excluded vertex keeps its parallelism while the others scale."""
    metrics = _pair(500, 850, 2000, 0)
    doc = scenario(BACKLOG_POLICY, BACKLOG_VERTICES, [step(1, metrics)], REBALANCE)
    both = steps_of(doc)[0]["vertices"]
    assert (both["source"]["proposed"], both["sink"]["proposed"]) == (4, 4)
    for excluded in (["source"], ["source", "source"]):
        doc["policy"]["excluded_vertices"] = excluded
        out = steps_of(doc)[0]["vertices"]
        assert (out["source"]["proposed"], out["sink"]["proposed"]) == (1, 4)
    doc["policy"]["excluded_vertices"] = ["source", "sink", "source"]
    out = steps_of(doc)[0]
    assert (out["decision"], out["vertices"]["source"]["proposed"], out["vertices"]["sink"]["proposed"]) \
        == ("no-change", 1, 1)

