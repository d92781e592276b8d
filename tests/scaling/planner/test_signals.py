"""Decisions that never harm the job (scaling/planner/signals.py): a window whose batches overrun the
trigger or whose backlog grows is never scaled down; a persistent overrun inside the band scales
up; a pipeline without an executors knob is never planned at other cores. Codes and data only."""

from __future__ import annotations

import json

from hypothesis import example, given, settings
from hypothesis import strategies as st

from scaling.planner.microbatch import plan_micro_batch
from scaling.policy.policy import Policy
from scaling.scenario.format import evaluate_text, parse, run_scenario
from scaling.values.metrics import ClusterState, VertexMetrics
from scaling.values.reasons import Limit, PlanReason, VetoSignal
from scaling.values.topology import Edge, Topology, Vertex


def _doc(durations, *, growth=800.0, busy=100.0, adjustable=True, executors=8, policy=None, records=2000.0):
    """The user's pipeline: a source and a skewed stage (its busiest task twice its mean) on a 10 s
    trigger, 8 cores, the backlog growing ``growth`` records/s."""
    return json.dumps({
        "format": 1, "mode": "micro-batch", "trigger_interval_s": 10.0,
        "policy": {"scale_down_interval_s": 0, **(policy or {})},
        "cluster": {"executors": executors, "max_executors": 16, "executors_adjustable": adjustable},
        "vertices": [{"id": "src", "parallelism": 8, "source": True}, {"id": "agg", "parallelism": 8}],
        "edges": [{"from": "src", "to": "agg", "ship": "hash"}],
        "steps": [{"at_s": 0, "batch_durations_s": durations, "metrics": {
            "src": {"records_in_per_s": records, "records_out_per_s": records, "busy_time_ms_per_s": 50,
                    "backlog": 4000, "backlog_growth_per_s": growth},
            "agg": {"records_in_per_s": records, "records_out_per_s": 100, "busy_time_ms_per_s": busy,
                    "busy_time_max_ms_per_s": 2 * busy}}}]})


def _step(text):
    return evaluate_text(text)["steps"][0]


def _codes(step):
    return [r["code"] for r in step["reasons"]]


def _reason(step, code):
    return next(r for r in step["reasons"] if r["code"] == code)


OVERRUN = [10.2, 10.6, 10.4, 10.3]
NO_SIGNALS = {"scale_down_veto_batch_ratio": 100.0, "scale_down_veto_backlog_growth": 1.0}


def test_the_skewed_stage_that_overruns_its_trigger_is_not_scaled_down():
    """10.2-10.6 s batches on a 10 s trigger, backlog +800 records/s: the model alone plans 8 -> 4."""
    harm = _step(_doc(OVERRUN, policy=NO_SIGNALS))
    assert harm["decision"] == "scale" and harm["executors"]["proposed"] < 8  # the harm, signals off
    step = _step(_doc(OVERRUN))
    assert step["executors"]["proposed"] == 8
    assert all(v["proposed"] >= v["current"] for v in step["vertices"].values())
    vetoed = _reason(step, PlanReason.SCALE_DOWN_VETOED)
    assert vetoed["data"]["signal"] == VetoSignal.BATCH_RATIO
    assert vetoed["data"]["value"] == 1.038 and vetoed["data"]["threshold"] == 0.9
    assert vetoed["text"]


def test_a_growing_backlog_alone_vetoes_the_scale_down():
    step = _step(_doc([5.0, 5.0]))
    assert step["executors"]["proposed"] == 8
    vetoed = _reason(step, PlanReason.SCALE_DOWN_VETOED)
    assert (vetoed["data"]["signal"], vetoed["data"]["value"], vetoed["data"]["threshold"]) == (
        VetoSignal.BACKLOG_GROWTH, 800.0, 100.0)  # 0.05 x 2,000 records/s of input


