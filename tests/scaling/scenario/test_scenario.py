"""SCENARIO.md's worked example, DS2's Heron word count, and multi-step sequences (delayed
scale-down, ineffective scale-up, restart-time tracking, excluded periods) through the scenario format."""

import copy
import json

import pytest

from scaling.planner.vertex_scaler import align_parallelism
from scaling.policy.options import flink_defaults
from scaling.policy.policy import Policy
from scaling.scenario.format import evaluate_text
from scaling.scenario.values import ScenarioError
from scaling.words.reason_text import align_note
from tests.repo import ROOT
from tests.scaling.factories import steps_of

SCENARIO_INPUT = {
    "format": 1,
    "mode": "continuous",
    "policy": {
        "utilization_target": 0.7, "utilization_min": None, "utilization_max": None,
        "scale_up_max_factor": 100000.0, "scale_down_max_factor": 0.6, "vertex_min_parallelism": 1,
        "vertex_max_parallelism": 200, "catch_up_duration_s": 1800, "restart_time_s": 300,
        "backlog_lag_threshold_s": 300, "scale_down_interval_s": 3600, "scaling_sources_enabled": True,
        "alignment": "balanced", "effectiveness_detection_enabled": False, "effectiveness_threshold": 0.1,
        "excluded_vertices": [],
    },
    "vertices": [
        {"id": "src", "parallelism": 2, "max_parallelism": 720, "partitions": 8, "source": True},
        {"id": "agg", "parallelism": 4, "max_parallelism": 720},
    ],
    "edges": [{"from": "src", "to": "agg", "ship": "hash"}],
    "steps": [{"at_s": 0, "metrics": {
        "src": {"records_in_per_s": 500, "records_out_per_s": 500, "busy_time_ms_per_s": 850, "backlog": 2000,
                "backlog_growth_per_s": 0},
        "agg": {"records_in_per_s": 500, "records_out_per_s": 20, "busy_time_ms_per_s": 1000}}}],
}

SCENARIO_OUTPUT = {
    "format": 1,
    "steps": [{
        "at_s": 0,
        "decision": "scale",
        "reasons": [{"code": "threshold-exceeded", "vertex_id": "agg",
                     "data": {"true_processing_rate": 500.0, "scale_up_threshold": 501.0,
                              "scale_down_threshold": 1334.0},
                     "text": "agg: true processing rate 500.0 below scale-up threshold 501.0"}],
        "vertices": {
            "src": {
                "current": 2, "proposed": 4,
                "true_processing_rate": 588.235, "target_data_rate": 500.0, "catch_up_data_rate": 1.111,
                "scale_up_threshold": 501.0, "scale_down_threshold": 1334.0,
                "expected_processing_rate": 1176.471, "utilization": 0.85, "outside_bounds": False,
                "note": "aligned 3 -> 4 to spread 8 partitions evenly",
                "reason": {"code": "aligned", "vertex_id": "src",
                           "data": {"from": 3, "to": 4, "n": 8, "unit": "partitions"},
                           "text": "aligned 3 -> 4 to spread 8 partitions evenly"},
            },
            "agg": {
                "current": 4, "proposed": 8,
                "true_processing_rate": 500.0, "target_data_rate": 500.0, "catch_up_data_rate": 1.111,
                "scale_up_threshold": 501.0, "scale_down_threshold": 1334.0,
                "expected_processing_rate": 1000.0, "utilization": 1.0, "outside_bounds": True,
                "note": "aligned 7 -> 8 to the 720 key groups",
                "reason": {"code": "aligned", "vertex_id": "agg",
                           "data": {"from": 7, "to": 8, "n": 720, "unit": "key groups"},
                           "text": "aligned 7 -> 8 to the 720 key groups"},
            },
        },
        "executors": None,
    }],
}


def why(vertex: dict) -> tuple:
    """A vertex's reason in the output: (code, data)."""
    return vertex["reason"]["code"], vertex["reason"]["data"]


def codes(step: dict) -> list[tuple]:
    """A step's reasons: (code, vertex_id)."""
    return [(r["code"], r["vertex_id"]) for r in step["reasons"]]


