"""The output document of ``python -m scaling evaluate`` (docs/SCENARIO.md "Output"), rendered from
the plans: rates rounded to 3 decimals, infinity as ``"inf"``, the structured limits, held
scale-downs, a rescale awaiting DS2's activation time, a step's memory (the window's memory as the API
gives it) and the findings (``scaling.values.findings``, with
their words) as JSON objects. Every reason (the step's
``reasons``, a vertex's ``reason``) is its code, vertex and data with its words (``reason_text``);
a vertex's ``note`` is the words of its reason."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from scaling.planner.memory import window_memory
from scaling.values.memory import MemoryInputs
from scaling.values.mode import Mode
from scaling.values.reasons import Reason
from scaling.words.reason_text import finding_text, reason_text


def _clean(value: float) -> float | str:
    """Rates in the output: rounded to 3 decimals; infinity as ``"inf"``."""
    if math.isinf(value):
        return "inf"
    return round(float(value), 3)


def _clean_json(value: Any) -> Any:
    """Numbers in nested output: rounded like rates, infinity as ``"inf"``."""
    if isinstance(value, dict):
        return {k: _clean_json(v) for k, v in value.items()}
    if isinstance(value, float):
        return _clean(value)
    return value


def render_reason(reason: Reason) -> dict:
    """A reason in the output: ``{"code", "vertex_id", "data", "text"}``, numbers rounded like rates."""
    return {**_clean_json(reason.to_json()), "text": reason_text(reason)}


def render_steps(mode: Mode, results: list, memory: MemoryInputs | None = None) -> list[dict]:
    """The ``steps`` of SCENARIO.md's output document, one per ``(step, plan)``; ``memory``: the
    document's memory options and knobs, for each step's readings."""
    steps = []
    for step, plan in results:
        vertices = {}
        for v in plan.vertices:
            out: dict[str, Any] = {
                "current": v.current, "proposed": v.proposed,
                "true_processing_rate": _clean(v.true_processing_rate), "target_data_rate": _clean(v.target_data_rate),
                "catch_up_data_rate": _clean(v.catch_up_data_rate),
                "scale_up_threshold": _clean(v.scale_up_threshold),
                "scale_down_threshold": _clean(v.scale_down_threshold),
                "expected_processing_rate": _clean(v.expected_processing_rate),
                "utilization": _clean(v.utilization), "outside_bounds": v.outside_bounds,
                "note": reason_text(v.reason) if v.reason is not None else "",
                "reason": render_reason(v.reason) if v.reason is not None else None,
            }
            if mode == Mode.MICRO_BATCH:
                out["ideal_parallelism"] = v.ideal_parallelism
            vertices[v.vertex_id] = out
        executors = None
        if mode == Mode.MICRO_BATCH:
            executors = {"current": plan.executors_current, "proposed": plan.executors_proposed,
                         "cores_needed": plan.cores_needed, "bottleneck": plan.bottleneck,
                         "limits": [_clean_json(item.as_json()) for item in plan.limits]}
        at_s = int(step.at_s) if float(step.at_s).is_integer() else step.at_s
        out_step = {"at_s": at_s, "decision": str(plan.decision), "reasons": [render_reason(r) for r in plan.reasons],
                    "vertices": vertices, "executors": executors}
        if plan.held:
            out_step["held"] = [item.as_json() for item in plan.held]
        if plan.findings:
            out_step["findings"] = [{**_clean_json(item.as_json()), "text": finding_text(item)}
                                    for item in plan.findings]
        if plan.awaiting_activation is not None:
            out_step["awaiting_activation"] = plan.awaiting_activation.as_json()
        window = window_memory(replace(memory, readings=step.memory)) if memory and step.memory else None
        if window is not None:
            out_step["memory"] = {**_clean_json(window.to_json()),
                                  "pressure": render_reason(window.pressure_reason) if window.pressure else None}
        steps.append(out_step)
    return steps
