"""The plan's JSON form: ``JobPlan.to_json`` / ``from_json`` round trip, the old unversioned shape
stored before reasons were codes (fixtures captured from that code in tests/fixtures/plans), and
malformed input as ``PlanFormatError``."""

import json
import math
import re
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scaling.planner.continuous import plan_job
from scaling.planner.microbatch import plan_micro_batch
from scaling.policy.policy import Policy
from scaling.values.metrics import ClusterState
from scaling.values.plan import PLAN_FORMAT, JobPlan
from scaling.values.reasons import Limit, PlanFormatError, PlanReason, Reason, VertexReason
from scaling.values.state import ScalerState
from scaling.words.reason_text import reason_text
from tests.capture_paths import FIXTURES
from tests.scaling.factories import three_stages
from tests.scaling.scenario.test_scenario import SCENARIO_INPUT

PLANS = FIXTURES / "plans"


def _plans() -> dict[str, JobPlan]:
    from scaling.scenario.format import parse

    pinned = three_stages(pinned_second=True)
    even = three_stages(pinned_second=False)
    scenario = parse(json.dumps(SCENARIO_INPUT))
    return {
        # The stored v1 plan predates the diminishing-returns rule: compare with the rule off.
        "pinned": plan_micro_batch(*pinned, ClusterState(executors=1, trigger_interval_s=1.0),
                                   Policy(restart_time_s=0, scale_up_min_efficiency=0)),
        "held": plan_micro_batch(*even, ClusterState(executors=8, trigger_interval_s=1.0),
                                 Policy(restart_time_s=0, scale_down_interval_s=600, utilization_target=0.9),
                                 state=ScalerState(), now_s=0),
        "activation": plan_micro_batch(*even, ClusterState(executors=1, trigger_interval_s=1.0),
                                       Policy(restart_time_s=0, activation_evaluations=2), state=ScalerState()),
        "continuous": plan_job(scenario.topology, scenario.steps[0].metrics, scenario.policy),
        "excluded": plan_job(scenario.topology, scenario.steps[0].metrics,
                             replace(scenario.policy, excluded_periods=("00:00-06:00",)), now_s=3600),
    }


@pytest.mark.parametrize("name", ["pinned", "held", "activation", "continuous", "excluded"])
def test_a_plan_reads_back_as_it_was_written(name):
    plan = _plans()[name]
    data = json.loads(json.dumps(plan.to_json()))
    assert data["format"] == PLAN_FORMAT and "next_state" not in data
    again = JobPlan.from_json(data)
    assert again.to_json() == data
    assert [r.code for r in again.reasons] == [r.code for r in plan.reasons]
    assert [reason_text(r) for r in again.reasons] == [reason_text(r) for r in plan.reasons]
    assert [v.reason.code if v.reason else None for v in again.vertices] == [
        v.reason.code if v.reason else None for v in plan.vertices]
    assert (again.held, again.awaiting_activation, [item.code for item in again.limits]) == (
        plan.held, plan.awaiting_activation, [item.code for item in plan.limits])


def test_the_json_rounds_to_3_decimals_and_writes_infinity_as_a_string():
    data = _plans()["pinned"].to_json()
    assert data["load"] == round(2.75 / 0.9, 3)
    limit = next(item for item in data["limits"] if item["code"] == "pinned-stage")
    assert limit["vertex_id"] == "enrich" and limit["data"]["fill"] == round(2 / 2 / 0.9, 3)
    reason = Reason(Limit.CATCH_UP_UNREACHABLE, None,
                    {"catch_up_s": math.inf, "cores_max": 4, "catch_up_duration_s": 1800})
    assert reason.to_json()["data"]["catch_up_s"] == "inf"
    assert Reason.from_json(reason.to_json()) == reason