def test_scenario_md_example_exactly():
    """SCENARIO.md: band [0.4, 1.0]; catch-up 2000 / 1800 = 1.111; scale-up threshold
    round(1.111 + 500 / 1.0) = 501; scale-down threshold round(1.111 + 500 × 300 / 1800 + 500 / 0.4) = 1334.
    Factor (1.111 + 83.333 + 714.286) / TPR: src 798.73 / 588.235 × 2 = 2.72 -> 3 -> 4 (8 partitions);
    agg 798.73 / 500 × 4 = 6.39 -> 7 -> 8 (720 key groups)."""
    assert evaluate_text(json.dumps(SCENARIO_INPUT)) == SCENARIO_OUTPUT


def test_scenario_md_example_policy_keys_are_optional():
    """The example's policy is Flink's configuration: every key whose default is Flink's may go."""
    doc = copy.deepcopy(SCENARIO_INPUT)
    doc["policy"] = flink_defaults()
    assert evaluate_text(json.dumps(doc)) == SCENARIO_OUTPUT


@pytest.mark.parametrize(("alignment", "src", "agg", "src_reason"), [
    ("evenly_spread", 4, 8, ("aligned", {"from": 3, "to": 4, "n": 8, "unit": "partitions"})),
    ("off", 3, 7, ("scale-up", {"current": 2, "to": 3})),
])
def test_scenario_alignment_modes(alignment, src, agg, src_reason):
    doc = copy.deepcopy(SCENARIO_INPUT)
    doc["policy"]["alignment"] = alignment
    out = steps_of(doc)[0]["vertices"]
    assert (out["src"]["proposed"], out["agg"]["proposed"]) == (src, agg)
    code, data = why(out["src"])
    assert (code, {k: data[k] for k in src_reason[1]}) == src_reason
    assert out["src"]["note"] == out["src"]["reason"]["text"]


def test_balanced_and_evenly_spread_differ_when_no_divisor_is_near():
    """720 key groups, target 100: evenly_spread takes the next divisor, 120; balanced the fewest tasks
    holding at most floor(720 / 100) = 7 key groups each: ceil(720 / 7) = 103."""
    assert align_parallelism(1, 100, n=720, lower=1, upper=200, mode="evenly_spread") == (120, False)
    assert align_parallelism(1, 100, n=720, lower=1, upper=200, mode="balanced") == (103, False)
    note = align_note(100, 103, 720, "key groups")
    assert note == "aligned 100 -> 103 so no task holds more than 7 of 720 key groups"
    # Nothing aligned under the upper bound: Flink main's built-in modes keep the computed target
    # (``BuiltInAlignmentMode.alignOrKeepTarget``: alignment never vetoes a scaling) ...
    assert align_parallelism(1, 190, n=720, lower=1, upper=200, mode="balanced") == (190, False)
    assert align_parallelism(1, 190, n=720, lower=1, upper=200, mode="evenly_spread") == (190, False)
    # ... the legacy adjust modes fall back downward to the share boundary (``relaxedDownwardFallback``).
    assert align_parallelism(100, 190, n=720, lower=1, upper=200, mode="evenly_spread", legacy=True) == (180, False)


def test_scale_down_that_cannot_reach_a_divisor_falls_back_as_flink():
    """128 key groups at 20 -> 18 with evenly_spread: no divisor of 128 in [18, 20], so Flink
    main keeps 18 (it used to stay at 20). The legacy adjust mode's fallback goes down to 16 (the
    boundary where the share grows, a divisor). A legacy fallback that would invert the direction
    keeps the current parallelism (blocked)."""
    assert align_parallelism(20, 18, n=128, lower=1, upper=200, mode="evenly_spread") == (18, False)
    # balanced also accepts a load-reducing value: 128 // 19 = 6 < 128 // 18 = 7.
    assert align_parallelism(20, 18, n=128, lower=1, upper=200, mode="balanced") == (19, False)
    assert align_parallelism(20, 18, n=128, lower=1, upper=200, mode="evenly_spread", legacy=True) == (16, False)
    # Scale-up 10 -> 11 on 100 under an upper bound of 11: no divisor in [11, 11]; the legacy fallback
    # finds the boundary 10 (100 // 10 = 10 > 100 // 11 = 9), which would not scale up: blocked at 10.
    assert align_parallelism(10, 11, n=100, lower=1, upper=11, mode="evenly_spread", legacy=True) == (10, True)
    # The built-in mode keeps the target instead.
    assert align_parallelism(10, 11, n=100, lower=1, upper=11, mode="evenly_spread") == (11, False)


