"""A scenario step's ``memory``: the output gives the pressure flag and the heap recommendation at
the option defaults, a plan under pressure goes through the memory gate (no scale-down), and a bad
figure is a one-line error naming its field."""

import copy
import json
import math

import pytest

from scaling.scenario.format import evaluate_text
from scaling.scenario.values import ScenarioError

METRICS = {"src": {"records_in_per_s": 100, "records_out_per_s": 100, "busy_time_ms_per_s": 100}}


def doc(memory=None, *, mode="micro-batch", scale_down_interval_s=0):
    step = {"metrics": copy.deepcopy(METRICS)}
    if memory is not None:
        step["memory"] = memory
    out = {"format": 1, "mode": mode, "policy": {"scale_down_interval_s": scale_down_interval_s},
           "vertices": [{"id": "src", "parallelism": 4, "source": True}], "steps": [step]}
    if mode == "micro-batch":
        out.update(cluster={"executors": 4, "max_executors": 8}, trigger_interval_s=10)
    return out


def first_step(document):
    return evaluate_text(json.dumps(document))["steps"][0]


def test_an_over_provisioned_heap_gets_a_smaller_recommendation_and_no_pressure():
    """8 GB with a 1,000 MB peak: peak x 1.2 rounded up to 64 MB, 6,976 MB saved on each of 4 executors."""
    memory = first_step(doc({"heap_max_mb": 8192, "heap_peak_mb": 1000, "gc_share": 0.02, "state_mb": 300}))["memory"]
    assert memory["pressure"] is None
    assert memory["heap_usage"] == round(1000 / 8192, 3) and memory["state_mb"] == 300
    assert memory["recommendation"] == {"kind": "heap", "current_mb": 8192, "recommended_mb": 1216, "peak_mb": 1000,
                                        "overhead": 0.2, "executors": 4, "saves_mb": 4 * 6976}


def test_gc_above_the_threshold_is_pressure_and_the_heap_grows_by_the_pressure_growth():
    memory = first_step(doc({"heap_max_mb": 512, "heap_peak_mb": 507, "gc_share": 0.35}))["memory"]
    assert memory["pressure"]["code"] == "memory-pressure" and memory["pressure"]["data"]["signal"] == "gc"
    assert memory["recommendation"]["recommended_mb"] == 1024  # max(507 x 1.2, 512 x 2)


def test_under_pressure_the_scale_down_is_blocked_and_without_it_it_goes_ahead():
    """The same window: a scale-down of executors and partitions (load 0.1) without memory, held under
    memory pressure with ``memory-pressure`` the first reason."""
    free = first_step(doc())
    assert free["decision"] == "scale" and free["executors"]["proposed"] < 4
    assert "memory" not in free
    held = first_step(doc({"heap_max_mb": 512, "heap_peak_mb": 507, "gc_share": 0.35}))
    assert held["decision"] == "blocked" and held["reasons"][0]["code"] == "memory-pressure"
    assert held["executors"]["proposed"] == 4 and held["vertices"]["src"]["proposed"] == 4
    calm = first_step(doc({"heap_max_mb": 512, "heap_peak_mb": 300, "gc_share": 0.05}))
    assert calm["decision"] == "scale" and calm["memory"]["pressure"] is None


def test_without_a_peak_there_is_no_recommendation():
    assert first_step(doc({"heap_max_mb": 1024, "gc_share": 0.1}))["memory"]["recommendation"] is None


@pytest.mark.parametrize(("memory", "field"), [
    ("x", "steps[0].memory"),
    ([], "steps[0].memory"),
    ([1], "steps[0].memory[0]"),
    ({"heap_max_mb": 1024, "executors": 1.5}, "steps[0].memory.executors"),
    ({"heap_max_mb": 0}, "steps[0].memory.heap_max_mb"),
    ({"heap_max_mb": -1}, "steps[0].memory.heap_max_mb"),
    ({"heap_max_mb": math.inf}, "steps[0].memory.heap_max_mb"),
    ({"heap_max_mb": 1024, "heap_peak_mb": "x"}, "steps[0].memory.heap_peak_mb"),
    ({"heap_max_mb": 1024, "gc_share": 1.5}, "steps[0].memory.gc_share"),
    ({"heap_max_mb": 1024, "gc_share": True}, "steps[0].memory.gc_share"),
    ({"heap_max_mb": 1024, "state_mb": -3}, "steps[0].memory.state_mb"),
    ({"heap_peak_mb": 100}, "steps[0].memory.heap_max_mb"),
    ({"heap_max_mb": 1024, "rss_mb": 3}, "steps[0].memory.rss_mb"),
])
def test_a_bad_memory_figure_is_an_error_naming_its_field(memory, field):
    with pytest.raises(ScenarioError) as error:
        evaluate_text(json.dumps(doc(memory)))
    assert str(error.value).startswith(f"{field}: ") and "\n" not in str(error.value)


