"""The memory gate and the recommend-only heap size (``scaling.planner.memory``)."""

from __future__ import annotations

import pytest

from scaling.planner.memory import (
    hold_under_pressure,
    memory_decision,
    memory_pressure,
    recommend_heap,
    sizing_withheld,
    window_memory,
)
from scaling.values.memory import MB, MemoryInputs, MemoryReading, PressureSignal, SizingWindow
from scaling.values.plan import JobPlan, VertexPlan
from scaling.values.readiness import NotReady, SampleIssue
from scaling.values.reasons import Decision, PlanReason, Reason
from scaling.values.state import ScalerState
from scaling.words.reason_text import reason_text

GC, HEAP = 0.3, 1.0


def _pressure(*readings: MemoryReading, gc: float = GC, heap: float = HEAP):
    return memory_pressure(readings, gc_threshold=gc, heap_threshold=heap)


def test_gc_share_above_the_threshold_is_pressure_with_its_figures():
    pressure = _pressure(MemoryReading(0.1, 300 * MB, 512 * MB), MemoryReading(0.42, 480 * MB, 512 * MB))
    assert pressure is not None and pressure.signals == (PressureSignal.GC,)
    assert (pressure.gc_share, pressure.heap_peak_mb, pressure.heap_max_mb) == (0.42, 480.0, 512.0)
    assert pressure.heap_usage == pytest.approx((300 + 480) / 2 / 512)
    reason = pressure.reason()
    assert reason.code == PlanReason.MEMORY_PRESSURE and reason.data["signal"] == "gc"
    assert "GC 42% of task time (threshold 30%)" in reason_text(reason)
    assert "480 of 512 MB at peak" in reason_text(reason)


def test_flink_compares_with_greater_than_and_takes_the_newest_gc_share():
    """``gcPressure > threshold`` (Flink ScalingExecutor): at the threshold there is no pressure; an older
    window above it does not count once the newest is below."""
    assert _pressure(MemoryReading(0.3, None, None)) is None
    assert _pressure(MemoryReading(0.9, None, None), MemoryReading(0.1, None, None)) is None
    assert _pressure(MemoryReading(None, None, None)) is None


def test_heap_usage_pressure_is_the_windows_mean_and_off_at_flinks_default():
    full = MemoryReading(0.0, 500 * MB, 512 * MB)
    assert _pressure(full) is None  # 0.98 < 1.0: the default never fires
    pressure = _pressure(full, MemoryReading(0.0, 400 * MB, 512 * MB), heap=0.8)
    assert pressure is not None and pressure.signals == (PressureSignal.HEAP,)
    assert _pressure(full, MemoryReading(0.0, 300 * MB, 512 * MB), heap=0.8) is None  # mean 0.78


@pytest.mark.parametrize("peak_mb, heap, pressed", [
    (512, 1.0, False),   # a full heap at Flink's default threshold of 1: ``>`` never fires
    (256, 0.5, False),   # exactly at the threshold
    (257, 0.5, True),
])
def test_heap_usage_exactly_at_its_threshold_is_no_pressure(peak_mb, heap, pressed):
    pressure = _pressure(MemoryReading(0.0, peak_mb * MB, 512 * MB), heap=heap)
    assert (pressure is not None) is pressed
    if pressed:
        assert pressure.signals == (PressureSignal.HEAP,) and pressure.heap_usage == peak_mb / 512


def _below_band_plan(decision: Decision, current: int, proposed: int) -> JobPlan:
    vertex = VertexPlan("v0", current=current, proposed=proposed, true_processing_rate=1.0, true_output_rate=1.0,
                        selectivity=1.0, target_data_rate=1.0, catch_up_data_rate=0.0, ideal_parallelism=proposed,
                        utilization=0.5, busy_core_s_per_s=0.5, adjustable=True)
    return JobPlan(decision=decision, reasons=(Reason(PlanReason.LOAD_BELOW_BAND, None, {}),), vertices=(vertex,),
                   executors_current=current, executors_proposed=proposed, next_state=ScalerState())


PRESSURE = memory_pressure([MemoryReading(0.5, 500 * MB, 512 * MB)], gc_threshold=GC, heap_threshold=HEAP)