def test_backlog_growth_within_the_noise_does_not_veto():
    step = _step(_doc([5.0, 5.0], growth=50.0))  # below 0.05 x 2,000 records/s
    assert step["decision"] == "scale" and step["executors"]["proposed"] < 8
    assert PlanReason.SCALE_DOWN_VETOED not in _codes(step)


def test_a_persistent_overrun_inside_the_band_scales_up_with_its_code():
    step = _step(_doc(OVERRUN, busy=240.0))
    assert step["decision"] == "scale"
    assert PlanReason.WITHIN_BAND not in _codes(step)
    overrun = _reason(step, PlanReason.BATCH_OVERRUN)
    assert overrun["data"] == {"ratio": 1.038, "min_ratio": 1.02, "batches": 4, "trigger_interval_s": 10.0,
                               "batch_duration_s": 10.375}
    # ceil(8 cores x R 1.038 / target 0.7) = 12: R brought to the target, linearly.
    assert step["executors"]["proposed"] == 12
    ((_, plan),) = run_scenario(parse(_doc(OVERRUN, busy=240.0)))
    assert plan.predicted_utilization >= 0.4  # the model's prediction stays inside the band [0.4, 1.0]


def test_an_overrun_that_one_more_core_would_leave_below_the_band_is_not_a_trigger():
    """The model's load is inside the band, but 9 cores would put it below: the long batches are the
    processing-time trigger's regime (each covers the data since the last), not a lack of cores."""
    step = _step(_doc(OVERRUN, busy=120.0))
    assert PlanReason.BATCH_OVERRUN not in _codes(step)
    assert step["executors"]["proposed"] == 8


def test_one_long_batch_is_not_a_persistent_overrun():
    step = _step(_doc([10.6, 9.0, 9.2], busy=120.0, growth=0.0))
    assert PlanReason.BATCH_OVERRUN not in _codes(step)
    assert step["executors"]["proposed"] == 8


_SOURCE_RATE = st.floats(100.0, 50_000.0)


@settings(max_examples=150, deadline=None)
@given(records=_SOURCE_RATE, growth_share=st.floats(0.06, 2.0), busy=st.floats(1.0, 1000.0),
       skew=st.floats(1.0, 4.0), ratios=st.lists(st.floats(0.9, 3.0), min_size=1, max_size=8),
       executors=st.integers(1, 16), tasks=st.integers(1, 64), overhead=st.floats(0.0, 2.0))
@example(records=1000.0, growth_share=0.5, busy=50.0, skew=1.0, ratios=[1.02, 1.06], executors=8, tasks=8,
         overhead=0.0)
def test_an_overrunning_window_with_a_growing_backlog_never_plans_fewer(records, growth_share, busy, skew, ratios,
                                                                        executors, tasks, overhead):
    """Any window with R >= 0.9 and a backlog growing beyond the noise: no fewer executors, no stage
    on fewer task slots ``min(tasks, cores)`` (nor fewer tasks when it has no more than the cores),
    whatever the model's load says."""
    topology = Topology((Vertex("src", tasks, source=True), Vertex("agg", tasks)), (Edge("src", "agg"),))
    metrics = {
        "src": VertexMetrics(records, records, 20.0, backlog=records * 10, backlog_growth_per_s=growth_share * records,
                             batch_overhead_s=overhead),
        "agg": VertexMetrics(records, records / 10, busy, busy_time_max_ms_per_s=min(1000.0, busy * skew),
                             batch_overhead_s=overhead)}
    cluster = ClusterState(executors=executors, min_executors=1, max_executors=16, trigger_interval_s=10.0)
    plan = plan_micro_batch(topology, metrics, cluster, Policy(scale_down_interval_s=0),
                            batch_durations_s=[10.0 * r for r in ratios])
    assert plan.executors_proposed >= executors
    cores = plan.executors_proposed
    assert all(min(vp.proposed, cores) >= min(vp.current, executors) for vp in plan.vertices)
    assert all(vp.proposed >= vp.current for vp in plan.vertices if vp.current <= executors)