def test_legacy_adjust_mode_is_used_only_when_alignment_is_unset():
    assert Policy().alignment_mode == ("balanced", False)
    assert Policy(key_group_partitions_adjust_mode="maximize_utilisation").alignment_mode == (
        "maximize_utilisation", True)
    assert Policy(alignment="off", key_group_partitions_adjust_mode="evenly_spread").alignment_mode == ("off", False)


def test_ds2_heron_word_count_in_one_step():
    """DS2 §5 (Heron word count): the source offers 1M sentences/min; FlatMap processes 100K sentences/min
    per instance and emits 20 words per sentence; Count processes 1M words/min per instance. Both at 1
    instance, target utilization 1.0: FlatMap 1M / 100K = 10, Count 20M / 1M = 20, in one step.
    Rates are per second here (÷ 50, so they are whole numbers: Flink rounds the target capacity before
    dividing by the true processing rate); DS2 has no restart term and no key-group alignment."""
    per_min = 1 / 50
    doc = {
        "format": 1, "mode": "continuous",
        "policy": {"utilization_target": 1.0, "restart_time_s": 0, "alignment": "off"},
        "vertices": [{"id": "source", "parallelism": 1, "source": True},
                     {"id": "flatmap", "parallelism": 1}, {"id": "count", "parallelism": 1}],
        "edges": [{"from": "source", "to": "flatmap", "ship": "rebalance"},
                  {"from": "flatmap", "to": "count", "ship": "hash"}],
        "steps": [{"at_s": 0, "metrics": {
            "source": {"records_in_per_s": 1_000_000 * per_min, "records_out_per_s": 1_000_000 * per_min,
                       "true_processing_rate": 10_000_000 * per_min},
            "flatmap": {"true_processing_rate": 100_000 * per_min, "true_output_rate": 2_000_000 * per_min},
            "count": {"true_processing_rate": 1_000_000 * per_min, "true_output_rate": 1_000_000 * per_min},
        }}],
    }
    step = steps_of(doc)[0]
    assert step["decision"] == "scale"
    assert {v: step["vertices"][v]["proposed"] for v in ("source", "flatmap", "count")} == {
        "source": 1, "flatmap": 10, "count": 20}
    assert step["vertices"]["count"]["target_data_rate"] == round(20_000_000 * per_min, 3)
    # One step: applying it and re-evaluating with the rates of 10 and 20 instances changes nothing.
    doc["steps"].append({"at_s": 60, "metrics": {
        **doc["steps"][0]["metrics"],
        "flatmap": {"true_processing_rate": 1_000_000 * per_min, "true_output_rate": 20_000_000 * per_min},
        "count": {"true_processing_rate": 20_000_000 * per_min, "true_output_rate": 20_000_000 * per_min}}})
    second = steps_of(doc)[1]
    assert second["decision"] == "no-change"
    assert second["vertices"]["flatmap"]["current"] == 10 and second["vertices"]["count"]["current"] == 20


def one_vertex(policy: dict, steps: list[dict], parallelism: int) -> dict:
    return {"format": 1, "mode": "continuous",
            "policy": {"restart_time_s": 0, "alignment": "off", **policy},
            "vertices": [{"id": "src", "parallelism": parallelism, "source": True}], "edges": [], "steps": steps}


def src_step(at_s: float, busy: float, records_in: float = 1000, growth: float = 0, **extra) -> dict:
    return {"at_s": at_s, "metrics": {"src": {"records_in_per_s": records_in, "records_out_per_s": records_in,
                                              "busy_time_ms_per_s": busy, "backlog_growth_per_s": growth}}, **extra}


