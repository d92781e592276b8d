"""Memory in the simulator: the GC model, the state that grows then plateaus, a batch above the heap
maximum that fails and restarts with more heap (no records lost), the collects measured through
production's ``scaling.planner.memory``, the memory gate on every policy and the heap ds2 applies."""

from dataclasses import replace

import pytest

from scaling.bench.memory import DS2_MEMORY, demo_8g, sessions
from scaling.bench.run import base_rate_per_s, bench_policy, bench_settings
from scaling.planner.memory import plan_scales_up
from scaling.policy.memory import MemoryPolicy
from scaling.sim import workloads
from scaling.sim.engine import Config, PolicyController, simulate
from scaling.sim.memory import HeapModel, SimMemory, grown_heap_mb, interval_oracle_mb_s, rule_oracle_mb_s
from scaling.sim.model import SimError
from scaling.values.reasons import PlanReason


def constant(rate, hours, step_s=5.0):
    return workloads.step(base_per_s=rate, factor=1.0, duration_s=hours * 3600.0, step_s=step_s)


def test_gc_is_free_below_the_onset_and_rises_steeply_near_the_maximum():
    memory = SimMemory(1024)
    shares = {u: memory.gc_ratio(u) / (1 + memory.gc_ratio(u)) for u in (0.4, 0.5, 0.83, 0.95, 0.99)}
    assert shares[0.4] == shares[0.5] == 0.0
    assert shares[0.83] == pytest.approx(0.088, abs=0.001)
    assert shares[0.95] == pytest.approx(0.310, abs=0.001)
    assert shares[0.99] == pytest.approx(0.710, abs=0.001)


def test_the_state_grows_for_its_retention_then_plateaus_and_spreads_over_the_executors():
    trace = constant(1000.0, 2.0)
    model = HeapModel(SimMemory(1024, state_mb_per_record=0.001, state_retention_s=1800.0), trace, 1)
    assert model.state_mb(900.0) == pytest.approx(900.0)
    assert model.state_mb(1800.0) == pytest.approx(1800.0) == model.state_mb(5400.0)
    assert model.used_mb(5400.0, 4) == pytest.approx(350.0 + 150.0 + 1800.0 / 4)


def test_the_calm_heap_is_the_smallest_64_mb_step_out_of_pressure():
    model = HeapModel(SimMemory(1024), constant(1.0, 0.1), 1)
    sizing = MemoryPolicy()
    heap = model.smallest_calm_heap_mb(546.0, sizing)
    assert heap % 64 == 0
    below = heap - 64
    ratio = model.memory.gc_ratio(546.0 / below)
    assert ratio / (1 + ratio) > sizing.memory_gc_pressure_threshold
    ratio = model.memory.gc_ratio(546.0 / heap)
    assert ratio / (1 + ratio) <= sizing.memory_gc_pressure_threshold


def test_bad_memory_figures_are_refused():
    with pytest.raises(SimError):
        SimMemory(0)
    with pytest.raises(SimError):
        SimMemory(1024, gc_onset=1.0)


def test_grown_heap_and_the_oracle_mb_seconds():
    assert grown_heap_mb(1000, 2.0, 65_536) == 2048 and grown_heap_mb(60_000, 2.0, 65_536) == 65_536
    per_interval, whole = interval_oracle_mb_s([30, 60, 90, 120], [2, 2, 2, 2], [512, 640, 704, 576], 60.0, 30.0,
                                               1024)
    assert per_interval == 2 * 30 * (1024 + 1024 + 704 + 704)
    assert whole == 2 * 30 * (1024 + 1024 + 704 + 704)
    assert interval_oracle_mb_s([30, 60, 90, 120], [2] * 4, [512, 640, 704, 576], 60.0, 30.0, 512)[1] \
        == 2 * 30 * (640 * 2 + 704 * 2)


def test_the_rule_oracle_keeps_the_start_heap_until_pressure_and_resizes_only_at_restarts():
    """Ticks every 30 s on 2 executors, a restart at 120 s: the start heap (1,024 MB) stays until the
    tick at 90 s needs more, then the largest need before the restart (1,100); after the restart,
    the largest need of the rest (700). Without a restart, 1,100 to the end; with a start heap
    that is always enough, it stays."""
    t, needs = [30, 60, 90, 120, 150, 180], [512, 640, 1100, 900, 700, 600]
    assert rule_oracle_mb_s(t, [2] * 6, needs, [120.0], 30.0, 1024) == 2 * 30 * (1024 * 2 + 1100 * 2 + 700 * 2)
    assert rule_oracle_mb_s(t, [2] * 6, needs, [], 30.0, 1024) == 2 * 30 * (1024 * 2 + 1100 * 4)
    assert rule_oracle_mb_s(t, [1] * 6, needs, [], 30.0, 2048) == 30 * 2048 * 6
    assert rule_oracle_mb_s([], [], [], [], 30.0, 1024) == 0.0


