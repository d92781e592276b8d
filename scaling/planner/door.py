"""The one door of the decision: ``decide(request) -> JobPlan``, what the live loop, the simulator's
controller, the backtest and ``python -m scaling evaluate`` call. It finishes the plan inside the
model, as Flink's ``ScalingExecutor.scaleResource`` does (docs/ARCHITECTURE.md, "The one door")."""

from __future__ import annotations

from dataclasses import replace

from scaling.planner.algorithms import ScalingPolicy, resolve
from scaling.planner.memory import (
    executors_after,
    hold_under_pressure,
    memory_decisions,
    plan_scales_up,
    sizing_window,
    window_memory,
    with_memory,
)
from scaling.planner.signals import batch_signals
from scaling.values.memory import MemoryDecision, MemoryInputs
from scaling.values.plan import JobPlan
from scaling.values.readiness import not_ready_reasons
from scaling.values.reasons import Decision
from scaling.values.request import PlanRequest

__all__ = ["decide", "request_memory", "requested_memory", "with_requested_memory"]


def decide(request: PlanRequest, algorithm: ScalingPolicy | None = None) -> JobPlan:
    """The plan of ``request``, final: the algorithm's plan (``algorithm``, else the registered one
    ``request.policy.algorithm`` names), the reasons of the window's not-ready samples, the memory
    gate (under pressure only a plan that only grows goes ahead) and, on an executable plan, each
    memory decision (``scaling.planner.memory.memory_decisions``) on the load of the request's window
    (:func:`request_memory`). Raises ``PolicyError`` for an unknown algorithm or one that does not run
    in ``request.mode``."""
    plan = (algorithm or resolve(request.policy.algorithm)).plan(request)
    if request.not_ready:
        plan = replace(plan, reasons=(*plan.reasons, *not_ready_reasons(request.not_ready)))
    memory = request_memory(request)
    window = window_memory(memory) if memory is not None else None
    if memory is None or window is None:
        return plan
    plan = hold_under_pressure(plan, window.pressure, scales_up=plan_scales_up(plan))
    if not plan.executable:
        return plan
    other_changes = plan.decision == Decision.SCALE and plan.changes
    after = executors_after(plan, local_mode=memory.local_mode) if other_changes else None
    for decision in memory_decisions(window, memory, ready=not request.not_ready, other_changes=other_changes,
                                     executors_after=after):
        plan = with_memory(plan, decision)
    return plan


def request_memory(request: PlanRequest) -> MemoryInputs | None:
    """The memory inputs of ``request`` with the load of its window (``MemoryInputs.sizing``:
    ``scaling.planner.memory.sizing_window`` of its batch signals), or None without memory inputs;
    as given without a cluster (continuous mode has no batches to size memory from)."""
    memory = request.memory
    if memory is None or request.cluster is None:
        return memory
    signals = batch_signals(request.topology, request.metrics, request.cluster, request.batch_durations_s,
                            request.not_ready)
    return replace(memory, sizing=sizing_window(signals, request.policy))


def requested_memory(memory: MemoryInputs, plan: JobPlan | None = None) -> tuple[MemoryDecision, ...]:
    """The memory changes a person may ask for now: each recommendation of the window that changes
    its knob, requested (``MemoryStep.REQUESTED``; a decrease is never asked for under pressure),
    the heap on the executors ``plan`` runs on; ``()`` when there is none."""
    window = window_memory(memory)
    if window is None:
        return ()
    after = executors_after(plan, local_mode=memory.local_mode)
    return tuple(d for d in memory_decisions(window, memory, requested=True, executors_after=after) if d.changes)


def with_requested_memory(plan: JobPlan, decisions: tuple[MemoryDecision, ...]) -> JobPlan:
    """``plan`` with each of ``decisions`` (from :func:`requested_memory`) applied, as a ``scale``."""
    plan = replace(plan, decision=Decision.SCALE)
    for decision in decisions:
        plan = with_memory(plan, decision)
    return plan