def test_delayed_scale_down_sequence():
    """FLINK-36018 with scale_down_interval_s = 600. One source at 1000 records/s, target utilization 0.7:
    target capacity 1000 / 0.7 = 1428.571; scale-up threshold round(1000 / 1.0) = 1000; scale-down
    threshold round(1000 / 0.4) = 2500; TPR = 1000 × 1000 / busy.

    t=0    p=8, busy 200 -> TPR 5000 > 2500: 1428.571 / 5000 × 8 = 2.29 -> 3; first recommendation, held to 600.
    t=300  p=8, busy 320 -> TPR 3125 > 2500: 0.457 × 8 = 3.66 -> 4; still held (largest so far: 4).
    t=600  p=8, busy 200 -> recommends 3, but the interval is over: scale to the largest seen, 4.
    t=700  p=4, busy 300 -> TPR 3333: 0.429 × 4 = 1.71 -> 2; a new first recommendation, held to 1300.
    t=800  p=4, busy 750 -> TPR 1333 within [1000, 2500]; recommends ceil(1.071 × 4) = 5 >= 4: clears it.
    t=1400 p=4, busy 300 -> recommends 2 again: held until 2000, not 1300, since t=800 cleared the first.
    t=2000 p=4, busy 300 -> due: scale 4 -> 2.
    """
    doc = one_vertex({"scale_down_interval_s": 600, "scale_down_max_factor": 1.0},
                     [src_step(0, 200), src_step(300, 320), src_step(600, 200), src_step(700, 300),
                      src_step(800, 750), src_step(1400, 300), src_step(2000, 300)], parallelism=8)
    steps = steps_of(doc)
    summary = [(s["decision"], s["vertices"]["src"]["current"], s["vertices"]["src"]["proposed"]) for s in steps]
    assert summary == [("blocked", 8, 8), ("blocked", 8, 8), ("scale", 8, 4), ("blocked", 4, 4),
                       ("no-change", 4, 4), ("blocked", 4, 4), ("scale", 4, 2)]
    src = [s["vertices"]["src"] for s in steps]
    assert src[0]["true_processing_rate"] == 5000.0 and src[0]["scale_down_threshold"] == 2500.0
    held = "held-scale-down"
    assert why(src[0]) == (held, {"current": 8, "target": 3, "due_s": 600, "first_at_s": 0})
    assert why(src[1]) == (held, {"current": 8, "target": 4, "due_s": 600, "first_at_s": 0})
    assert why(src[2]) == ("delayed-scale-down-due", {"current": 8, "target": 4, "window_start_s": 0})
    assert steps[2]["reasons"] == [{"code": "threshold-exceeded", "vertex_id": "src", "data": {
        "true_processing_rate": 5000.0, "scale_up_threshold": 1000.0, "scale_down_threshold": 2500.0},
        "text": "src: true processing rate 5000.0 above scale-down threshold 2500.0"}]
    assert why(src[3]) == (held, {"current": 4, "target": 2, "due_s": 1300, "first_at_s": 700})
    assert src[4]["outside_bounds"] is False and codes(steps[4]) == [("every-vertex-within-bounds", None)]
    assert why(src[5]) == (held, {"current": 4, "target": 2, "due_s": 2000, "first_at_s": 1400})
    assert codes(steps[5]) == [("change-held", "src")]
    assert steps[5]["reasons"][0]["data"]["true_processing_rate"] == 3333.333


def test_scale_down_interval_zero_scales_down_at_once():
    steps = steps_of(one_vertex({"scale_down_interval_s": 0, "scale_down_max_factor": 1.0}, [src_step(0, 200)], 8))
    assert (steps[0]["decision"], steps[0]["vertices"]["src"]["proposed"]) == ("scale", 3)


def test_scale_down_max_factor_limits_a_scale_down():
    """factor 0.286 clamped to 1 − 0.6 = 0.4: ceil(0.4 × 8) = 4."""
    steps = steps_of(one_vertex({"scale_down_interval_s": 0}, [src_step(0, 200)], 8))
    assert steps[0]["vertices"]["src"]["proposed"] == 4


