"""The memories beside the heap (``scaling.planner.memory``): the RocksDB state memory a bound can shrink to,
the executors' non-heap overhead, the rule that neither changes alone (the pressure is the heap's),
and their place in a plan (``JobPlan.memory_sizes``) through its JSON."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scaling.planner.memory import (
    STATE_FULL_SHARE,
    memory_decision,
    recommend_heap,
    recommend_overhead,
    recommend_state_memory,
    with_memory,
)
from scaling.values.memory import MB
from scaling.values.plan import JobPlan, MemorySize
from scaling.values.reasons import Decision, MemoryKind, MemoryStep, PlanFormatError, PlanReason
from scaling.words.reason_text import reason_text
from tests.scaling.factories import one_vertex_plan


@pytest.mark.parametrize(("used_mb", "bound_mb", "recommended_mb"), [
    (0, 1024, 64),        # no state store in use: back to the knob's min (Flink gives unused managed memory back)
    (100, 1024, 128),     # 120 MB rounded up to 64 MB steps
    (500, 1024, 640),     # 600 → 640
    (850, 1024, None),    # 1020 MB rounds to the bound itself: keep it
    (1000, 1024, None),   # 97.7 % of the bound: room left, kept
    (1004, 1024, 2048),   # 98 %: full, the state may need more: × memory_pressure_growth
    (3000, 1024, 2048),   # above the bound (no strict limit): full
    (6100, 6144, 8192),   # full, grown to the knob's max
    (8100, 8192, None),   # full at the knob's max: nothing to grow to
    (10, 1024, 128),      # never below the knob's min
])
def test_the_state_memory_shrinks_to_its_use_and_a_full_bound_grows(used_mb, bound_mb, recommended_mb):
    size = recommend_state_memory(used_bytes=used_mb * MB, bound_mb=bound_mb, overhead=0.2, min_mb=64 if used_mb != 10
                                  else 128, max_mb=8192, growth=2.0)
    assert (size.recommended_mb if size else None) == recommended_mb
    if size is not None:
        assert (size.kind, size.current_mb, size.saves_mb) == (MemoryKind.STATE, bound_mb, bound_mb - recommended_mb)


@pytest.mark.parametrize(("nonheap_mb", "state_mb", "current_mb", "recommended_mb"), [
    (200, 0, 384, 384),       # 240 MB: Spark's floor (the knob's min) holds
    (200, 256, 384, 576),     # 456 × 1.2 = 547 → 576: the RocksDB bound it may hold counts
    (300, 2000, 4096, 2816),  # 2300 × 1.2 = 2760 → 2816: saves 1280 MB
    (300, 9000, 4096, 8192),  # at the knob's max
])
def test_the_overhead_covers_the_non_heap_peak_and_the_state_memory(nonheap_mb, state_mb, current_mb, recommended_mb):
    size = recommend_overhead(nonheap_peak_bytes=nonheap_mb * MB, state_bytes=state_mb * MB, current_mb=current_mb,
                              overhead=0.2, min_mb=384, max_mb=8192)
    expected = (MemoryKind.OVERHEAD, recommended_mb, nonheap_mb + state_mb)
    assert (size.kind, size.recommended_mb, size.peak_mb) == expected


@pytest.mark.parametrize("call", [
    lambda: recommend_state_memory(used_bytes=-1, bound_mb=64, overhead=0.2, min_mb=64, max_mb=128, growth=2.0),
    lambda: recommend_state_memory(used_bytes=1, bound_mb=64, overhead=-0.1, min_mb=64, max_mb=128, growth=2.0),
    lambda: recommend_state_memory(used_bytes=1, bound_mb=64, overhead=0.1, min_mb=64, max_mb=128, growth=0.5),
    lambda: recommend_overhead(nonheap_peak_bytes=1, state_bytes=-1, current_mb=384, overhead=0.2, min_mb=384,
                               max_mb=512),
    lambda: recommend_overhead(nonheap_peak_bytes=1, state_bytes=1, current_mb=384, overhead=0.2, min_mb=512,
                               max_mb=384),
])
def test_a_negative_size_or_inverted_bounds_is_refused(call):
    with pytest.raises(ValueError, match="recommend_"):
        call()


@given(used=st.integers(0, 1 << 40), bound=st.integers(64, 1 << 20), overhead=st.floats(0.05, 1),
       low=st.integers(64, 4096), span=st.integers(0, 1 << 20), growth=st.floats(1, 8))
def test_a_state_memory_recommendation_grows_a_full_bound_or_shrinks_to_cover_the_use(used, bound, overhead, low, span,
                                                                                      growth):
    size = recommend_state_memory(used_bytes=used, bound_mb=bound, overhead=overhead, min_mb=low, max_mb=low + span,
                                  growth=growth)
    if size is None:
        return
    assert low <= size.recommended_mb <= low + span
    assert size.recommended_mb % 64 == 0 or size.recommended_mb in (low, low + span)
    if used >= STATE_FULL_SHARE * bound * MB:
        assert size.recommended_mb > bound  # a full bound only grows
    else:
        assert size.recommended_mb < bound
        assert size.recommended_mb * MB >= used * (1 + overhead) or size.recommended_mb == low + span
        # a shrunk bound is not full at the same use: no grow-shrink cycle
        again = recommend_state_memory(used_bytes=used, bound_mb=size.recommended_mb, overhead=overhead, min_mb=low,
                                       max_mb=low + span, growth=growth)
        assert again is None or again.recommended_mb < size.recommended_mb


@given(nonheap=st.integers(0, 1 << 40), state=st.integers(0, 1 << 40), overhead=st.floats(0, 1),
       low=st.integers(384, 4096), span=st.integers(0, 1 << 20))
def test_an_overhead_recommendation_is_within_the_knob_and_covers_the_use(nonheap, state, overhead, low, span):
    size = recommend_overhead(nonheap_peak_bytes=nonheap, state_bytes=state, current_mb=1024, overhead=overhead,
                              min_mb=low, max_mb=low + span)
    assert low <= size.recommended_mb <= low + span
    assert size.recommended_mb * MB >= (nonheap + state) * (1 + overhead) * (1 - 1e-12) \
        or size.recommended_mb == low + span


STATE = recommend_state_memory(used_bytes=100 * MB, bound_mb=1024, overhead=0.2, min_mb=64, max_mb=8192, growth=2.0)
HEAP_UNDER_PRESSURE = recommend_heap(peak_bytes=1000 * MB, max_bytes=1024 * MB, overhead=0.2, min_mb=512,
                                     max_mb=8192, pressure_growth=2.0)


@pytest.mark.parametrize(("other_changes", "under_pressure", "step"), [
    (False, False, MemoryStep.WAITS), (True, False, MemoryStep.ALONG),
    (False, True, MemoryStep.HELD),  # a decrease is never made under memory pressure
])
def test_the_state_memory_moves_only_with_another_change(other_changes, under_pressure, step):
    decision = memory_decision(STATE, knob="state_mb", current_mb=1024, bounds=(64, 8192), apply=True,
                               under_pressure=under_pressure, other_changes=other_changes)
    assert decision.step == step


def test_only_the_heap_changes_alone_under_pressure():
    grown = recommend_overhead(nonheap_peak_bytes=900 * MB, state_bytes=0, current_mb=512, overhead=0.2, min_mb=384,
                               max_mb=8192)
    assert memory_decision(grown, knob="overhead_mb", current_mb=512, apply=True, under_pressure=True).step == \
        MemoryStep.WAITS
    assert memory_decision(HEAP_UNDER_PRESSURE, knob="heap_mb", current_mb=1024, apply=True,
                           under_pressure=True).step == MemoryStep.ALONE


def test_a_state_memory_change_rides_in_the_plan_and_its_json():
    decision = memory_decision(STATE, knob="state_mb", current_mb=1024, bounds=(64, 8192), apply=True,
                               under_pressure=False, other_changes=True)
    plan = with_memory(one_vertex_plan(Decision.SCALE), decision)
    assert plan.memory_sizes == (MemorySize(MemoryKind.STATE, "state_mb", 1024, 128, MemoryStep.ALONG),)
    assert plan.changes and plan.memory_changes and plan.memory_proposed_mb is None  # the heap's fields stay
    reason = plan.reasons[-1]
    assert (reason.code, reason.data["kind"], reason.data["saves_mb"]) == (PlanReason.MEMORY_RESIZE, "state", 896)
    assert reason_text(reason).startswith("RocksDB state memory of each JVM (state_mb) 1024 → 128 MB, from a "
                                          "state-store peak of 100 MB: saves 896 MB; with this rescale")
    assert JobPlan.from_json(plan.to_json()) == plan
    waits = memory_decision(STATE, knob="state_mb", current_mb=1024, apply=True, under_pressure=False)
    assert with_memory(one_vertex_plan(), waits).memory_sizes[0].step == MemoryStep.WAITS
    assert not with_memory(one_vertex_plan(), waits).changes


@pytest.mark.parametrize(("item", "error"), [
    ({"kind": "disk", "knob": "k", "current_mb": 1, "proposed_mb": 1, "step": "along"}, "memory_sizes[0].kind"),
    ({"kind": "state", "knob": "k", "current_mb": "x", "proposed_mb": 1, "step": "along"},
     "memory_sizes[0].current_mb"),
    ({"kind": "state", "knob": "k", "current_mb": 1, "proposed_mb": 1}, "memory_sizes[0].step: missing"),
    ("state", "memory_sizes[0]"),
])
def test_a_malformed_memory_size_is_refused_naming_it(item, error):
    data = {**one_vertex_plan().to_json(), "memory_sizes": [item]}
    with pytest.raises(PlanFormatError, match=error.replace("[", "\\[").replace("]", "\\]")):
        JobPlan.from_json(data)


def test_a_plan_stored_before_has_no_memory_sizes():
    data = one_vertex_plan().to_json()
    del data["memory_sizes"]
    assert JobPlan.from_json(data).memory_sizes == ()
