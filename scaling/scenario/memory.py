"""The memory of a scenario (docs/SCENARIO.md, micro-batch mode): a step's ``memory`` readings, the
document's ``memory`` (the memory options, the pipeline's memory knobs, local mode, the state store)
parsed into the model's values, and the step's memory in the output (``scaling.planner.memory.
window_memory``, the one definition the pages, the API and the decision use). Sizes are MB."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from scaling.policy.memory import MEMORY_OPTIONS, MemoryPolicy
from scaling.policy.numbers import is_finite_number
from scaling.policy.option_types import PolicyError
from scaling.policy.options import OPTION
from scaling.scenario.values import as_object, boolean, check_keys, fail, string
from scaling.values.memory import MB, MemoryKnob, MemoryReading, WindowMemory
from scaling.values.reasons import MemoryKind

__all__ = ["KNOB_KEYS", "MEMORY_KEYS", "READING_KEYS", "ScenarioMemory", "parse_readings", "parse_scenario_memory",
           "reading_json", "window_json"]

READING_KEYS = ("heap_max_mb", "heap_peak_mb", "gc_share", "state_mb", "nonheap_peak_mb", "executors")
KNOB_KEYS = ("kind", "name", "running_mb", "min_mb", "max_mb")
MEMORY_KEYS = (*MEMORY_OPTIONS, "knobs", "local_mode", "state_in_rocksdb")
#: The largest memory size a scenario may give, MB (the ``memory_max_mb`` option's upper bound).
MAX_MB = OPTION["memory_max_mb"].bounds[1]


@dataclass(frozen=True)
class ScenarioMemory:
    """The document's ``memory``: the memory options (defaults: the option table's), the memory knobs
    with the values they start with, ``local_mode`` and ``state_in_rocksdb``."""

    policy: MemoryPolicy = MemoryPolicy()
    knobs: tuple[MemoryKnob, ...] = ()
    local_mode: bool = False
    state_in_rocksdb: bool = True


def _size(obj: dict, key: str, field: str, low: float, high: float, *, above_low: bool = False) -> float | None:
    value = obj.get(key)
    if value is None:
        return None
    where = f"{field}.{key}"
    if not is_finite_number(value):
        raise fail(where, f"must be a finite number, got {json.dumps(value)}")
    if value < low or value > high or (above_low and value == low):
        raise fail(where, f"must be within {'(' if above_low else '['}{low:g}, {high:g}], got {value}")
    return float(value)


def _bytes(mb: float | None) -> int | None:
    return None if mb is None else round(mb * MB)


def _reading(raw: Any, field: str, executors: int) -> MemoryReading:
    obj = as_object(raw, field)
    check_keys(obj, READING_KEYS, field)
    heap_max = _size(obj, "heap_max_mb", field, 0.0, MAX_MB, above_low=True)
    heap_peak = _size(obj, "heap_peak_mb", field, 0.0, MAX_MB)
    if heap_peak is not None and heap_max is None:
        raise fail(f"{field}.heap_max_mb", "required with heap_peak_mb")
    jvms = _size(obj, "executors", field, 1, MAX_MB)
    if jvms is not None and not float(jvms).is_integer():
        raise fail(f"{field}.executors", f"must be an integer, got {json.dumps(obj['executors'])}")
    return MemoryReading(gc_share=_size(obj, "gc_share", field, 0.0, 1.0),
                         heap_peak_bytes=_bytes(heap_peak) or None,  # a 0 peak is not a measurement
                         heap_max_bytes=_bytes(heap_max), executors=executors if jvms is None else int(jvms),
                         state_bytes=_bytes(_size(obj, "state_mb", field, 0.0, MAX_MB)),
                         nonheap_peak_bytes=_bytes(_size(obj, "nonheap_peak_mb", field, 0.0, MAX_MB)))


def parse_readings(raw: Any, field: str, executors: int) -> tuple[MemoryReading, ...]:
    """A step's ``memory``: one reading (an object) or the window's readings (a list, oldest first),
    each of the JVM closest to its heap maximum (``executors``: the JVMs it ran on, default the
    step's). Raises ``ScenarioError`` naming the field: an unknown key, a value not a finite number
    or out of range (``heap_max_mb`` in (0, ``MAX_MB``], the other sizes in [0, ``MAX_MB``],
    ``gc_share`` in [0, 1]), a peak without its maximum."""
    if isinstance(raw, list):
        if not raw:
            raise fail(field, "must be an object or a non-empty list of readings")
        return tuple(_reading(item, f"{field}[{i}]", executors) for i, item in enumerate(raw))
    if not isinstance(raw, dict):
        raise fail(field, f"must be an object or a list, got {type(raw).__name__}")
    return (_reading(raw, field, executors),)


def _knob(raw: Any, field: str) -> MemoryKnob:
    obj = as_object(raw, field)
    check_keys(obj, KNOB_KEYS, field)
    for key in KNOB_KEYS:
        if key not in obj:
            raise fail(f"{field}.{key}", "required")
    kind = string(obj["kind"], f"{field}.kind")
    if kind not in set(MemoryKind):
        raise fail(f"{field}.kind", f"must be one of {', '.join(MemoryKind)}, got {json.dumps(kind)}")
    sizes = {}
    for key in ("running_mb", "min_mb", "max_mb"):
        value = obj[key]
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_MB:
            raise fail(f"{field}.{key}", f"must be an integer within [1, {MAX_MB}], got {json.dumps(value)}")
        sizes[key] = value
    if sizes["min_mb"] > sizes["max_mb"]:
        raise fail(f"{field}.min_mb", f"{sizes['min_mb']} is above max_mb {sizes['max_mb']}")
    return MemoryKnob(MemoryKind(kind), string(obj["name"], f"{field}.name"), **sizes)


def parse_scenario_memory(raw: Any) -> ScenarioMemory:
    """The document's ``memory`` (None: the defaults, no knob). Raises ``ScenarioError`` naming the
    field: an unknown key, an option out of its bounds, a knob without a field or twice of a kind."""
    if raw is None:
        return ScenarioMemory()
    obj = as_object(raw, "memory")
    check_keys(obj, MEMORY_KEYS, "memory")
    try:
        policy = MemoryPolicy(**{k: obj[k] for k in MEMORY_OPTIONS if k in obj})
    except PolicyError as exc:
        raise fail("memory", str(exc)) from None
    knobs_raw = obj.get("knobs", [])
    if not isinstance(knobs_raw, list):
        raise fail("memory.knobs", "must be a list")
    knobs = tuple(_knob(item, f"memory.knobs[{i}]") for i, item in enumerate(knobs_raw))
    kinds = [k.kind for k in knobs]
    if len(set(kinds)) != len(kinds):
        raise fail("memory.knobs", "at most one knob of each kind")
    return ScenarioMemory(policy, knobs, boolean(obj.get("local_mode", False), "memory.local_mode"),
                          boolean(obj.get("state_in_rocksdb", True), "memory.state_in_rocksdb"))


def reading_json(reading: MemoryReading) -> dict:
    """A reading in the document's form (``parse_readings`` reads it back to the same value)."""
    sizes = {"heap_max_mb": reading.heap_max_bytes, "heap_peak_mb": reading.heap_peak_bytes,
             "state_mb": reading.state_bytes, "nonheap_peak_mb": reading.nonheap_peak_bytes}
    out: dict[str, Any] = {key: value / MB for key, value in sizes.items() if value is not None}
    if reading.gc_share is not None:
        out["gc_share"] = reading.gc_share
    out["executors"] = reading.executors
    return out


def window_json(window: WindowMemory | None) -> dict | None:
    """A step's memory in the output: ``WindowMemory.to_json`` (the API's form), None without memory."""
    return None if window is None else window.to_json()
