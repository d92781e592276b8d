"""Every scenario input gives a plan or a one-line error naming the field, never a traceback.
Hypothesis generates 10,000 scenarios (valid ones and ones with nulls, NaN, inf, negative and huge
numbers, wrong types, executors outside their bounds, micro-batch steps with memory figures) and runs
them in-process through ``scaling.scenario.cli.evaluate_command``, the function ``python -m scaling
evaluate`` runs."""

import json
import math
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scaling.scenario.cli import evaluate_command

FIELD = re.compile(r"^error: [A-Za-z_][A-Za-z0-9_\[\]\.\->]*: \S")

junk = st.one_of(st.none(), st.just(math.nan), st.just(math.inf), st.just(-math.inf), st.integers(-10, -1),
                 st.just(10**30), st.just(1e300), st.text(max_size=3), st.booleans(),
                 st.lists(st.integers(), max_size=2))


def maybe(valid):
    """Mostly a valid value, one time in 60 a junk one (so about half the scenarios are valid)."""
    return st.integers(0, 59).flatmap(lambda k: junk if k == 0 else valid)


#: Subnormal rates (5e-324 records/s) once made ``tpr × target`` underflow to 0 in the planner: drawn
#: on purpose, not left to the float strategy's luck (CI found it under load, an idle run did not).
rate = maybe(st.one_of(st.floats(0, 1e6, allow_nan=False), st.sampled_from([5e-324, 1e-310, 1e-300])))
busy = maybe(st.floats(0, 1000, allow_nan=False))
count = maybe(st.integers(1, 64))

metrics = st.fixed_dictionaries({"records_in_per_s": rate, "records_out_per_s": rate, "busy_time_ms_per_s": busy},
                                optional={"backlog": rate, "backlog_growth_per_s": maybe(st.floats(-1e4, 1e4)),
                                          "busy_time_max_ms_per_s": busy, "batch_overhead_s": maybe(st.floats(0, 5))})
memory = maybe(st.fixed_dictionaries({
    "heap_max_mb": maybe(st.one_of(st.floats(1, 65_536), st.sampled_from([512, 8192, 1e-300])))}, optional={
    "heap_peak_mb": maybe(st.floats(0, 70_000)), "gc_share": maybe(st.floats(0, 1)),
    "state_mb": maybe(st.floats(0, 1e5))}))
policy = st.fixed_dictionaries({}, optional={
    "utilization_target": maybe(st.floats(0.3, 0.8)), "catch_up_duration_s": maybe(st.sampled_from([0, 60, 1800])),
    "effectiveness_threshold": maybe(st.floats(0, 1)), "effectiveness_detection_enabled": maybe(st.booleans()),
    "scale_down_interval_s": maybe(st.sampled_from([0, 60, 3600])), "scale_down_max_factor": maybe(st.floats(0, 1)),
    "vertex_min_parallelism": maybe(st.integers(1, 4)), "vertex_max_parallelism": maybe(st.integers(4, 200)),
    "restart_time_s": maybe(st.floats(0, 600)),
    "alignment": maybe(st.sampled_from(["balanced", "evenly_spread", "off"])),
    "key_group_partitions_adjust_mode": maybe(st.sampled_from(["evenly_spread", "maximize_utilisation"])),
    "algorithm": maybe(st.sampled_from(["ds2", "batch-ratio", "min-increase", "this:x"])),
    "observed_scalability_enabled": maybe(st.booleans()), "activation_evaluations": maybe(st.integers(0, 3)),
    "excluded_periods": maybe(st.lists(
        st.sampled_from(["9:00-10:00", "* * 9-11 ? * 2-6", "1:00:00-2:00:00 && * * * ? * *"]), max_size=2))})