def test_under_pressure_a_scale_down_is_blocked_and_nothing_is_held_for_later():
    gated = hold_under_pressure(_below_band_plan(Decision.SCALE, 6, 3), PRESSURE, scales_up=False)
    assert gated.decision == Decision.BLOCKED and not gated.changes
    assert gated.reasons[0].code == PlanReason.MEMORY_PRESSURE and gated.next_state is None


def test_under_pressure_a_scale_up_goes_ahead_with_the_pressure_named():
    plan = _below_band_plan(Decision.SCALE, 2, 4)
    gated = hold_under_pressure(plan, PRESSURE, scales_up=True)
    assert gated.decision == Decision.SCALE and (gated.executors_proposed, gated.vertices) == (4, plan.vertices)
    assert [r.code for r in gated.reasons] == [PlanReason.MEMORY_PRESSURE, PlanReason.LOAD_BELOW_BAND]


def test_without_pressure_the_plan_is_untouched():
    plan = _below_band_plan(Decision.SCALE, 6, 3)
    assert hold_under_pressure(plan, None, scales_up=False) is plan


@pytest.mark.parametrize("peak_mb, max_mb, expected_mb", [
    (1000, 8192, 1216),    # 1200 MB rounded up to 64 MB
    (1600, 8192, 1920),    # 1920 exactly
    (100, 8192, 512),      # the lower bound
    (480, 512, 576),       # under pressure the heap grows
    (60_000, 65_536, 65_536),  # the upper bound
])
def test_the_recommendation_is_the_peak_plus_overhead_rounded_up_within_bounds(peak_mb, max_mb, expected_mb):
    heap = recommend_heap(peak_bytes=peak_mb * MB, max_bytes=max_mb * MB, overhead=0.2, min_mb=512, max_mb=65_536,
                          executors=3)
    assert (heap.current_mb, heap.recommended_mb) == (max_mb, expected_mb)
    assert heap.saves_mb == (max_mb - expected_mb) * 3


def test_a_recommendation_refuses_nonsense_bounds():
    with pytest.raises(ValueError):
        recommend_heap(peak_bytes=MB, max_bytes=MB, overhead=0.2, min_mb=1024, max_mb=512)


@pytest.mark.parametrize(("peak_mb", "max_mb", "growth", "bound_mb", "expected_mb"), [
    (507, 512, 2.0, 65_536, 1024),   # the peak is capped at the maximum: peak × 1.2 = 640 would not lift it
    (600, 640, 2.0, 65_536, 1280),   # still under pressure after the first step: doubled again
    (507, 512, 1.0, 65_536, 640),    # growth 1: the peak plus overhead alone
    (507, 512, 2.0, 768, 768),       # never above memory_max_mb
    (2000, 1024, 1.5, 65_536, 2432),  # a peak above the growth keeps peak × 1.2 (2400 → 2432)
])
def test_under_pressure_the_recommendation_grows_from_the_running_heap(peak_mb, max_mb, growth, bound_mb,
                                                                       expected_mb):
    heap = recommend_heap(peak_bytes=peak_mb * MB, max_bytes=max_mb * MB, overhead=0.2, min_mb=512,
                          max_mb=bound_mb, pressure_growth=growth)
    assert heap.recommended_mb == expected_mb


def test_a_growth_below_one_is_refused():
    with pytest.raises(ValueError, match="growth 0.5"):
        recommend_heap(peak_bytes=MB, max_bytes=MB, overhead=0.2, min_mb=512, max_mb=1024, pressure_growth=0.5)


@pytest.mark.parametrize(("executors_after", "expected_mb", "peak_mb"), [
    (4, 1920, 1600.0),   # as many executors: unchanged
    (8, 1920, 1600.0),   # more: the peak stays (a JVM's own use does not shrink)
    (2, 3840, 3200.0),   # half as many: each holds twice the data, 3200 × 1.2
    (3, 2560, 1600.0 * 4 / 3),  # 2133 × 1.2 = 2560
])
def test_a_plan_on_fewer_executors_sizes_the_heap_for_the_larger_share_each_holds(executors_after, expected_mb,
                                                                                  peak_mb):
    heap = recommend_heap(peak_bytes=1600 * MB, max_bytes=8192 * MB, overhead=0.2, min_mb=512, max_mb=65_536,
                          executors=4).on_executors(executors_after)
    assert (heap.recommended_mb, heap.executors) == (expected_mb, executors_after)
    assert heap.peak_mb == pytest.approx(peak_mb)