def test_memory_is_only_in_micro_batch_mode():
    with pytest.raises(ScenarioError, match=r"^steps\[0\]\.memory: only in micro-batch mode"):
        evaluate_text(json.dumps(doc({"heap_max_mb": 1024}, mode="continuous")))


def test_the_window_is_its_readings_the_newest_gc_share_and_the_highest_peak():
    """A list of readings is the window: the newest GC share (0.05: calm), the highest peak (900 MB of
    8,192), recommended 900 x 1.2 = 1,088 MB."""
    memory = first_step(doc([{"heap_max_mb": 8192, "heap_peak_mb": 900, "gc_share": 0.5},
                             {"heap_max_mb": 8192, "heap_peak_mb": 400, "gc_share": 0.05}]))["memory"]
    assert memory["pressure"] is None and memory["gc_share"] == 0.05 and memory["heap_peak_mb"] == 900
    assert memory["recommendation"]["recommended_mb"] == 1088


def with_heap_knob(document, *, apply, running_mb=512, **options):
    document["memory"] = {"memory_apply": apply, **options,
                          "knobs": [{"kind": "heap", "name": "heap", "running_mb": running_mb, "min_mb": 512,
                                     "max_mb": 8192}]}
    return document


def test_under_pressure_a_heap_knob_grows_alone_only_with_memory_apply():
    """The live loop's rule: under pressure the heap changes on its own only with ``memory_apply``;
    recommend-only otherwise (the plan stays ``blocked`` and names the step)."""
    pressed = {"heap_max_mb": 512, "heap_peak_mb": 507, "gc_share": 0.35}
    applied = evaluate_text(json.dumps(with_heap_knob(doc(pressed), apply=True)))["steps"][0]
    assert applied["decision"] == "scale" and [r["code"] for r in applied["reasons"]][-1] == "memory-resize"
    resize = applied["reasons"][-1]["data"]
    assert resize["recommended_mb"] == 1024 and resize["step"] == "alone"
    only = evaluate_text(json.dumps(with_heap_knob(doc(pressed), apply=False)))["steps"][0]
    assert only["decision"] == "blocked" and "memory-resize" not in [r["code"] for r in only["reasons"]]


def test_the_next_step_runs_the_heap_the_plan_applied():
    """After a heap change the knob runs the new size: the same pressure grows it from 1,024 to 2,048."""
    pressed = {"heap_max_mb": 512, "heap_peak_mb": 507, "gc_share": 0.35}
    document = with_heap_knob(doc(pressed), apply=True)
    document["steps"].append({**copy.deepcopy(document["steps"][0]), "at_s": 60,
                              "memory": {"heap_max_mb": 1024, "heap_peak_mb": 1020, "gc_share": 0.35}})
    steps = evaluate_text(json.dumps(document))["steps"]
    assert [s["reasons"][-1]["data"]["current_mb"] for s in steps] == [512, 1024]
    assert [s["reasons"][-1]["data"]["recommended_mb"] for s in steps] == [1024, 2048]


@pytest.mark.parametrize(("memory", "field"), [
    ({"memory_apply": "yes"}, "memory"),
    ({"memory_gc_pressure_threshold": 2}, "memory"),
    ({"rss": 1}, "memory.rss"),
    ({"knobs": {}}, "memory.knobs"),
    ({"knobs": [{"kind": "heap", "name": "h", "running_mb": 512, "min_mb": 512}]}, "memory.knobs[0].max_mb"),
    ({"knobs": [{"kind": "disk", "name": "h", "running_mb": 512, "min_mb": 512, "max_mb": 600}]},
     "memory.knobs[0].kind"),
    ({"knobs": [{"kind": "heap", "name": "h", "running_mb": 512, "min_mb": 700, "max_mb": 600}]},
     "memory.knobs[0].min_mb"),
    ({"knobs": [{"kind": "heap", "name": "h", "running_mb": 512, "min_mb": 512, "max_mb": 600}] * 2},
     "memory.knobs"),
])
def test_a_bad_document_memory_is_an_error_naming_its_field(memory, field):
    document = doc({"heap_max_mb": 1024})
    document["memory"] = memory
    with pytest.raises(ScenarioError) as error:
        evaluate_text(json.dumps(document))
    assert str(error.value).startswith(f"{field}") and "\n" not in str(error.value)


def test_a_not_ready_sample_keeps_the_scale_down_and_is_named():
    """``not_ready`` (the live loop's sample issues, as codes with data): the DS2 micro-batch plan
    never scales down on it, and the plan names each code."""
    document = doc()
    document["steps"][0]["not_ready"] = [{"code": "first-batch", "data": {}}]
    step = first_step(document)
    assert step["executors"]["proposed"] == 4
    assert "samples-not-ready" in [r["code"] for r in step["reasons"]]
    document["steps"][0]["not_ready"] = [{"code": "no-such-code"}]
    with pytest.raises(ScenarioError, match=r"^steps\[0\]\.not_ready: "):
        evaluate_text(json.dumps(document))