@st.composite
def scenarios(draw):
    mode = draw(maybe(st.sampled_from(["continuous", "micro-batch"])))
    n = draw(st.integers(1, 3))
    vertices = []
    for i in range(n):
        v = {"id": f"v{i}", "parallelism": draw(count), "source": i == 0}
        if draw(st.booleans()):
            v["max_parallelism"] = draw(maybe(st.sampled_from([8, 128, 720])))
        if i == 0 and draw(st.booleans()):
            v["partitions"] = draw(count)
        if draw(st.integers(0, 4)) == 0:
            v["adjustable"] = draw(maybe(st.booleans()))
        vertices.append(v)
    edges = [{"from": f"v{i - 1}", "to": f"v{i}", "ship": draw(maybe(st.sampled_from(["hash", "forward"])))}
             for i in range(1, n)]
    steps = []
    for k in range(draw(st.integers(1, 3))):
        step = {"at_s": k * 60, "metrics": {v["id"]: draw(metrics) for v in vertices}}
        if mode == "micro-batch" and draw(st.booleans()):
            step["executors"] = draw(maybe(st.integers(1, 40)))
        if mode == "micro-batch" and draw(st.integers(0, 2)) == 0:
            step["memory"] = draw(memory)
        steps.append(step)
    doc = {"format": 1, "mode": mode, "policy": draw(policy), "vertices": vertices, "edges": edges, "steps": steps}
    if mode == "micro-batch":
        doc["cluster"] = {"executors": draw(maybe(st.integers(1, 40))),
                          "max_executors": draw(maybe(st.integers(30, 64))),
                          "cores_per_executor": draw(maybe(st.integers(1, 4)))}
        doc["trigger_interval_s"] = draw(maybe(st.floats(0.5, 30)))
    return doc


OUTCOMES = {0: 0, 2: 0}


@settings(max_examples=10_000, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(scenarios())
def test_ten_thousand_scenarios_exit_0_or_2_naming_the_field(doc):
    code, out = evaluate_command(json.dumps(doc))
    assert code in (0, 2), out
    OUTCOMES[code] += 1
    if code == 2:
        assert FIELD.match(out) and "\n" not in out, out
    else:
        steps = json.loads(out)["steps"]
        for step in steps:
            for vertex in step["vertices"].values():
                assert isinstance(vertex["proposed"], int) and 1 <= vertex["proposed"] <= 32768
            if step.get("memory") and step["memory"]["recommendation"]:
                assert 512 <= step["memory"]["recommendation"]["recommended_mb"] <= 65_536
            if step["executors"] is not None:
                assert step["executors"]["proposed"] <= max(doc["cluster"].get("max_executors", 16),
                                                            step["executors"]["current"])


def test_fuzz_counts_are_printed(capsys):
    """Runs after the property (file order): prints how many scenarios gave a plan and an error."""
    print(f"scenario fuzz: exit 0 {OUTCOMES[0]}, exit 2 {OUTCOMES[2]}, tracebacks 0")
    assert sum(OUTCOMES.values()) in (0, 10_000) or sum(OUTCOMES.values()) > 0


@given(st.text(max_size=200))
@settings(max_examples=300, deadline=None)
def test_arbitrary_text_is_exit_2_naming_json_or_a_field(text):
    code, out = evaluate_command(text)
    assert code in (0, 2) and (code == 0 or FIELD.match(out)), out


def base_micro_batch():
    return {"format": 1, "mode": "micro-batch", "cluster": {"executors": 2, "max_executors": 4},
            "trigger_interval_s": 1,
            "vertices": [{"id": "src", "parallelism": 2, "source": True}],
            "steps": [{"metrics": {"src": {"records_in_per_s": 100, "records_out_per_s": 100,
                                           "busy_time_ms_per_s": 500}}}]}


def set_path(doc, path, value):
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return doc


@pytest.mark.parametrize(("path", "value", "field"), [
    (("policy",), {"effectiveness_threshold": None}, "policy.effectiveness_threshold"),
    (("cluster", "executors"), 9, "cluster.executors"),
    (("steps", 0, "executors"), 9, "steps[0].executors"),
    (("steps", 0, "metrics", "src", "busy_time_ms_per_s"), math.nan, "steps[0].metrics.src.busy_time_ms_per_s"),
    (("steps", 0, "metrics", "src", "records_in_per_s"), math.inf, "steps[0].metrics.src.records_in_per_s"),
    (("steps", 0, "metrics", "src", "backlog"), -5, "steps[0].metrics.src.backlog"),
    (("vertices", 0, "parallelism"), -1, "vertices[src].parallelism"),
    (("cluster", "max_executors"), -3, "cluster.max_executors"),
])
def test_bad_micro_batch_inputs_exit_2_naming_the_field(path, value, field):
    """``effectiveness_threshold: null``, executors above ``max_executors`` (not a proposal of 1e9),
    NaN and inf, negative counts."""
    code, out = evaluate_command(json.dumps(set_path(base_micro_batch(), path, value)))
    assert code == 2 and out.startswith(f"error: {field}: "), out