def test_without_an_executors_knob_the_cores_stay_and_the_plan_says_so():
    """1 core, far too little for the load: the plan keeps 1 core, predicts for it, and says it
    cannot keep up without a cores knob."""
    text = _doc([30.0, 31.0], busy=450.0, executors=1, adjustable=False)
    step = _step(text)
    assert step["executors"]["current"] == step["executors"]["proposed"] == 1
    limit = next(item for item in step["executors"]["limits"] if item["code"] == Limit.CORES_NOT_ADJUSTABLE)
    assert limit["data"]["cores"] == 1 and limit["data"]["cores_needed"] > 1
    assert limit["data"]["predicted_utilization"] > 1.0
    assert Limit.MAX_EXECUTORS not in [item["code"] for item in step["executors"]["limits"]]
    assert Limit.CORES_NOT_ADJUSTABLE in _codes(step)
    catch_up = next(item for item in step["executors"]["limits"] if item["code"] == Limit.CATCH_UP_UNREACHABLE)
    assert catch_up["data"]["cores_max"] == 1


@settings(max_examples=100, deadline=None)
@given(records=_SOURCE_RATE, busy=st.floats(1.0, 1000.0), executors=st.integers(1, 16),
       ratios=st.lists(st.floats(0.1, 3.0), max_size=6), growth=st.floats(-1000.0, 1000.0))
def test_without_an_executors_knob_no_plan_changes_the_cores(records, busy, executors, ratios, growth):
    topology = Topology((Vertex("src", 4, source=True), Vertex("agg", 4)), (Edge("src", "agg"),))
    metrics = {"src": VertexMetrics(records, records, 20.0, backlog=1000.0, backlog_growth_per_s=growth),
               "agg": VertexMetrics(records, records, busy)}
    cluster = ClusterState(executors=executors, max_executors=16, trigger_interval_s=10.0, executors_adjustable=False)
    plan = plan_micro_batch(topology, metrics, cluster, Policy(scale_down_interval_s=0),
                            batch_durations_s=[10.0 * r for r in ratios])
    assert plan.executors_proposed == executors
    assert plan.predicted_utilization == plan.utilization_now or plan.changes


def test_no_algorithm_plans_cores_a_pipeline_without_an_executors_knob_cannot_set():
    """batch-ratio (SPARK-12133) would add executors at R 3; min-increase would take the new ones."""
    for algorithm in ("batch-ratio", "min-increase", "ds2"):
        text = json.loads(_doc([30.0, 31.0], busy=450.0, executors=1, adjustable=False,
                               policy={"algorithm": algorithm}))
        text["cluster"]["available_executors"] = 8
        step = _step(json.dumps(text))
        assert step["executors"]["proposed"] == 1, algorithm


def test_the_new_codes_have_their_own_words_for_the_data_the_planner_gives():
    """Each new code renders from its data (not ``reason_text``'s fallback of code and JSON data)."""
    steps = [_step(_doc(OVERRUN)), _step(_doc([5.0, 5.0])), _step(_doc(OVERRUN, busy=240.0)),
             _step(_doc([30.0, 31.0], busy=450.0, executors=1, adjustable=False))]
    seen = {}
    for step in steps:
        for reason in step["reasons"]:
            seen.setdefault(reason["code"], []).append(reason["text"])
    assert {PlanReason.SCALE_DOWN_VETOED, PlanReason.BATCH_OVERRUN, Limit.CORES_NOT_ADJUSTABLE} <= set(seen)
    for code in (PlanReason.SCALE_DOWN_VETOED, PlanReason.BATCH_OVERRUN, Limit.CORES_NOT_ADJUSTABLE):
        assert all(text and '{"' not in text for text in seen[code]), seen[code]
    assert len(set(seen[PlanReason.SCALE_DOWN_VETOED])) == 2  # one sentence per signal