def test_held_scale_down_does_not_join_another_vertex_scaling():
    """a -> b (forward), target utilization 0.7, b's TPR 1000 × 1000 / 100 = 10,000 records/s.
    t=0:  a at 1000 records/s, busy 500 (TPR 2000, within [1000, 2500]); b recommends
          ceil(1428.571 / 10000 × 8) = 2: a held scale-down, so the decision is blocked.
    t=60: a's target grows to 1000 + 200 backlog growth = 1200 and it is busy 1000 (TPR 1000 below
          the scale-up threshold 1200): ceil(1714.286 / 1000 × 2) = 4. b's scale-down is still inside
          its interval, so it stays at 8: a held scale-down never joins another vertex's scaling
          (FLINK-36535, Flink ``JobVertexScaler.applyScaleDownInterval`` returns no change)."""
    def step(at_s, busy_a, growth):
        return {"at_s": at_s, "metrics": {
            "a": {"records_in_per_s": 1000, "records_out_per_s": 1000, "busy_time_ms_per_s": busy_a,
                  "backlog_growth_per_s": growth},
            "b": {"records_in_per_s": 1000, "records_out_per_s": 1000, "busy_time_ms_per_s": 100}}}
    doc = {"format": 1, "policy": {"restart_time_s": 0, "alignment": "off", "scale_down_max_factor": 1.0},
           "vertices": [{"id": "a", "parallelism": 2, "source": True}, {"id": "b", "parallelism": 8}],
           "edges": [{"from": "a", "to": "b", "ship": "forward"}], "steps": [step(0, 500, 0), step(60, 1000, 200)]}
    first, second = steps_of(doc)
    assert first["decision"] == "blocked"
    assert (first["vertices"]["a"]["proposed"], first["vertices"]["b"]["proposed"]) == (2, 8)
    assert why(first["vertices"]["b"]) == ("held-scale-down", {"current": 8, "target": 2, "due_s": 3600,
                                                                "first_at_s": 0})
    assert second["decision"] == "scale"
    assert codes(second) == [("threshold-exceeded", "a")]
    assert second["reasons"][0]["data"]["scale_up_threshold"] == 1200.0
    assert (second["vertices"]["a"]["proposed"], second["vertices"]["b"]["proposed"]) == (4, 8)
    assert why(second["vertices"]["b"])[0] == "held-scale-down"
    assert why(second["vertices"]["b"])[1]["due_s"] == 3600


def test_ineffective_scale_up_sequence():
    """FLIP-271 effectiveness detection (threshold 0.1, enabled). Source target rate = in + growth;
    target capacity = target / 0.7; scale-up threshold = round(target / 1.0).

    t=0   p=2, in 800 + growth 200 = 1000, busy 1000 -> TPR 800 < 1000: 1428.571 / 800 × 2 = 3.57 -> 4.
          Scale 2 -> 4, expecting TPR 800 × 4 / 2 = 1600.
    t=60  p=4, in 850 + growth 150, busy 1000 -> TPR 850: gain 50 of the expected 800 = 0.0625 < 0.1.
          Recommends ceil(1428.571 / 850 × 4) = 7, blocked as ineffective.
    t=120 the same metrics: still blocked (the history still shows the ineffective scale-up).
    t=180 p=4, in 1000 + growth 400, busy 1000 -> TPR 1000: gain 200 / 800 = 0.25 >= 0.1, effective;
          2000 / 1000 × 4 = 8: scale 4 -> 8.
    """
    steps_in = [src_step(0, 1000, 800, 200), src_step(60, 1000, 850, 150), src_step(120, 1000, 850, 150),
                src_step(180, 1000, 1000, 400)]
    doc = one_vertex({"effectiveness_detection_enabled": True}, steps_in, parallelism=2)
    steps = steps_of(doc)
    src = [s["vertices"]["src"] for s in steps]
    assert [(s["decision"], v["current"], v["proposed"]) for s, v in zip(steps, src)] == [
        ("scale", 2, 4), ("blocked", 4, 4), ("blocked", 4, 4), ("scale", 4, 8)]
    assert src[0]["expected_processing_rate"] == 1600.0
    assert src[1]["true_processing_rate"] == 850.0 and src[1]["outside_bounds"] is True
    assert why(src[1]) == ("ineffective-blocked", {"tpr_before": 800.0, "tpr_now": 850.0, "expected": 1600.0,
                                                    "old": 2, "new": 4, "current": 4, "to": 7})
    assert codes(steps[1]) == [("change-held", "src")]
    assert steps[1]["reasons"][0]["data"]["cause"] == "ineffective-blocked"
    assert why(src[3])[0] == "scale-up" and (why(src[3])[1]["current"], why(src[3])[1]["to"]) == (4, 8)
    # Detection disabled: the scale-up happens, with a warning in the note.
    doc["policy"]["effectiveness_detection_enabled"] = False
    steps = steps_of(doc)
    assert (steps[1]["decision"], steps[1]["vertices"]["src"]["proposed"]) == ("scale", 7)
    code, data = why(steps[1]["vertices"]["src"])
    assert (code, data["old"], data["new"], data["cause"]) == ("ineffective-warning", 2, 4, "scale-up")


