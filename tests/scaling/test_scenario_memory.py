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
                                        "overhead": 0.2, "executors": 4, "saves_mb": 4 * 6976, "changes": True}


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
    ([1], "steps[0].memory"),
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
