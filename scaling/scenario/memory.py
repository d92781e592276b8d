"""A scenario step's memory (docs/SCENARIO.md, step key ``memory``, micro-batch mode): the per-executor
figures a window measured, parsed into :class:`StepMemory`, and what the output gives of them: the
pressure flag (``scaling.planner.memory.memory_pressure``) and the heap recommendation
(``scaling.planner.memory.recommend_heap``, grown by ``memory_pressure_growth`` under pressure), both at the
option table's defaults (the memory options are the web app's, not a scenario policy's keys).

Sizes are MB (2^20 bytes), the GC share is of task time, 0..1.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from scaling.planner.memory import memory_pressure, recommend_heap
from scaling.policy.options import OPTION, default
from scaling.scenario.values import fail
from scaling.values.memory import MB, MemoryReading, Pressure

__all__ = ["MEMORY_KEYS", "StepMemory", "memory_output", "parse_memory", "step_pressure"]

MEMORY_KEYS = ("heap_max_mb", "heap_peak_mb", "gc_share", "state_mb")
#: The largest heap a step may give, MB (the ``memory_max_mb`` option's upper bound).
MAX_HEAP_MB = OPTION["memory_max_mb"].bounds[1]


@dataclass(frozen=True)
class StepMemory:
    """One window's memory, per executor (the executor closest to its maximum): ``heap_max_mb`` the
    heap maximum, ``heap_peak_mb`` the heap used at its peak, ``gc_share`` the GC share of task time,
    ``state_mb`` the state store's memory (shown, not sized from). Each None when not given."""

    heap_max_mb: float | None = None
    heap_peak_mb: float | None = None
    gc_share: float | None = None
    state_mb: float | None = None

    def reading(self) -> MemoryReading:
        """The reading ``scaling.planner.memory`` takes: bytes; a 0 peak is not a measurement (as the collector's)."""
        peak = round(self.heap_peak_mb * MB) if self.heap_peak_mb else None
        return MemoryReading(self.gc_share, peak, round(self.heap_max_mb * MB) if self.heap_max_mb else None)


def _number(obj: dict, key: str, field: str, low: float, high: float, *, above_low: bool = False) -> float | None:
    value = obj.get(key)
    if value is None:
        return None
    where = f"{field}.{key}"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise fail(where, f"must be a finite number, got {json.dumps(value)}")
    if value < low or value > high or (above_low and value == low):
        raise fail(where, f"must be within {'(' if above_low else '['}{low:g}, {high:g}], got {value}")
    return float(value)


def parse_memory(raw: Any, field: str) -> StepMemory:
    """``raw`` (a step's ``memory`` object) as :class:`StepMemory`. Raises :class:`scaling.scenario.values.ScenarioError`
    naming the field: not an object, an unknown key, a value not a finite number or out of range
    (``heap_max_mb`` in (0, ``MAX_HEAP_MB``], ``heap_peak_mb`` and ``state_mb`` >= 0, ``gc_share``
    in [0, 1]), a peak without its maximum."""
    if not isinstance(raw, dict):
        raise fail(field, f"must be an object, got {type(raw).__name__}")
    for key in raw:
        if key not in MEMORY_KEYS:
            raise fail(f"{field}.{key}", "unknown field")
    memory = StepMemory(heap_max_mb=_number(raw, "heap_max_mb", field, 0.0, MAX_HEAP_MB, above_low=True),
                        heap_peak_mb=_number(raw, "heap_peak_mb", field, 0.0, MAX_HEAP_MB),
                        gc_share=_number(raw, "gc_share", field, 0.0, 1.0),
                        state_mb=_number(raw, "state_mb", field, 0.0, MAX_HEAP_MB))
    if memory.heap_peak_mb is not None and memory.heap_max_mb is None:
        raise fail(f"{field}.heap_max_mb", "required with heap_peak_mb")
    return memory


def step_pressure(memory: StepMemory | None) -> Pressure | None:
    """The memory pressure of one step's window at the default thresholds
    (``memory_gc_pressure_threshold``, ``memory_heap_usage_threshold``); None without memory."""
    if memory is None:
        return None
    return memory_pressure([memory.reading()], gc_threshold=float(default("memory_gc_pressure_threshold")),
                           heap_threshold=float(default("memory_heap_usage_threshold")))


def memory_output(memory: StepMemory, executors: int | None) -> dict:
    """The step's ``memory`` in the output: the figures given, ``heap_usage`` (peak / maximum),
    ``pressure`` (the ``memory-pressure`` reason as code and data, or None) and ``recommendation``
    (``recommend_heap`` at the default overhead and bounds over ``executors`` JVMs, with ``changes``;
    None without a peak)."""
    pressure = step_pressure(memory)
    reading = memory.reading()
    recommendation = None
    if reading.heap_peak_bytes is not None and reading.heap_max_bytes:
        heap = recommend_heap(peak_bytes=reading.heap_peak_bytes, max_bytes=reading.heap_max_bytes,
                              overhead=float(default("memory_tuning_overhead")),
                              min_mb=int(default("memory_min_mb")), max_mb=int(default("memory_max_mb")),
                              executors=max(1, executors or 1),
                              pressure_growth=float(default("memory_pressure_growth")) if pressure else None)
        recommendation = {**heap.to_json(), "changes": heap.changes}
    return {"heap_max_mb": memory.heap_max_mb, "heap_peak_mb": memory.heap_peak_mb, "gc_share": memory.gc_share,
            "state_mb": memory.state_mb, "heap_usage": reading.heap_usage,
            "pressure": pressure.reason() if pressure else None, "recommendation": recommendation}
