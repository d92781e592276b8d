"""The plan as a typed, versioned value: ``JobPlan`` and ``VertexPlan`` (what ``plan_job`` and
``plan_micro_batch`` return), their JSON form (``JobPlan.to_json``, format ``PLAN_FORMAT``) and
its reader (``JobPlan.from_json``), which also reads the unversioned plans stored before reasons
were codes. Reasons are ``scaling.values.reasons.Reason`` values; ``scaling.words.reason_text`` words them."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from scaling.policy.numbers import INF
from scaling.values.findings import Finding
from scaling.values.mode import Mode
from scaling.values.reasons import (
    AwaitingActivation,
    Decision,
    Direction,
    HeldScaleDown,
    Limit,
    MemoryKind,
    MemoryStep,
    PlanFormatError,
    PlanLimit,
    Reason,
    legacy_text,
)
from scaling.values.state import ScalerState, ScalingRecord

__all__ = ["PLAN_FORMAT", "JobPlan", "MemorySize", "VertexPlan"]

PLAN_FORMAT = 2
"""The version ``JobPlan.to_json`` writes (``"format"``); a plan without one is the old shape."""


@dataclass(frozen=True)
class VertexPlan:
    """The plan for one vertex; ``proposed == current`` with a ``reason`` when it does not change.

    Rates are records/s. ``true_processing_rate`` is the vertex total in continuous mode (FLIP-271)
    and per busy task slot (records per core-second) in micro-batch mode.
    ``ideal_parallelism`` is DS2's π_v: the instances (cores) the vertex would keep busy at the
    target utilization. ``utilization`` is busy time over available time (0..1).
    ``scale_up_threshold`` / ``scale_down_threshold``: FLIP-271's bounds on the true processing rate;
    ``outside_bounds`` is true when the TPR lies outside them. ``expected_processing_rate`` is
    ``TPR × proposed / current`` (linear scaling). ``recommended`` is what the model computed before
    the job-level rules (gate, delayed scale-down, effectiveness, excluded periods). ``reason``: why
    (a ``VertexReason`` code with its data), or None when there is nothing to say.
    """

    vertex_id: str
    current: int
    proposed: int
    true_processing_rate: float
    true_output_rate: float
    selectivity: float
    target_data_rate: float
    catch_up_data_rate: float
    ideal_parallelism: int
    utilization: float
    busy_core_s_per_s: float
    adjustable: bool
    reason: Reason | None = None
    scale_up_threshold: float = 0.0
    scale_down_threshold: float = INF
    expected_processing_rate: float = 0.0
    outside_bounds: bool = False
    recommended: int | None = None


@dataclass(frozen=True)
class MemorySize:
    """A plan's decision on a memory other than the heap (``scaling.planner.memory.MemoryKind``): the pipeline's
    knob for it, its running value and the value proposed (MB, equal when the plan leaves it), and
    what the plan did with the recommendation (``MemoryStep``)."""

    kind: MemoryKind
    knob: str
    current_mb: int
    proposed_mb: int
    step: MemoryStep

    @property
    def changes(self) -> bool:
        return self.proposed_mb != self.current_mb

    def as_json(self) -> dict:
        return {"kind": str(self.kind), "knob": self.knob, "current_mb": self.current_mb,
                "proposed_mb": self.proposed_mb, "step": str(self.step)}


@dataclass(frozen=True)
class JobPlan:
    """The plan for a job; each field's meaning is on its line. The micro-batch fields (executors, cores,
    load, utilization, limits, findings) are None or empty in ``continuous`` mode."""

    #: ``scale`` (something changes), ``no-change`` (every vertex within its bounds, or nothing to change),
    #: ``blocked`` (a change was computed but a rule held it back).
    decision: Decision
    reasons: tuple[Reason, ...]  # why, as ``Reason`` values (``PlanReason`` / ``Limit`` codes with data)
    vertices: tuple[VertexPlan, ...]
    executors_current: int | None = None
    executors_proposed: int | None = None
    cores_per_executor: int | None = None
    cores_needed: int | None = None  # C*, task slots
    #: demand over available capacity, ``Σ_v (λ_v + catch-up_v) / TPR_v / (cores × (1 − overhead))``,
    #: compared with the utilization band (FLIP-271 thresholds).
    load: float | None = None
    utilization: float | None = None  # ``Σ busy / cores``
    overhead_fraction: float = 0.0
    bottleneck: str | None = None  # a vertex that cannot reach its share, e.g. pinned partitions, or None
    #: SPARK-12133's R = mean batch duration / trigger interval; at or above ``scale_down_veto_batch_ratio`` it
    #: vetoes scale-downs (``scaling.planner.signals``).
    batch_ratio: float | None = None
    mode: Mode = Mode.MICRO_BATCH  # or ``Mode.CONTINUOUS``
    executable: bool = True  # False inside an excluded period: the plan is computed but must not run
    #: FLIP-271 backlog processing (lag above the threshold): utilization band [0, 1], so a scale-down never
    #: triggers a scaling (it may join one, as in Flink).
    backlog_mode: bool = False
    restart_time_s: float = 0.0  # the restart time the plan used (configured or tracked), seconds
    algorithm: str = "ds2"  # the policy in the registry that produced the plan
    next_state: ScalerState | None = None  # the state after this evaluation, when one was given (not stored)
    held: tuple[HeldScaleDown, ...] = ()  # the delayed scale-downs held now (vertex, target, due time)
    limits: tuple[PlanLimit, ...] = ()  # what limits the plan (``reasons.Limit`` codes with their numbers)
    #: the busy share of each trigger interval at the target rate alone (no catch-up, no restart),
    #: ``Σ_v λ_v / TPR_v / min(tasks_v, C) / (1 − overhead)`` (0..1, ``scaling.planner.sizing.busy_share``), on
    #: the running cores (``utilization_now``) and on the proposed cores and tasks (``predicted_utilization``).
    utilization_now: float | None = None
    predicted_utilization: float | None = None
    #: a recommended rescale not applied yet: fewer consecutive evaluations than
    #: ``Policy.activation_evaluations`` recommended it (DS2's activation time).
    awaiting_activation: AwaitingActivation | None = None
    #: what cores cannot fix, with the action that can (``scaling.values.findings``: a pinned bottleneck);
    #: absent from plans stored before, read as none.
    findings: tuple[Finding, ...] = ()
    #: the heap of each JVM that runs tasks (the pipeline's ``memory`` knob, MB) now and proposed; None
    #: without a memory knob or a recommendation.
    memory_current_mb: int | None = None
    memory_proposed_mb: int | None = None
    memory_step: MemoryStep | None = None  # what the plan did with the heap recommendation, None without one
    #: the plan's decisions on the other memories with a knob (the executors' overhead, the RocksDB state
    #: memory), one per kind.
    memory_sizes: tuple[MemorySize, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", Mode(self.mode))  # ValueError for a mode that is not one

    def limit(self, code: Limit) -> PlanLimit | None:
        """The first limit with ``code``, or None."""
        return next((item for item in self.limits if item.code == code), None)

    def vertex(self, vertex_id: str) -> VertexPlan:
        """The plan of one vertex. Raises KeyError when unknown."""
        for plan in self.vertices:
            if plan.vertex_id == vertex_id:
                return plan
        raise KeyError(f"unknown vertex {vertex_id!r}")

    def applied_records(self, at_s: float) -> tuple[ScalingRecord, ...]:
        """The scalings this plan applies at ``at_s`` (seconds), one per vertex whose parallelism changes
        and whose true processing rate is finite: what ineffective scale-up detection compares against
        later (FLIP-271 ``ScalingSummary``; expected rate = ``TPR × new / old``, linear scaling)."""
        return tuple(ScalingRecord(at_s=at_s, vertex_id=v.vertex_id, old_parallelism=v.current,
                                   new_parallelism=v.proposed, true_processing_rate=float(v.true_processing_rate),
                                   expected_processing_rate=float(v.true_processing_rate) * v.proposed / v.current)
                     for v in self.vertices if v.proposed != v.current and math.isfinite(v.true_processing_rate))

    @property
    def changes(self) -> bool:
        """True when any vertex, the executor count or a memory knob changes."""
        return (self.executors_proposed != self.executors_current or self.memory_changes
                or any(v.proposed != v.current for v in self.vertices))

    @property
    def memory_changes(self) -> bool:
        """True when the plan changes a memory knob (the heap or another): a new JVM, the warm handover."""
        return (self.memory_proposed_mb is not None and self.memory_proposed_mb != self.memory_current_mb) \
            or any(size.changes for size in self.memory_sizes)

    def to_json(self, *, infinity_as_null: bool = False) -> dict:
        """The stored form: ``{"format": 2, ...}`` with every field but ``next_state``; floats
        rounded to 3 decimals, infinity as ``"inf"``; reasons as ``Reason.to_json`` objects. With
        ``infinity_as_null``, the API's form: an infinite number as null (``from_json`` reads the
        stored form only)."""
        out: dict[str, Any] = {"format": PLAN_FORMAT}
        for f in fields(self):
            if f.name != "next_state":
                out[f.name] = _json(getattr(self, f.name), infinity_as_null)
        return out

    @classmethod
    def from_json(cls, data: Mapping) -> JobPlan:
        """A plan ``to_json`` wrote, or one of the unversioned shape stored before (reasons and
        vertex notes as sentences, read as ``PlanReason.LEGACY_TEXT`` reasons). Missing keys take
        their defaults; unknown keys are ignored. Raises ``PlanFormatError`` naming the field."""
        if not isinstance(data, Mapping):
            raise PlanFormatError(f"plan: an object, not {type(data).__name__}")
        version = data.get("format")
        if version not in (None, PLAN_FORMAT) or isinstance(version, bool):
            raise PlanFormatError(f"format: {version!r} is not {PLAN_FORMAT} (or absent, the old shape)")
        read_reason = Reason.from_json if version == PLAN_FORMAT else _legacy_reason
        values: dict[str, Any] = {
            name: _read(kind, data[name], name) for name, kind in _JOB_FIELDS.items() if name in data}
        values["decision"] = _enum(Decision, data.get("decision", Decision.NO_CHANGE), "decision")
        values["reasons"] = tuple(_at(read_reason, item, f"reasons[{i}]")
                                  for i, item in enumerate(_list(data, "reasons")))
        values["vertices"] = tuple(_at(_vertex, item, f"vertices[{i}]", version == PLAN_FORMAT)
                                   for i, item in enumerate(_list(data, "vertices")))
        values["held"] = tuple(_at(_held, item, f"held[{i}]") for i, item in enumerate(_list(data, "held")))
        values["limits"] = tuple(_at(_limit, item, f"limits[{i}]") for i, item in enumerate(_list(data, "limits")))
        values["findings"] = tuple(_at(Finding.from_json, item, f"findings[{i}]")
                                   for i, item in enumerate(_list(data, "findings")))
        values["memory_sizes"] = tuple(_at(_memory_size, item, f"memory_sizes[{i}]")
                                       for i, item in enumerate(_list(data, "memory_sizes")))
        step = data.get("memory_step")
        values["memory_step"] = None if step is None else _enum(MemoryStep, step, "memory_step")
        waiting = data.get("awaiting_activation")
        values["awaiting_activation"] = None if waiting is None else _at(_awaiting, waiting, "awaiting_activation")
        values["mode"] = _enum(Mode, values.get("mode", Mode.MICRO_BATCH), "mode")
        return cls(**values)



def _json(value: Any, infinity_as_null: bool) -> Any:
    """``value`` as JSON: floats rounded to 3 decimals, infinity as ``"inf"`` (null with
    ``infinity_as_null``); values with ``to_json`` / ``as_json`` and dataclasses by their fields; enums
    as their strings."""
    if isinstance(value, float):
        if math.isfinite(value):
            return round(value, 3)
        return None if infinity_as_null else "inf" if value > 0 else "-inf"
    if isinstance(value, str) or value is None or isinstance(value, (bool, int)):
        return str(value) if isinstance(value, str) else value
    if isinstance(value, Reason):
        return {"code": str(value.code), "vertex_id": value.vertex_id,
                "data": _json(dict(value.data), infinity_as_null)}
    if isinstance(value, Finding):
        return _json(value.as_json(infinity_as_null=infinity_as_null), infinity_as_null)
    if isinstance(value, (PlanLimit, HeldScaleDown, AwaitingActivation, MemorySize)):
        return _json(value.as_json(), infinity_as_null)
    if isinstance(value, VertexPlan):
        return {f.name: _json(getattr(value, f.name), infinity_as_null) for f in fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _json(v, infinity_as_null) for k, v in value.items()}
    return [_json(v, infinity_as_null) for v in value]


# JSON readers: a kind per field; each raises PlanFormatError naming the field.
def _number(value: Any, name: str) -> float:
    if value in ("inf", "-inf"):
        return INF if value == "inf" else -INF
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise PlanFormatError(f"{name}: a number, not {value!r}")
    return value


def _integer(value: Any, name: str) -> int:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise PlanFormatError(f"{name}: an integer, not {value!r}")
    return value


def _read(kind: str, value: Any, name: str) -> Any:
    if kind.endswith("?"):
        if value is None:
            return None
        kind = kind[:-1]
    if kind == "float":
        return _number(value, name)
    if kind == "int":
        return _integer(value, name)
    if kind == "bool":
        if not isinstance(value, bool):
            raise PlanFormatError(f"{name}: true or false, not {value!r}")
        return value
    if not isinstance(value, str):
        raise PlanFormatError(f"{name}: a string, not {value!r}")
    return value


_JOB_FIELDS = {
    "executors_current": "int?", "executors_proposed": "int?", "cores_per_executor": "int?", "cores_needed": "int?",
    "load": "float?", "utilization": "float?", "overhead_fraction": "float", "bottleneck": "str?",
    "batch_ratio": "float?", "mode": "str", "executable": "bool", "backlog_mode": "bool", "restart_time_s": "float",
    "algorithm": "str", "utilization_now": "float?", "predicted_utilization": "float?",
    "memory_current_mb": "int?", "memory_proposed_mb": "int?",
}
_VERTEX_FIELDS = {
    "vertex_id": "str", "current": "int", "proposed": "int", "true_processing_rate": "float",
    "true_output_rate": "float", "selectivity": "float", "target_data_rate": "float", "catch_up_data_rate": "float",
    "ideal_parallelism": "int", "utilization": "float", "busy_core_s_per_s": "float", "adjustable": "bool",
    "scale_up_threshold": "float", "scale_down_threshold": "float", "expected_processing_rate": "float",
    "outside_bounds": "bool", "recommended": "int?",
}
_VERTEX_DEFAULTS = {"true_processing_rate": 0.0, "true_output_rate": 0.0, "selectivity": 0.0, "target_data_rate": 0.0,
                    "catch_up_data_rate": 0.0, "ideal_parallelism": 0, "utilization": 0.0, "busy_core_s_per_s": 0.0,
                    "adjustable": True}


def _at(read: Any, item: Any, name: str, *args: Any) -> Any:
    """``read(item, *args)``, its error prefixed with ``name``."""
    try:
        return read(item, *args)
    except PlanFormatError as exc:
        raise PlanFormatError(f"{name}.{exc}") from None


def _object(item: Any) -> Mapping:
    if not isinstance(item, Mapping):
        raise PlanFormatError(f"self: an object, not {type(item).__name__}")
    return item


def _list(data: Mapping, name: str) -> list:
    value = data.get(name, [])
    if not isinstance(value, (list, tuple)):
        raise PlanFormatError(f"{name}: a list, not {type(value).__name__}")
    return list(value)


def _enum(enum: Any, value: Any, name: str) -> Any:
    try:
        return enum(value)
    except ValueError:
        raise PlanFormatError(f"{name}: {value!r} is not one of {', '.join(str(m) for m in enum)}") from None


def _legacy_reason(item: Any) -> Reason:
    if not isinstance(item, str):
        raise PlanFormatError(f"self: a sentence, not {type(item).__name__}")
    return legacy_text(item)


def _vertex(item: Any, versioned: bool) -> VertexPlan:
    item = _object(item)
    missing = [k for k in ("vertex_id", "current", "proposed") if k not in item]
    if missing:
        raise PlanFormatError(f"{missing[0]}: missing")
    values = {**_VERTEX_DEFAULTS, **{k: _read(kind, item[k], k) for k, kind in _VERTEX_FIELDS.items() if k in item}}
    if versioned:
        reason = item.get("reason")
        values["reason"] = None if reason is None else _at(Reason.from_json, reason, "reason")
    else:
        note = item.get("note") or ""
        if not isinstance(note, str):
            raise PlanFormatError("note: a string")
        values["reason"] = Reason(legacy_text(note).code, values["vertex_id"], {"text": note}) if note else None
    return VertexPlan(**values)


def _held(item: Any) -> HeldScaleDown:
    item = _object(item)
    try:
        return HeldScaleDown(_read("str", item["vertex_id"], "vertex_id"), _integer(item["current"], "current"),
                             _integer(item["target"], "target"), _number(item["first_at_s"], "first_at_s"),
                             _number(item["due_s"], "due_s"))
    except KeyError as exc:
        raise PlanFormatError(f"{exc.args[0]}: missing") from None


def _limit(item: Any) -> PlanLimit:
    reason = Reason.from_json(_object(item))
    if not isinstance(reason.code, Limit):
        raise PlanFormatError(f"code: {str(reason.code)!r} is not a limit")
    return PlanLimit(reason.code, reason.vertex_id, dict(reason.data))


def _memory_size(item: Any) -> MemorySize:
    item = _object(item)
    try:
        return MemorySize(_enum(MemoryKind, item["kind"], "kind"), _read("str", item["knob"], "knob"),
                          _integer(item["current_mb"], "current_mb"), _integer(item["proposed_mb"], "proposed_mb"),
                          _enum(MemoryStep, item["step"], "step"))
    except KeyError as exc:
        raise PlanFormatError(f"{exc.args[0]}: missing") from None


def _awaiting(item: Any) -> AwaitingActivation:
    item = _object(item)
    try:
        return AwaitingActivation(_enum(Direction, item["direction"], "direction"), _integer(item["count"], "count"),
                                  _integer(item["required"], "required"))
    except KeyError as exc:
        raise PlanFormatError(f"{exc.args[0]}: missing") from None