def test_the_api_s_form_writes_an_infinite_number_as_null_and_keeps_the_finite_ones():
    """``infinity_as_null``: beside an infinite figure (null), a finite one stays a number, in a reason, a
    finding's data and a plan's stage, limit and reason."""
    reason = Reason(Limit.CATCH_UP_UNREACHABLE, None,
                    {"catch_up_s": math.inf, "back": -math.inf, "cores_max": 4, "catch_up_duration_s": 1800.5})
    assert reason.to_json(infinity_as_null=True)["data"] == {
        "catch_up_s": None, "back": None, "cores_max": 4, "catch_up_duration_s": 1800.5}
    plan = _plans()["pinned"]
    first = plan.vertices[0]
    plan = replace(plan, vertices=(replace(first, true_processing_rate=math.inf), *plan.vertices[1:]),
                   reasons=(*plan.reasons, reason))
    stored, api = plan.to_json(), plan.to_json(infinity_as_null=True)
    assert stored["vertices"][0]["true_processing_rate"] == "inf"
    assert api["vertices"][0]["true_processing_rate"] is None
    assert api["vertices"][1]["true_processing_rate"] == stored["vertices"][1]["true_processing_rate"] > 0
    assert api["reasons"][-1]["data"] == {"catch_up_s": None, "back": None, "cores_max": 4,
                                          "catch_up_duration_s": 1800.5}
    assert api["limits"] == stored["limits"] and api["load"] == stored["load"]  # all finite
    assert JobPlan.from_json(stored).vertices[0].true_processing_rate == math.inf


def test_the_excluded_period_wraps_the_vertex_reason_it_holds_back():
    plan = _plans()["excluded"]
    agg = plan.vertex("agg").reason
    assert (agg.code, agg.data["period"], agg.data["current"], agg.data["computed"]) == (
        VertexReason.NOT_EXECUTABLE, "00:00-06:00", 4, 8)
    assert agg.cause == Reason(VertexReason.ALIGNED, "agg", {"from": 7, "to": 8, "n": 720, "unit": "key groups"})
    assert JobPlan.from_json(plan.to_json()).vertex("agg").reason.cause == agg.cause
    assert Reason(PlanReason.EXCLUDED_PERIOD, None, {"period": "00:00-06:00"}) in plan.reasons


@pytest.mark.parametrize("name", ["micro-batch-pinned", "micro-batch-held", "micro-batch-activation",
                                  "continuous-scale"])
def test_a_plan_stored_in_the_old_shape_reads_with_its_sentences(name):
    stored = json.loads((PLANS / f"v1-{name}.json").read_text())
    plan = JobPlan.from_json(stored)
    assert [reason_text(r) for r in plan.reasons] == stored["reasons"]
    assert all(r.code == PlanReason.LEGACY_TEXT for r in plan.reasons)
    for vertex, old in zip(plan.vertices, stored["vertices"], strict=True):
        expected = (old["vertex_id"], old["current"], old["proposed"])
        assert (vertex.vertex_id, vertex.current, vertex.proposed) == expected
        assert (reason_text(vertex.reason) if vertex.reason else "") == old["note"]
    assert (plan.decision, plan.executors_proposed, plan.mode) == (
        stored["decision"], stored["executors_proposed"], stored["mode"])
    assert [h.as_json() for h in plan.held] == stored["held"]
    assert [item.as_json() for item in plan.limits] == stored["limits"]
    assert plan.to_json()["format"] == PLAN_FORMAT


#: The words of the band reasons when the v1 plans were stored, before the planner's load was named the
#: needed utilization and its work stopped reading as a second "cores needed".
V1_BAND_WORDS = {
    PlanReason.LOAD_ABOVE_BAND: lambda d: (
        f"load {d['load']:.2f} above the utilization band [{d['low']}, {d['high']}]: the job needs "
        f"{d['need']:.2f} busy cores per second for its target and catch-up rate on {d['cores']} "
        f"core{'s' if d['cores'] != 1 else ''} ({d['overhead']:.0%} batch overhead)"),
    PlanReason.LOAD_BELOW_BAND: lambda d: (
        f"load {d['load']:.2f} below the utilization band [{d['low']}, {d['high']}]: {d['need']:.2f} busy cores "
        f"per second needed on {d['cores']} core{'s' if d['cores'] != 1 else ''}"),
}


def test_the_old_shape_matches_what_the_planner_says_now_in_codes():
    """The stored v1 plans and today's planner on the same inputs: same decisions, numbers and words, the
    band reasons in the words they had then (``V1_BAND_WORDS``)."""
    now = _plans()
    for stored_name, name in (("micro-batch-pinned", "pinned"), ("micro-batch-held", "held"),
                              ("micro-batch-activation", "activation"), ("continuous-scale", "continuous")):
        stored = json.loads((PLANS / f"v1-{stored_name}.json").read_text())
        assert [V1_BAND_WORDS[r.code](r.data) if r.code in V1_BAND_WORDS else reason_text(r)
                for r in now[name].reasons] == stored["reasons"]
        assert [reason_text(v.reason) if v.reason else "" for v in now[name].vertices] == [
            v["note"] for v in stored["vertices"]]