def test_a_heap_riding_along_with_fewer_executors_is_decided_on_their_share():
    heap = recommend_heap(peak_bytes=700 * MB, max_bytes=1024 * MB, overhead=0.2, min_mb=512, max_mb=65_536,
                          executors=16)
    alone = memory_decision(heap, knob="heap_mb", current_mb=1024, apply=True, under_pressure=False,
                            other_changes=True, along_factor=2.0)
    fewer = memory_decision(heap, knob="heap_mb", current_mb=1024, apply=True, under_pressure=False,
                            other_changes=True, along_factor=2.0, executors_after=7)
    assert (alone.proposed_mb, fewer.proposed_mb) == (1024 - 128, 1920)  # 896 (840 rounded) vs 700 × 16/7 × 1.2
    with pytest.raises(ValueError):
        heap.on_executors(0)


_ROOMY = (MemoryReading(0.01, 300 * MB, 1024 * MB),)  # a heap of 1024 → 384 MB recommended when right-sized
_FIRST = SampleIssue(NotReady.FIRST_BATCH, {"batch_id": 0})


@pytest.mark.parametrize(("sizing", "cause"), [
    (SizingWindow(batches=1), None),
    (SizingWindow(batches=0), "no-batch"),
    (SizingWindow(batches=3, backlog_growth_per_s=10.0, noise_per_s=10.0), None),  # at the noise: keeping up
    (SizingWindow(batches=3, backlog_growth_per_s=10.5, noise_per_s=10.0), "not-keeping-up"),
    (SizingWindow(batches=3, not_ready=(_FIRST,)), "not-ready"),
    # the first cause is named: no batch before a sample that is not ready, before a growing backlog
    (SizingWindow(batches=0, backlog_growth_per_s=50.0, not_ready=(_FIRST,)), "no-batch"),
    (SizingWindow(batches=2, backlog_growth_per_s=50.0, not_ready=(_FIRST,)), "not-ready"),
    (None, None),  # no load known (a scenario step's readings alone)
])
def test_a_window_is_right_sized_only_on_batches_that_keep_up_and_are_ready(sizing, cause):
    window = window_memory(MemoryInputs(_ROOMY, sizing=sizing))
    assert (window.withheld.data["cause"] if window.withheld else None) == cause
    assert (window.recommendation is None) == (cause is not None)
    if cause is not None:
        assert window.withheld.code == PlanReason.MEMORY_WITHHELD
        assert reason_text(window.withheld).startswith("memory not right-sized: ")


def test_the_withheld_reasons_words_name_the_cause_and_its_figures():
    words = {str(s.batches): reason_text(sizing_withheld(s)) for s in (
        SizingWindow(batches=0), SizingWindow(batches=1, backlog_growth_per_s=450.4, noise_per_s=22.5),
        SizingWindow(batches=2, not_ready=(SampleIssue(NotReady.RESTART_IN_WINDOW, {"batches": 1}),) * 2))}
    assert "no micro-batch of this run completed in the window yet" in words["0"]
    assert "not keeping up: its backlog grows 450 records/s, above the noise of 22 records/s" in words["1"]
    assert "metrics not ready in 2 sample(s)" in words["2"]


def test_a_heap_under_pressure_grows_on_a_window_that_is_not_right_sized():
    """The relief is not right-sizing: GC at 50 % with the heap at its maximum, the job falling behind."""
    pressed = (MemoryReading(0.5, 1000 * MB, 1024 * MB),)
    window = window_memory(MemoryInputs(pressed, sizing=SizingWindow(batches=3, backlog_growth_per_s=500.0)))
    assert window.pressure is not None and window.withheld.data["cause"] == "not-keeping-up"
    assert window.recommendation.recommended_mb > window.recommendation.current_mb