def test_restart_time_tracking_uses_the_max_measured_downtime_capped():
    """Tracking on, limit 100 s: measurements 40 s then 250 s -> min(max(40, 250), 100) = 100 s.
    Scale-down threshold = round(1000 × restart / 1800 + 1000 / 0.4)."""
    policy = {"restart_time_s": 300, "restart_time_tracking_enabled": True, "restart_time_limit_s": 100,
              "catch_up_duration_s": 1800}
    doc = one_vertex(policy, [src_step(0, 700), src_step(60, 700, measured_restart_time_s=40),
                              src_step(120, 700, measured_restart_time_s=250)], parallelism=2)
    doc["policy"]["restart_time_s"] = 300
    thresholds = [s["vertices"]["src"]["scale_down_threshold"] for s in steps_of(doc)]
    assert thresholds == [round(1000 * 300 / 1800 + 2500), round(1000 * 40 / 1800 + 2500),
                          round(1000 * 100 / 1800 + 2500)]


def test_backlog_mode_blocks_scale_downs_and_raises_the_band():
    """Lag 600,000 / 1000 = 600 s > 300 s: backlog mode. The scale-down threshold is infinite and the
    scale-up threshold uses utilization 1.0."""
    step = src_step(0, 100)
    step["metrics"]["src"]["backlog"] = 600_000
    out = steps_of(one_vertex({"scale_down_interval_s": 0}, [step], parallelism=8))[0]
    assert out["decision"] == "no-change"
    assert out["vertices"]["src"]["scale_down_threshold"] == "inf"
    assert out["vertices"]["src"]["proposed"] == 8
    assert ("backlog-mode", None) in codes(out)


def test_idle_vertex_has_infinite_rate_and_obeys_scale_down_max_factor():
    """Flink: an idle vertex's factor is 0, clamped to 1 − scale_down_max_factor (0.4): p8 -> 4, p10 -> 4
    (it used to go to the minimum)."""
    for parallelism, expected in ((8, 4), (10, 4)):
        steps = [src_step(0, 0, records_in=0)]
        out = steps_of(one_vertex({"scale_down_interval_s": 0, "vertex_min_parallelism": 2}, steps, parallelism))[0]
        src = out["vertices"]["src"]
        assert src["true_processing_rate"] == "inf"
        assert (out["decision"], src["proposed"]) == ("scale", expected)
        assert why(src)[0] == "idle"


def test_busy_vertex_with_zero_input_does_not_crash_flink_zero_processing_rate():
    """Flink ``MetricsCollectionAndEvaluationTest.testScaleDownWithZeroProcessingRate``: busy 100 ms/s,
    0 records in (a Spark no-data batch): TPR infinite, both thresholds 0, p2 -> 1."""
    steps = [src_step(0, 100, records_in=0)]
    out = steps_of(one_vertex({"scale_down_interval_s": 0}, steps, parallelism=2))[0]
    src = out["vertices"]["src"]
    assert src["true_processing_rate"] == "inf"
    assert (src["scale_up_threshold"], src["scale_down_threshold"]) == (0.0, 0.0)
    assert (out["decision"], src["proposed"]) == ("scale", 1)


def test_excluded_vertices_and_sources_switch_keep_parallelism():
    doc = copy.deepcopy(SCENARIO_INPUT)
    doc["policy"]["excluded_vertices"] = ["agg"]
    out = steps_of(doc)[0]
    # agg is excluded, so nothing that must change is outside its bounds.
    assert out["vertices"]["agg"]["proposed"] == 4 and out["decision"] == "no-change"
    doc = copy.deepcopy(SCENARIO_INPUT)
    doc["policy"]["scaling_sources_enabled"] = False
    out = steps_of(doc)[0]
    assert (out["vertices"]["src"]["proposed"], out["vertices"]["agg"]["proposed"]) == (2, 8)
    assert why(out["vertices"]["src"]) == ("source-scaling-disabled", {})