def test_missing_keys_take_their_defaults():
    plan = JobPlan.from_json({"decision": "no-change", "reasons": [], "vertices": [
        {"vertex_id": "v", "current": 2, "proposed": 2}]})
    assert plan.vertex("v").scale_down_threshold == math.inf and plan.vertex("v").reason is None
    assert (plan.mode, plan.executable, plan.held, plan.limits) == ("micro-batch", True, (), ())
    assert JobPlan.from_json({"format": 2}).decision == "no-change"


@pytest.mark.parametrize(("data", "field"), [
    ([], "plan"),
    ({"format": 3}, "format"),
    ({"decision": "maybe"}, "decision"),
    ({"format": 2, "reasons": ["a sentence"]}, "reasons[0]"),
    ({"format": 2, "reasons": [{"code": "no-such-code"}]}, "reasons[0].code"),
    ({"format": 2, "reasons": [{"code": "within-band", "data": {"load": [1]}}]}, "reasons[0].data.load"),
    ({"reasons": [1]}, "reasons[0]"),
    ({"vertices": [{"vertex_id": "v", "current": "2", "proposed": 2}]}, "vertices[0].current"),
    ({"vertices": [{"vertex_id": "v", "proposed": 2}]}, "vertices[0].current"),
    ({"limits": [{"code": "within-band"}]}, "limits[0].code"),
    ({"held": [{"vertex_id": "v"}]}, "held[0].current"),
    ({"awaiting_activation": {"direction": "sideways", "count": 1, "required": 2}}, "awaiting_activation.direction"),
    ({"load": True}, "load"),
    ({"mode": "batch"}, "mode"),
])
def test_malformed_plans_raise_plan_format_error_naming_the_field(data, field):
    with pytest.raises(PlanFormatError, match=f"^{re.escape(field)}"):
        JobPlan.from_json(data)


def test_codes_are_distinct_across_the_three_enums():
    values = [str(m) for enum in (PlanReason, VertexReason, Limit) for m in enum]
    assert len(values) == len(set(values))


def test_every_code_has_words():
    for enum in (PlanReason, VertexReason, Limit):
        for code in enum:
            text = reason_text(Reason(code, "v", {}))
            assert text and isinstance(text, str)


json_value = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=5)),
                          lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                                      max_size=3), max_leaves=10)
plan_keys = st.sampled_from(["format", "decision", "reasons", "vertices", "held", "limits", "awaiting_activation",
                             "load", "mode", "executors_current", "executable", "vertex_id", "current", "proposed",
                             "code", "data", "note", "direction", "count", "required", "target", "due_s"])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_fuzzed_plans_read_or_raise_plan_format_error(data):
    """Arbitrary JSON, and stored plans with values replaced at random: a plan or ``PlanFormatError``."""
    base = data.draw(st.sampled_from([_FIXTURE_DOCS[k] for k in sorted(_FIXTURE_DOCS)]))
    doc = json.loads(json.dumps(base))
    for _ in range(data.draw(st.integers(0, 4))):
        target = doc
        path = data.draw(st.lists(plan_keys | st.integers(0, 3), max_size=3))
        for step in path:
            child = target.get(step) if isinstance(target, dict) else (
                target[step] if isinstance(target, list) and isinstance(step, int) and step < len(target) else None)
            if not isinstance(child, (dict, list)):
                break
            target = child
        if isinstance(target, dict):
            target[data.draw(plan_keys)] = data.draw(json_value)
        elif isinstance(target, list) and target:
            target[data.draw(st.integers(0, len(target) - 1))] = data.draw(json_value)
    if data.draw(st.booleans()) and data.draw(st.integers(0, 9)) == 0:
        doc = data.draw(json_value)
    try:
        plan = JobPlan.from_json(doc)
    except PlanFormatError:
        return
    [reason_text(r) for r in plan.reasons]
    [reason_text(v.reason) for v in plan.vertices if v.reason is not None]
    assert JobPlan.from_json(plan.to_json()).to_json() == plan.to_json()


_FIXTURE_DOCS = {p.name: json.loads(p.read_text()) for p in PLANS.glob("v1-*.json")}
_FIXTURE_DOCS.update({f"v2-{k}": v.to_json() for k, v in _plans().items()})