def _simulate(job, controller, hours=1.5, heap_mb=None, cores=4):
    settings = bench_settings("micro-batch")
    trace = constant(base_rate_per_s(job), hours)
    start = Config({v.id: v.parallelism if not v.adjustable else 8 for v in job.vertices}, cores, heap_mb)
    return simulate(job, trace, settings, controller, start, seed=7)


def test_a_heap_too_small_for_the_state_fails_restarts_with_more_and_loses_nothing():
    """Sessions at 600 MB on 4 cores without memory sizing: the state outgrows the heap, a batch fails,
    the job restarts at the handover's cost with 1,216 MB (and again if that is short)."""
    job = replace(sessions(), memory=replace(sessions().memory, start_heap_mb=600))
    controller = PolicyController(bench_policy(), name="ds2")
    result = _simulate(job, controller)
    assert result.memory_failures >= 1 and result.records_lost == 0
    restarts = [r for r in result.rescales if r.after.heap_mb != r.before.heap_mb]
    assert restarts[0].before.heap_mb == 600 and restarts[0].after.heap_mb == 1216
    assert all(r.downtime_s > 1.0 for r in restarts)  # the warm handover's pause, not free


def test_the_collects_measure_gc_and_heap_through_production_and_pressure_holds_scale_downs():
    """Sessions at 1 GB, memory not sized: GC rises past the threshold as the state grows. Every plan
    made under pressure names it first and scales nothing down; the readings are the model's."""
    controller = PolicyController(bench_policy(), name="ds2")
    seen = []
    decide = controller.decide
    controller.decide = lambda observation: seen.append(observation) or decide(observation)
    _simulate(sessions(), controller, cores=16)
    readings = [r for o in seen for r in o.memory]
    assert readings and all(r.heap_max_bytes == 1024 * 2**20 for r in readings)
    assert max(r.gc_share for r in readings if r.gc_share is not None) > 0.3
    held = [plan for _, plan in controller.plans if plan.reasons and plan.reasons[0].code == PlanReason.MEMORY_PRESSURE]
    assert held, "the run never came under memory pressure"
    assert all(plan.decision != "scale" or plan_scales_up(plan) for plan in held)


def _heap_changes(result):
    return [(r.before.cores != r.after.cores, r.before.heap_mb, r.after.heap_mb) for r in result.rescales
            if r.after.heap_mb != r.before.heap_mb]


def test_ds2_with_memory_apply_never_restarts_for_a_smaller_heap_alone():
    """Production's rule (``scaling.planner.memory.memory_decision``): without pressure the heap changes only
    with a rescale that happens anyway. At 16 cores the demo needs no rescale, so its 8 GB stay."""
    result = _simulate(demo_8g(), PolicyController(bench_policy(), name="ds2", memory=DS2_MEMORY), hours=1.0, cores=16)
    assert result.rescales == [] and result.memory_failures == 0


def test_a_smaller_heap_rides_along_with_each_rescale_by_at_most_the_guard_factor():
    """On 7 cores the demo falls behind: the scale-up to 27 cores carries no heap (a job that is not
    keeping up is not right-sized); the two scale-downs that follow, on a job keeping up, halve it."""
    result = _simulate(demo_8g(), PolicyController(bench_policy(), name="ds2", memory=DS2_MEMORY), hours=1.0, cores=7)
    assert [r.after.cores for r in result.rescales] == [27, 11, 7]
    assert _heap_changes(result) == [(True, 8192, 4096), (True, 4096, 2048)]
    assert all(r.downtime_s > 1.0 for r in result.rescales) and result.memory_failures == 0


def test_fewer_executors_hold_more_state_each_so_the_heap_riding_along_grows():
    """Sessions on 16 executors, scaled down to 7 while the state grows: each executor's share of the
    state more than doubles, so the heap goes up with the rescale, and no batch runs out of heap."""
    result = _simulate(sessions(), PolicyController(bench_policy(), name="ds2", memory=DS2_MEMORY), cores=16)
    ((cores_changed, before, after),) = _heap_changes(result)
    assert cores_changed and before == 1024 and after > 1024
    assert result.memory_failures == 0 and result.records_lost == 0


def test_without_memory_apply_the_heap_never_changes_without_a_failure():
    controller = PolicyController(bench_policy(), name="ds2", memory=MemoryPolicy(memory_apply=False))
    result = _simulate(demo_8g(), controller, hours=1.0)
    assert all(r.after.heap_mb == 8192 for r in result.rescales) and result.memory_failures == 0
