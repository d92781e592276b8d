"""Memory's rules: the pressure gate (Flink ``ScalingExecutor.isJobUnderMemoryPressure``, FLINK-33764),
the recommended sizes (Flink ``MemoryTuning``) and what a plan does with them (docs/ARCHITECTURE.md,
"Memory"). Sizes are MB (2^20 bytes), shares 0..1."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import replace

from scaling.planner.signals import BatchSignals, backlog_growth_noise
from scaling.policy.policy import Policy
from scaling.values.memory import (
    GRANULARITY_MB,
    MB,
    HeapRecommendation,
    MemoryDecision,
    MemoryInputs,
    MemoryReading,
    Pressure,
    PressureSignal,
    SizingWindow,
    WindowMemory,
    Withheld,
)
from scaling.values.plan import JobPlan, MemorySize
from scaling.values.readiness import not_ready_reasons
from scaling.values.reasons import Decision, MemoryKind, MemoryStep, PlanReason, Reason

__all__ = ["STATE_FULL_SHARE", "executors_after", "gc_share", "hold_under_pressure", "memory_decision",
           "memory_decisions", "memory_pressure", "plan_scales_up", "recommend_heap", "recommend_overhead",
           "recommend_state_memory", "sizing_window", "sizing_withheld", "window_memory", "with_memory"]


def gc_share(gc_ms: float, task_ms: float) -> float | None:
    """``gc_ms / task_ms`` clipped to [0, 1] (GC runs inside the task time it is counted in: Spark's
    ``jvmGcTime`` within ``executorRunTime``); None for no task time."""
    if task_ms <= 0:
        return None
    return min(1.0, max(0.0, gc_ms / task_ms))


def memory_pressure(readings: Sequence[MemoryReading], *, gc_threshold: float,
                    heap_threshold: float) -> Pressure | None:
    """The pressure of a window of ``readings`` (oldest first), or None when no signal is above its
    threshold (or none is measured). GC: the newest measured share ``> gc_threshold``; heap: the mean
    measured usage ``> heap_threshold`` (Flink compares with ``>``, so a threshold of 1 never fires)."""
    shares = [r.gc_share for r in readings if r.gc_share is not None]
    usages = [u for u in (r.heap_usage for r in readings) if u is not None]
    gc_share = shares[-1] if shares else None
    heap_usage = statistics.fmean(usages) if usages else None
    signals = []
    if gc_share is not None and gc_share > gc_threshold:
        signals.append(PressureSignal.GC)
    if heap_usage is not None and heap_usage > heap_threshold:
        signals.append(PressureSignal.HEAP)
    if not signals:
        return None
    peak = max((r for r in readings if r.heap_peak_bytes is not None and r.heap_max_bytes),
               key=lambda r: r.heap_peak_bytes or 0, default=None)
    return Pressure(tuple(signals), gc_share, gc_threshold, heap_usage, heap_threshold,
                    peak.heap_peak_bytes / MB if peak and peak.heap_peak_bytes is not None else None,
                    peak.heap_max_bytes / MB if peak and peak.heap_max_bytes else None)


def hold_under_pressure(plan: JobPlan, pressure: Pressure | None, *, scales_up: bool) -> JobPlan:
    """``plan`` through the memory gate. No pressure: unchanged. Under pressure, a plan that is not
    a pure scale-up (``scales_up``: every knob it changes grows) is ``blocked`` with ``memory-pressure``
    first in its reasons and no autoscaler memory carried over (no scale-down is held for later,
    as Flink skips the scaling summary); a scale-up keeps its decision with the reason added."""
    if pressure is None:
        return plan
    reasons = (pressure.reason(), *plan.reasons)
    if scales_up and plan.decision == Decision.SCALE:
        return replace(plan, reasons=reasons)
    if plan.decision != Decision.SCALE:
        return replace(plan, reasons=reasons, next_state=None)
    return replace(plan, decision=Decision.BLOCKED, reasons=reasons, next_state=None,
                   executors_proposed=plan.executors_current,
                   vertices=tuple(replace(v, proposed=v.current) for v in plan.vertices))


def plan_scales_up(plan: JobPlan) -> bool:
    """Whether ``plan`` only grows: no vertex and no executor count below its current value (the
    ``scales_up`` of :func:`hold_under_pressure` for a plan alone)."""
    executors_down = plan.executors_proposed is not None and plan.executors_current is not None \
        and plan.executors_proposed < plan.executors_current
    return not executors_down and all(v.proposed >= v.current for v in plan.vertices)


def _rounded_mb(wanted_mb: float, min_mb: int, max_mb: int) -> int:
    """``wanted_mb`` rounded up to a multiple of :data:`GRANULARITY_MB`, clamped to ``[min_mb, max_mb]``."""
    return min(max_mb, max(min_mb, math.ceil(wanted_mb / GRANULARITY_MB) * GRANULARITY_MB))


def recommend_heap(*, peak_bytes: int, max_bytes: int, overhead: float, min_mb: int, max_mb: int,
                   executors: int = 1, pressure_growth: float | None = None) -> HeapRecommendation:
    """The heap each executor needs, MB: ``peak × (1 + overhead)`` (Flink ``memory.tuning.overhead``),
    rounded up to 64 MB, within ``[min_mb, max_mb]``; under pressure (``pressure_growth``) at least
    ``max × pressure_growth``, as the peak is capped by the maximum. Raises ``ValueError`` for a
    negative size or overhead, a growth below 1, or ``min_mb > max_mb``."""
    if peak_bytes < 0 or max_bytes < 0 or overhead < 0 or min_mb > max_mb or executors < 1 \
            or (pressure_growth is not None and pressure_growth < 1):
        raise ValueError(f"recommend_heap: peak {peak_bytes}, max {max_bytes}, overhead {overhead}, "
                         f"bounds [{min_mb}, {max_mb}] MB, executors {executors}, growth {pressure_growth}")
    wanted_mb = max(peak_bytes * (1 + overhead), max_bytes * (pressure_growth or 0)) / MB
    return HeapRecommendation(current_mb=round(max_bytes / MB), recommended_mb=_rounded_mb(wanted_mb, min_mb, max_mb),
                              peak_mb=peak_bytes / MB, overhead=overhead, executors=executors)


#: A state-memory bound is full when the state stores use at least this share of it: an LRU cache at
#: its capacity reads within a few per cent of it (above it, without RocksDB's strict limit).
STATE_FULL_SHARE = 0.98


def recommend_state_memory(*, used_bytes: int, bound_mb: int, overhead: float, min_mb: int, max_mb: int,
                           growth: float, executors: int = 1) -> HeapRecommendation | None:
    """The RocksDB state memory each JVM needs under bounded memory, or None to keep ``bound_mb``.

    ``used_bytes``: the state stores' memory of one JVM at its peak over the window (RocksDB's
    ``memoryUsedBytes``: block cache, memtables, index and filter blocks). Use below
    ``bound / (1 + overhead)`` shrinks the bound to ``used × (1 + overhead)`` (no use at all: to
    ``min_mb``, as Flink ``MemoryTuning.adjustManagedMemory`` gives back managed memory RocksDB does
    not use). A cache fills whatever it is given, so a full bound (:data:`STATE_FULL_SHARE`) says
    only that the state may need more, as a heap peak at its maximum does: it grows × ``growth``
    (``memory_pressure_growth``; Flink keeps the configured size, but a bound shrunk while the state
    was small must be able to grow back with it). Between the two it stays. Rounded up to
    :data:`GRANULARITY_MB`, within ``[min_mb, max_mb]``. Raises ``ValueError`` for a negative size or
    overhead, or a growth below 1."""
    if used_bytes < 0 or bound_mb < 0 or overhead < 0 or min_mb > max_mb or executors < 1 or growth < 1:
        raise ValueError(f"recommend_state_memory: used {used_bytes} B, bound {bound_mb} MB, overhead {overhead}, "
                         f"bounds [{min_mb}, {max_mb}] MB, executors {executors}, growth {growth}")
    full = used_bytes >= STATE_FULL_SHARE * bound_mb * MB
    if full:
        wanted = _rounded_mb(bound_mb * growth, min_mb, max_mb)
    else:
        wanted = _rounded_mb(used_bytes * (1 + overhead) / MB, min_mb, max_mb) if used_bytes else min_mb
    if (wanted <= bound_mb) if full else (wanted >= bound_mb):
        return None
    return HeapRecommendation(current_mb=bound_mb, recommended_mb=wanted, peak_mb=used_bytes / MB,
                              overhead=overhead, executors=executors, kind=MemoryKind.STATE)


def recommend_overhead(*, nonheap_peak_bytes: int, state_bytes: int, current_mb: int, overhead: float,
                       min_mb: int, max_mb: int, executors: int = 1) -> HeapRecommendation:
    """The non-heap memory each executor needs (``spark.executor.memoryOverhead``): its non-heap use
    at peak (``nonheap_peak_bytes``: the JVM's off-heap, direct and mapped pools, Python workers)
    plus the RocksDB memory it may hold (``state_bytes``: the state memory bound, or the use without
    one), × (1 + overhead), rounded up to :data:`GRANULARITY_MB`, within ``[min_mb, max_mb]`` (Flink
    ``MemoryTuning.determineNewSize`` sizes each pool from its use the same way). Both ways: a
    container that outgrows it is killed by its cluster manager. Raises ``ValueError`` for a
    negative size or overhead."""
    if nonheap_peak_bytes < 0 or state_bytes < 0 or current_mb < 0 or overhead < 0 or min_mb > max_mb \
            or executors < 1:
        raise ValueError(f"recommend_overhead: non-heap {nonheap_peak_bytes} B, state {state_bytes} B, current "
                         f"{current_mb} MB, overhead {overhead}, bounds [{min_mb}, {max_mb}] MB, executors {executors}")
    used_mb = (nonheap_peak_bytes + state_bytes) / MB
    recommended = _rounded_mb(used_mb * (1 + overhead), min_mb, max_mb)
    return HeapRecommendation(current_mb=current_mb, recommended_mb=recommended, peak_mb=used_mb, overhead=overhead,
                              executors=executors, kind=MemoryKind.OVERHEAD)


def memory_decision(heap: HeapRecommendation, *, knob: str | None, current_mb: int | None,
                    bounds: tuple[int, int] = (1, 1 << 30), apply: bool, under_pressure: bool, ready: bool = True,
                    other_changes: bool = False, requested: bool = False,
                    along_factor: float | None = None, executors_after: int | None = None) -> MemoryDecision:
    """The step a plan takes with ``heap`` on ``knob`` (running ``current_mb``, within ``bounds`` MB;
    None: recommend-only), in this order: no knob, at the bound, a decrease under pressure or not
    ``ready`` (held), ``requested`` by a person, recommend-only (``apply`` off), along with
    ``other_changes`` (at most ``along_factor`` away, in 64 MB steps), alone under pressure (the heap
    only), else it waits (docs/ARCHITECTURE.md, "Memory"). ``executors_after``: the JVMs the plan
    runs on when it changes their number (:meth:`HeapRecommendation.on_executors`)."""
    if executors_after is not None:
        heap = heap.on_executors(executors_after)
    if knob is None or current_mb is None:
        return MemoryDecision(MemoryStep.NO_KNOB, heap, under_pressure)
    target = min(bounds[1], max(bounds[0], heap.recommended_mb))
    decrease = target < current_mb
    if target == current_mb:
        step = MemoryStep.AT_BOUND
    elif decrease and (under_pressure or not ready):
        step = MemoryStep.HELD
    elif requested:
        step = MemoryStep.REQUESTED
    elif not apply:
        step = MemoryStep.RECOMMEND_ONLY
    elif other_changes:
        step = MemoryStep.ALONG
        if along_factor is not None:
            target = _within_factor(target, current_mb, along_factor)
            step = MemoryStep.ALONG if target != current_mb else MemoryStep.HELD
    elif under_pressure and heap.kind is MemoryKind.HEAP:
        step = MemoryStep.ALONE
    else:
        step = MemoryStep.WAITS
    return MemoryDecision(step, heap, under_pressure, knob, current_mb, target)


def _within_factor(target_mb: int, current_mb: int, factor: float) -> int:
    """``target_mb`` moved at most ``factor`` away from ``current_mb``, rounded towards it to whole
    :data:`GRANULARITY_MB` steps (never past it)."""
    if target_mb < current_mb:
        floor_mb = math.ceil(current_mb / factor / GRANULARITY_MB) * GRANULARITY_MB
        return min(current_mb, max(target_mb, floor_mb))
    ceiling_mb = math.floor(current_mb * factor / GRANULARITY_MB) * GRANULARITY_MB
    return max(current_mb, min(target_mb, ceiling_mb))


def with_memory(plan: JobPlan, decision: MemoryDecision | None) -> JobPlan:
    """``plan`` with the memory ``decision`` (None: unchanged): the heap's fields, or for another kind
    its :class:`~scaling.values.plan.MemorySize` (none without a knob), and, when the size changes,
    ``memory-resize`` added to its reasons; a plan that changed nothing else becomes a memory-only
    ``scale`` (every vertex and the executors stay as they run)."""
    if decision is None:
        return plan
    if decision.heap.kind is MemoryKind.HEAP:
        plan = replace(plan, memory_current_mb=decision.current_mb, memory_proposed_mb=decision.proposed_mb,
                       memory_step=decision.step)
    elif decision.knob is not None and decision.current_mb is not None and decision.proposed_mb is not None:
        size = MemorySize(decision.heap.kind, decision.knob, decision.current_mb, decision.proposed_mb, decision.step)
        plan = replace(plan, memory_sizes=(*(m for m in plan.memory_sizes if m.kind != size.kind), size))
    if not decision.changes:
        return plan
    plan = replace(plan, reasons=(*plan.reasons, decision.reason()))
    if plan.decision == Decision.SCALE:
        return plan
    return replace(plan, decision=Decision.SCALE, executors_proposed=plan.executors_current,
                   vertices=tuple(replace(v, proposed=v.current) for v in plan.vertices))


def sizing_window(signals: BatchSignals, policy: Policy, *, batches: int | None = None) -> SizingWindow:
    """The load of a window as :func:`sizing_withheld` reads it, from its measured ``signals``: the
    micro-batches of the current run completed in it (``batches``; default: the batch durations the
    signals hold), the sources' backlog growth and its noise (``backlog_growth_noise``), the
    not-ready samples."""
    return SizingWindow(batches=signals.batches if batches is None else batches,
                        backlog_growth_per_s=signals.backlog_growth_per_s,
                        noise_per_s=backlog_growth_noise(signals, policy), not_ready=signals.not_ready)


def sizing_withheld(sizing: SizingWindow | None) -> Reason | None:
    """``memory-withheld`` when a window's memory may not be right-sized, by its first cause: no
    micro-batch of the current run completed in it (``no-batch``: its figures say nothing of the
    load), a sample is not ready (``not-ready``: code, samples and the issue's data), or the job is
    not keeping up (``not-keeping-up``: the sources' backlog grows beyond its noise; its batches
    run on what they can read, not on the load). None when it may, or for no ``sizing``."""
    if sizing is None:
        return None
    if sizing.batches <= 0:
        return Reason(PlanReason.MEMORY_WITHHELD, None, {"cause": str(Withheld.NO_BATCH), "batches": 0})
    if sizing.not_ready:
        first = not_ready_reasons(sizing.not_ready)[0]
        return Reason(PlanReason.MEMORY_WITHHELD, None, {**first.data, "cause": str(Withheld.NOT_READY)})
    if sizing.backlog_growth_per_s > sizing.noise_per_s:
        return Reason(PlanReason.MEMORY_WITHHELD, None, {
            "cause": str(Withheld.NOT_KEEPING_UP), "backlog_growth_per_s": sizing.backlog_growth_per_s,
            "noise_per_s": sizing.noise_per_s})
    return None


def window_memory(inputs: MemoryInputs) -> WindowMemory | None:
    """The memory of a window (``inputs.readings``, oldest first), or None when no reading measured
    any: the pressure (:func:`memory_pressure` at the policy's thresholds), the heap recommended
    from the highest peak (:func:`recommend_heap`, kept only when it saves memory or answers the
    pressure) and the other memories' sizes for the knobs that run (:func:`recommend_state_memory`
    on RocksDB, :func:`recommend_overhead` on a cluster). When the window's load withholds a
    right-sizing (:func:`sizing_withheld` of ``inputs.sizing``), no size and no heap but the one
    that relieves the pressure, and the reason as ``withheld``."""
    readings = [r for r in inputs.readings if r.measured]
    if not readings:
        return None
    withheld = sizing_withheld(inputs.sizing)
    policy = inputs.policy
    pressure = memory_pressure(readings, gc_threshold=policy.memory_gc_pressure_threshold,
                               heap_threshold=policy.memory_heap_usage_threshold)
    sized = [r for r in readings if r.heap_peak_bytes and r.heap_max_bytes]  # a 0 peak was not measured
    peak = max(sized, key=lambda r: r.heap_peak_bytes or 0, default=None)
    recommendation = None
    if peak is not None:
        heap = recommend_heap(peak_bytes=peak.heap_peak_bytes or 0, max_bytes=peak.heap_max_bytes or 0,
                              overhead=policy.memory_tuning_overhead, min_mb=policy.memory_min_mb,
                              max_mb=policy.memory_max_mb, executors=max(1, peak.executors),
                              pressure_growth=policy.memory_pressure_growth if pressure is not None else None)
        if heap.changes and (pressure is not None or (withheld is None and heap.recommended_mb < heap.current_mb)):
            recommendation = heap
    state = [r.state_bytes for r in readings if r.state_bytes is not None]
    nonheap = [r.nonheap_peak_bytes for r in readings if r.nonheap_peak_bytes is not None]
    state_bytes = max(state) if state else None
    nonheap_bytes = max(nonheap) if nonheap else None
    shares = [r.gc_share for r in readings if r.gc_share is not None]
    return WindowMemory(gc_share=shares[-1] if shares else None,
                        heap_peak_mb=peak.heap_peak_bytes / MB if peak and peak.heap_peak_bytes else None,
                        heap_max_mb=peak.heap_max_bytes / MB if peak and peak.heap_max_bytes else None,
                        pressure=pressure, recommendation=recommendation, apply=policy.memory_apply,
                        state_mb=None if state_bytes is None else state_bytes / MB,
                        nonheap_peak_mb=None if nonheap_bytes is None else nonheap_bytes / MB,
                        sizes=() if withheld else _sizes(inputs, state_bytes, nonheap_bytes,
                                                         executors=max(1, readings[-1].executors)),
                        withheld=withheld)


def _sizes(inputs: MemoryInputs, state_bytes: int | None, nonheap_bytes: int | None, *,
           executors: int) -> tuple[HeapRecommendation, ...]:
    """The recommendations of the non-heap memories with a running knob, each when it changes it:
    the RocksDB state memory from one JVM's state stores (``state_bytes``), the overhead (a cluster
    only) from a JVM's non-heap peak and the state memory it may hold."""
    policy, out = inputs.policy, []
    state = inputs.knob(MemoryKind.STATE)
    if state is not None and state_bytes is not None and inputs.state_in_rocksdb:
        size = recommend_state_memory(used_bytes=state_bytes, bound_mb=state.running_mb,
                                      overhead=policy.memory_tuning_overhead, min_mb=state.min_mb,
                                      max_mb=state.max_mb, growth=policy.memory_pressure_growth, executors=executors)
        if size is not None:
            out.append(size)
    overhead = inputs.knob(MemoryKind.OVERHEAD)
    if overhead is not None and nonheap_bytes is not None and not inputs.local_mode:
        held = state.running_mb * MB if state is not None else (state_bytes or 0)
        size = recommend_overhead(nonheap_peak_bytes=nonheap_bytes, state_bytes=held, current_mb=overhead.running_mb,
                                  overhead=policy.memory_tuning_overhead, min_mb=overhead.min_mb,
                                  max_mb=overhead.max_mb, executors=executors)
        if size.changes:
            out.append(size)
    return tuple(out)


def memory_decisions(window: WindowMemory, inputs: MemoryInputs, *, ready: bool = True,
                     other_changes: bool = False, requested: bool = False,
                     executors_after: int | None = None) -> tuple[MemoryDecision, ...]:
    """What a plan does with each recommendation of ``window`` (:func:`memory_decision` on the knob of
    its kind, its running value and bounds, ``memory_apply``, ``guard_max_change_factor`` as the most
    a size riding along moves): the heap's first (also without a knob: recommend-only), then each
    other size that has a knob; ``executors_after`` applies to the heap."""
    decisions = []
    if window.recommendation is not None:
        decisions.append(_decision(window, inputs, window.recommendation, ready=ready, other_changes=other_changes,
                                   requested=requested, executors_after=executors_after))
    for size in window.sizes:
        decision = _decision(window, inputs, size, ready=ready, other_changes=other_changes, requested=requested)
        if decision.knob is not None:
            decisions.append(decision)
    return tuple(decisions)


def _decision(window: WindowMemory, inputs: MemoryInputs, size: HeapRecommendation, *, ready: bool,
              other_changes: bool, requested: bool, executors_after: int | None = None) -> MemoryDecision:
    knob = inputs.knob(size.kind)
    return memory_decision(size, knob=knob.name if knob else None, current_mb=knob.running_mb if knob else None,
                           bounds=(knob.min_mb, knob.max_mb) if knob else (1, 1), apply=window.apply,
                           under_pressure=window.pressure is not None, ready=ready, other_changes=other_changes,
                           requested=requested, along_factor=inputs.policy.guard_max_change_factor,
                           executors_after=executors_after)


def executors_after(plan: JobPlan | None, *, local_mode: bool) -> int | None:
    """The executors ``plan`` runs on when it changes their number on a cluster, for
    :meth:`HeapRecommendation.on_executors`; None without a plan, without a change, or in local
    mode (one JVM runs every task whatever the cores)."""
    if plan is None or local_mode or plan.executors_proposed is None \
            or plan.executors_proposed == plan.executors_current:
        return None
    return plan.executors_proposed