@pytest.mark.parametrize(("periods", "at_s", "executable"), [
    (["22:00-23:59:59:999", "00:00-06:00"], 23 * 3600, False),  # 23:00 UTC; across midnight is two windows
    (["22:00-23:59:59:999", "00:00-06:00"], 12 * 3600, True),
    (["* 9-17 * * 1-5"], 4 * 86400 + 10 * 3600, False),  # 1970-01-05 was a Monday, 10:00
    (["* 9-17 * * 1-5"], 3 * 86400 + 10 * 3600, True),   # Sunday
])
def test_excluded_periods_compute_the_plan_but_do_not_execute(periods, at_s, executable):
    doc = copy.deepcopy(SCENARIO_INPUT)
    doc["policy"]["excluded_periods"] = periods
    doc["steps"][0]["at_s"] = at_s
    out = steps_of(doc)[0]
    if executable:
        assert out["decision"] == "scale" and out["vertices"]["agg"]["proposed"] == 8
    else:
        assert out["decision"] == "blocked"
        assert out["vertices"]["agg"]["proposed"] == 4
        code, data = why(out["vertices"]["agg"])
        assert (code, data["period"], data["current"], data["computed"]) == ("not-executable", periods[0], 4, 8)
        assert ("excluded-period", None) in codes(out)


def test_step_parallelism_overrides_what_was_running():
    doc = copy.deepcopy(SCENARIO_INPUT)
    doc["steps"].append({**copy.deepcopy(doc["steps"][0]), "at_s": 60, "parallelism": {"agg": 5}})
    second = steps_of(doc)[1]
    assert (second["vertices"]["src"]["current"], second["vertices"]["agg"]["current"]) == (4, 5)


@pytest.mark.parametrize(("mutate", "field"), [
    (lambda d: d["steps"][0]["metrics"]["src"].update(records_in_per_s=-5), "steps[0].metrics.src.records_in_per_s"),
    (lambda d: d["steps"][0]["metrics"]["agg"].update(busy_time_ms_per_s=1001),
     "steps[0].metrics.agg.busy_time_ms_per_s"),
    (lambda d: d["edges"].append({"from": "src", "to": "ghost"}), "edges[1].to"),
    (lambda d: d["edges"].append({"from": "agg", "to": "src"}), "edges: cycle"),
    (lambda d: d["policy"].update(vertex_min_parallelism=300), "policy.vertex_min_parallelism"),
    (lambda d: d["policy"].update(utilization_target=1.2), "policy.utilization_target"),
    (lambda d: d["policy"].update(utilization_target=-0.2), "policy.utilization_target"),
    (lambda d: d["policy"].update(alignment="sideways"), "policy.alignment"),
    (lambda d: d["policy"].update(excluded_periods=["every tuesday"]), "policy.excluded_periods"),
    (lambda d: d.update(mode="batch"), "mode"),
    (lambda d: d.update(format=2), "format"),
    (lambda d: d["steps"][0]["metrics"].pop("agg"), "steps[0].metrics.agg"),
    (lambda d: d["vertices"][0].update(parallelism="two"), "vertices[src].parallelism"),
])
def test_invalid_input_names_the_field(mutate, field):
    doc = copy.deepcopy(SCENARIO_INPUT)
    mutate(doc)
    with pytest.raises(ScenarioError) as info:
        evaluate_text(json.dumps(doc))
    assert str(info.value).startswith(field)
    assert "\n" not in str(info.value)


def test_malformed_json():
    with pytest.raises(ScenarioError, match=r"^json: malformed at line 1"):
        evaluate_text('{"format": 1,')


def test_docs_scenario_md_example_in_the_repository_evaluates_to_its_output():
    """docs/SCENARIO.md (the repository's copy of the spec): its input block gives its output block."""
    import re

    text = (ROOT / "docs" / "SCENARIO.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```json\n(.*?)```", text, flags=re.S)
    assert len(blocks) >= 2
    assert evaluate_text(blocks[0]) == json.loads(blocks[1])
