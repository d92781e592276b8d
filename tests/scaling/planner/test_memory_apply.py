"""Whether a plan changes the heap (``scaling.planner.memory.memory_decision`` and ``with_memory``): recommend-only
by default, alone only under memory pressure, along with another change otherwise, a decrease never under
pressure or on a window that is not ready; and the plan's memory fields survive its JSON."""

from __future__ import annotations

import pytest

from scaling.planner.memory import memory_decision, with_memory
from scaling.values.memory import HeapRecommendation
from scaling.values.plan import JobPlan
from scaling.values.reasons import Decision, MemoryStep, PlanFormatError, PlanReason
from scaling.words.reason_text import reason_text
from tests.scaling.factories import one_vertex_plan

UP = HeapRecommendation(current_mb=1024, recommended_mb=2048, peak_mb=1000.0, overhead=0.2)
DOWN = HeapRecommendation(current_mb=8192, recommended_mb=1216, peak_mb=1000.0, overhead=0.2, executors=2)


@pytest.mark.parametrize(("heap", "current", "apply", "pressure", "ready", "other", "requested", "step", "proposed"), [
    (UP, None, True, True, True, False, False, MemoryStep.NO_KNOB, None),      # no knob: recommend-only
    (UP, 1024, False, True, True, False, False, MemoryStep.RECOMMEND_ONLY, 1024),
    (UP, 1024, False, True, True, True, False, MemoryStep.RECOMMEND_ONLY, 1024),
    (UP, 1024, True, True, True, False, False, MemoryStep.ALONE, 2048),        # pressure: a restart for it alone
    (UP, 1024, True, True, True, True, False, MemoryStep.ALONG, 2048),
    (DOWN, 8192, True, False, True, False, False, MemoryStep.WAITS, 8192),     # no restart for memory alone
    (DOWN, 8192, True, False, True, True, False, MemoryStep.ALONG, 1216),      # it rides along
    (DOWN, 8192, True, False, False, True, False, MemoryStep.HELD, 8192),      # not ready: no decrease
    (DOWN, 8192, True, True, True, True, False, MemoryStep.HELD, 8192),        # pressure: no decrease
    (DOWN, 8192, False, False, True, False, True, MemoryStep.REQUESTED, 1216),  # a person asks, apply off
    (DOWN, 8192, False, True, True, False, True, MemoryStep.HELD, 8192),       # not even a person, under pressure
    (UP, 2048, True, True, True, False, False, MemoryStep.AT_BOUND, 2048),     # the knob's maximum
])
def test_the_plan_changes_the_heap_only_as_the_rules_say(heap, current, apply, pressure, ready, other, requested,
                                                         step, proposed):
    decision = memory_decision(heap, knob="heap_mb" if current else None, current_mb=current, bounds=(512, 2048),
                               apply=apply, under_pressure=pressure, ready=ready, other_changes=other,
                               requested=requested)
    assert (decision.step, decision.proposed_mb) == (step, proposed)
    assert decision.changes == (step in (MemoryStep.ALONE, MemoryStep.ALONG, MemoryStep.REQUESTED))


@pytest.mark.parametrize(("heap", "current", "factor", "step", "proposed"), [
    (DOWN, 8192, 2.0, MemoryStep.ALONG, 4096),   # 8192 → 1216 rides along as 8192 → 4096, the rest later
    (DOWN, 2048, 2.0, MemoryStep.ALONG, 1216),   # within the factor: the whole way
    (UP, 1024, 1.5, MemoryStep.ALONG, 1536),
    (DOWN, 1280, 1.01, MemoryStep.HELD, 1280),   # less than one 64 MB step allowed: held
])
def test_a_heap_that_rides_along_moves_at_most_the_change_factor(heap, current, factor, step, proposed):
    decision = memory_decision(heap, knob="heap_mb", current_mb=current, apply=True, under_pressure=False,
                               other_changes=True, along_factor=factor)
    assert (decision.step, decision.proposed_mb) == (step, proposed)


def test_a_heap_change_alone_makes_a_memory_only_scale_with_its_reason():
    decision = memory_decision(UP, knob="heap_mb", current_mb=1024, apply=True, under_pressure=True)
    plan = with_memory(one_vertex_plan(Decision.BLOCKED), decision)
    assert plan.decision == Decision.SCALE and plan.changes and plan.memory_changes
    assert (plan.memory_current_mb, plan.memory_proposed_mb, plan.memory_step) == (1024, 2048, MemoryStep.ALONE)
    assert plan.vertices[0].proposed == plan.vertices[0].current and plan.executors_proposed == 2
    reason = plan.reasons[-1]
    assert reason.code == PlanReason.MEMORY_RESIZE
    assert {k: reason.data[k] for k in ("current_mb", "recommended_mb", "saves_mb", "under_pressure", "step")} == {
        "current_mb": 1024, "recommended_mb": 2048, "saves_mb": -1024, "under_pressure": 1, "step": "alone"}
    assert "heap of each JVM that runs tasks (heap_mb) 1024 → 2048 MB" in reason_text(reason)
    assert JobPlan.from_json(plan.to_json()) == plan


def test_a_decrease_rides_along_and_says_what_it_saves():
    decision = memory_decision(DOWN, knob="heap_mb", current_mb=8192, apply=True, under_pressure=False,
                               other_changes=True)
    plan = with_memory(one_vertex_plan(Decision.SCALE, proposed=1), decision)
    assert plan.decision == Decision.SCALE and plan.vertices[0].proposed == 1  # the other change stays
    assert plan.reasons[-1].data["saves_mb"] == (8192 - 1216) * 2
    assert "saves 13952 MB" in reason_text(plan.reasons[-1])


def test_a_heap_left_as_it_runs_adds_no_reason_and_no_change():
    decision = memory_decision(DOWN, knob="heap_mb", current_mb=8192, apply=False, under_pressure=False)
    plan = with_memory(one_vertex_plan(), decision)
    assert plan.reasons == () and not plan.changes and plan.decision == Decision.NO_CHANGE
    assert plan.memory_step == MemoryStep.RECOMMEND_ONLY and with_memory(one_vertex_plan(), None) == one_vertex_plan()


def test_a_stored_plan_with_an_unknown_memory_step_or_a_non_integer_heap_is_a_typed_error():
    stored = one_vertex_plan().to_json()
    with pytest.raises(PlanFormatError, match="memory_step"):
        JobPlan.from_json({**stored, "memory_step": "bigger"})
    with pytest.raises(PlanFormatError, match="memory_proposed_mb"):
        JobPlan.from_json({**stored, "memory_proposed_mb": "2g"})
    assert JobPlan.from_json({k: v for k, v in stored.items() if not k.startswith("memory_")}).memory_step is None
