"""Decisions and reasons as values (Flink's ``ScaleReason`` is the model): StrEnum codes with
structured data. Text for people is rendered from them (``scaling.words.reason_text``); nothing parses
a sentence.

A ``StrEnum`` member equals its string value, so ``plan.decision == "scale"`` holds. The
codes of ``PlanReason``, ``VertexReason`` and ``Limit`` are distinct, so a stored code names its
enum.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum


class PlanFormatError(ValueError):
    """A stored plan or reason that is not one this version reads (``JobPlan.from_json``,
    ``Reason.from_json``): the message names the field."""


class Decision(StrEnum):
    """The job-level outcome of one evaluation."""

    SCALE = "scale"
    NO_CHANGE = "no-change"
    BLOCKED = "blocked"


class VertexChange(StrEnum):
    """The per-vertex outcome before the job-level gate (Flink ``ParallelismChange``)."""

    NONE = "none"
    REQUIRED = "required"
    HELD = "held"          # a delayed scale-down inside its interval: no change now (FLINK-36535)
    BLOCKED = "blocked"    # an ineffective scale-up that is blocked


class VertexReason(StrEnum):
    """Why a vertex gets its recommendation (the code of ``VertexPlan.reason``, a ``Reason``)."""

    WITHIN_BOUNDS = "within-bounds"
    SCALE_UP = "scale-up"
    SCALE_DOWN = "scale-down"
    BOUNDED = "bounded"                    # data: wanted, lower, upper
    ALIGNED = "aligned"                    # data: from, to, n
    ALIGNMENT_BLOCKED = "alignment-blocked"  # legacy adjust mode kept the current parallelism
    IDLE = "idle"                          # no input: infinite true processing rate
    EXCLUDED = "excluded"
    PINNED = "pinned"
    SOURCE_SCALING_DISABLED = "source-scaling-disabled"
    INEFFECTIVE_BLOCKED = "ineffective-blocked"   # data: tpr_before, tpr_now, expected
    INEFFECTIVE_WARNING = "ineffective-warning"
    HELD_SCALE_DOWN = "held-scale-down"    # data: current, target, due_s, first_at_s
    DELAYED_SCALE_DOWN_DUE = "delayed-scale-down-due"  # data: current, target, window_start_s
    SCALE_DOWN_WINDOW_NOT_BELOW = "scale-down-window-not-below"  # data: current, target, interval_s
    EQUALS_CURRENT = "equals-current"      # outside its bounds, but the computed parallelism is the current
    CAPPED = "capped"                      # micro-batch: data tasks (partitions / max parallelism)
    # Wrappers: the vertex's own reason is in ``cause`` (``Reason.cause``); data: current, computed.
    NOT_EXECUTABLE = "not-executable"      # data: period
    AWAITING_ACTIVATION = "awaiting-activation"
    NOT_NEEDED = "not-needed"              # a required change while no vertex triggers a scaling


class PlanReason(StrEnum):
    """Why a plan decides what it decides, job-level (Flink's ``ScaleReason``); data in ``Reason.data``."""

    # continuous (FLIP-271 ``ScalingExecutor``)
    THRESHOLD_EXCEEDED = "threshold-exceeded"   # vertex_id; data: true_processing_rate, scale_up_threshold,
    #                                             scale_down_threshold
    CHANGE_HELD = "change-held"                 # vertex_id; the threshold data, the vertex's reason in cause
    NO_VERTEX_TO_CHANGE = "no-vertex-to-change"
    EVERY_VERTEX_WITHIN_BOUNDS = "every-vertex-within-bounds"
    # micro-batch (the utilization band on the job's load)
    LOAD_ABOVE_BAND = "load-above-band"         # data: load, low, high, need, cores, overhead
    LOAD_BELOW_BAND = "load-below-band"         # data: load, low, high, need, cores
    WITHIN_BAND = "within-band"                 # data: load, low, high
    PLAN_EQUALS_RUNNING = "plan-equals-running"
    HELD_EXECUTOR_SCALE_DOWN = "held-executor-scale-down"  # data: current, target, due_s, first_at_s
    BATCH_OVERRUN = "batch-overrun"             # data: ratio, min_ratio, batches, trigger_interval_s,
    #                                             batch_duration_s (scaling.planner.signals)
    SCALE_DOWN_VETOED = "scale-down-vetoed"     # data: signal (a VetoSignal), value, threshold
    SAMPLES_NOT_READY = "samples-not-ready"     # data: code (a scaling.values.readiness.NotReady), samples, its data
    MEMORY_PRESSURE = "memory-pressure"         # data: signal ("gc", "heap" or "gc,heap"), gc_share, gc_threshold,
    #                                             heap_usage, heap_threshold, heap_peak_mb, heap_max_mb
    #                                             (scaling.planner.memory)
    MEMORY_RESIZE = "memory-resize"             # data: knob, current_mb, recommended_mb, peak_mb, saves_mb,
    #                                             under_pressure (1 or 0), step (a MemoryStep)
    MEMORY_WITHHELD = "memory-withheld"         # data: cause (a scaling.values.memory.Withheld) and its figures
    # both modes: the job-level gate
    ACTIVATION_PENDING = "activation-pending"   # data: direction, count, required (DS2's activation time)
    EXCLUDED_PERIOD = "excluded-period"         # data: period
    BACKLOG_MODE = "backlog-mode"               # data: lag_threshold_s, mode
    # the other algorithms (``scaling.planner.algorithms``)
    BATCH_RATIO_NO_BATCH = "batch-ratio-no-batch"
    BATCH_RATIO_UP = "batch-ratio-up"           # data: ratio, scale_up_ratio, added
    BATCH_RATIO_DOWN = "batch-ratio-down"       # data: ratio, scale_down_ratio
    BATCH_RATIO_WITHIN = "batch-ratio-within"   # data: ratio, scale_down_ratio, scale_up_ratio
    BATCH_RATIO_AT_MIN = "batch-ratio-at-min"   # data: ratio, scale_down_ratio, min_executors
    REACTIVE_EXECUTORS = "reactive-executors"   # data: added, cores (FLIP-160 reactive mode)
    MIN_INCREASE_NOT_MET = "min-increase-not-met"  # data: current, new, min_increase (FLIP-160)
    # the simulator's baselines (``scaling.sim.baselines``)
    WAITING_AFTER_ACTION = "waiting-after-action"  # data: wait_s, last_at_s
    BACKPRESSURE = "backpressure"               # vertex_id (or executors); data: fraction, current, new
    OVER_PROVISIONED = "over-provisioned"       # vertex_id (or executors); data: busy, current, new
    NO_BACKPRESSURE = "no-backpressure"
    METRICS_MISSING = "metrics-missing"
    UTILIZATION_WITHIN_TOLERANCE = "utilization-within-tolerance"  # data: utilization, target
    UTILIZATION_STABILIZING = "utilization-stabilizing"  # data: utilization, target, window_s
    UTILIZATION_SCALE = "utilization-scale"     # data: utilization, target, ratio, current, new (executors)
    # a plan stored before reasons were codes
    LEGACY_TEXT = "legacy-text"                 # data: text


class Limit(StrEnum):
    """What limits a micro-batch plan (``JobPlan.limits``), its numbers in the ``PlanLimit``'s data."""

    MAX_EXECUTORS = "max-executors"        # data: cores_needed, cores_max
    PINNED_STAGE = "pinned-stage"          # vertex_id; data: fill (share of the trigger interval)
    PARTITIONS = "partitions"              # vertex_id; data: tasks (its cap), fill
    BOTTLENECK = "bottleneck"              # vertex_id; data: fill, skew
    CATCH_UP_UNREACHABLE = "catch-up-unreachable"  # data: catch_up_s (at max executors), catch_up_duration_s
    RETENTION_RISK = "retention-risk"      # vertex_id; data: lag_s, retention_s
    CORES_NOT_ADJUSTABLE = "cores-not-adjustable"  # data: cores, cores_needed, predicted_utilization,
    #                                                utilization_with_catch_up (no executors knob)
    DIMINISHING_RETURNS = "diminishing-returns"  # data: cores, utilization, next_cores, next_utilization,
    #                                              efficiency, min_efficiency (scaling.planner.sizing.gains_stop)
    CORES_CANNOT_HELP = "cores-cannot-help"  # vertex_id (the one filling most); data: fill (the pinned stages
    #                                          that run no more tasks than the cores, their share of each trigger
    #                                          interval), high (the band's upper edge), cores (kept)


class VetoSignal(StrEnum):
    """The measured signal that vetoed a scale-down (``PlanReason.SCALE_DOWN_VETOED``'s ``signal``)."""

    BATCH_RATIO = "batch-ratio"            # value: R = batch duration / trigger interval (SPARK-12133)
    BACKLOG_GROWTH = "backlog-growth"      # value: the sources' backlog growth, records/s
    NOT_READY = "not-ready"                # value: the window's not-ready samples (scaling.values.readiness)


class MemoryKind(StrEnum):
    """Which memory a recommendation sizes (each a pipeline knob target, fixed at a JVM's start)."""

    HEAP = "heap"          # the heap of each JVM that runs tasks (spark.executor.memory; local: spark.driver.memory)
    OVERHEAD = "overhead"  # each executor's non-heap memory (spark.executor.memoryOverhead), on a cluster
    STATE = "state"        # the RocksDB state stores' shared memory of each JVM (bounded memory)


class MemoryStep(StrEnum):
    """What a plan does with the heap recommendation (``JobPlan.memory_step``, ``memory-resize``'s ``step``;
    ``scaling.planner.memory.memory_decision``)."""

    ALONE = "alone"                    # memory_apply, under memory pressure: a memory change on its own
    ALONG = "along"                    # memory_apply: with a change of another knob
    REQUESTED = "requested"            # a person asked for it (the job page, the approve form)
    RECOMMEND_ONLY = "recommend-only"  # memory_apply off: shown, never proposed by the loop
    WAITS = "waits"                    # memory_apply, no pressure, nothing else changes: no restart for memory alone
    HELD = "held"                      # a decrease under memory pressure or on a window that is not ready
    AT_BOUND = "at-bound"              # the memory knob's bounds keep it at its running value
    NO_KNOB = "no-knob"                # the pipeline declares no memory knob: recommend-only


ReasonCode = PlanReason | VertexReason | Limit
_CODES: dict[str, ReasonCode] = {str(m): m for enum in (PlanReason, VertexReason, Limit) for m in enum}
CAUSE = "cause"
"""The data key of a wrapped reason's code; its data keys carry the prefix ``cause.``."""


def reason_code(value: object) -> ReasonCode:
    """The code named by ``value`` (a string). Raises ``PlanFormatError`` for an unknown one."""
    code = _CODES.get(value) if isinstance(value, str) else None
    if code is None:
        raise PlanFormatError(f"code: unknown reason code {value!r}")
    return code


def _json_value(value: float | int | str | None, infinity_as_null: bool) -> float | int | str | None:
    if not isinstance(value, float) or math.isfinite(value):
        return value
    return None if infinity_as_null else "inf" if value > 0 else "-inf"


def _read_value(key: str, value: object) -> float | int | str | None:
    if value in ("inf", "-inf"):
        return math.inf if value == "inf" else -math.inf
    if value is None or isinstance(value, str) or (
            isinstance(value, (int, float)) and not isinstance(value, bool) and value == value):
        return value
    raise PlanFormatError(f"data.{key}: a number, a string or null, not {value!r}")


def data_json(data: Mapping[str, float | int | str | None], *, infinity_as_null: bool = False) -> dict:
    """Numbers and words of a reason (or finding) as JSON: infinity as ``"inf"`` (stored), or as null
    with ``infinity_as_null`` (the API's, whose numbers are numbers or null)."""
    return {k: _json_value(v, infinity_as_null) for k, v in data.items()}


def read_data(values: object) -> dict[str, float | int | str | None]:
    """The data ``data_json`` wrote. Raises ``PlanFormatError`` naming the key."""
    if not isinstance(values, Mapping) or not all(isinstance(k, str) for k in values):
        raise PlanFormatError("data: an object")
    return {k: _read_value(k, v) for k, v in values.items()}


@dataclass(frozen=True)
class Reason:
    """One reason of a plan: a code, the vertex it concerns (or None for the job), and numbers or
    words (``data``, read-only). A wrapper reason (``VertexReason.NOT_EXECUTABLE``, ...) carries the
    reason it wraps as ``cause`` (see ``with_cause``)."""

    code: ReasonCode
    vertex_id: str | None = None
    data: Mapping[str, float | int | str | None] = field(default_factory=dict)

    def with_cause(self, cause: Reason) -> Reason:
        """This reason wrapping ``cause``: its code under ``cause``, its data under ``cause.``."""
        data = dict(self.data)
        data[CAUSE] = str(cause.code)
        data.update({f"{CAUSE}.{k}": v for k, v in cause.data.items()})
        return Reason(self.code, self.vertex_id, data)

    @property
    def cause(self) -> Reason | None:
        """The wrapped reason, or None. Raises ``PlanFormatError`` for an unknown cause code."""
        if CAUSE not in self.data:
            return None
        prefix = f"{CAUSE}."
        return Reason(reason_code(self.data[CAUSE]), self.vertex_id,
                      {k[len(prefix):]: v for k, v in self.data.items() if k.startswith(prefix)})

    def to_json(self, *, infinity_as_null: bool = False) -> dict:
        """``{"code": str, "vertex_id": str | None, "data": {...}}``, infinity as ``"inf"`` (null with
        ``infinity_as_null``, :func:`data_json`)."""
        return {"code": str(self.code), "vertex_id": self.vertex_id,
                "data": data_json(self.data, infinity_as_null=infinity_as_null)}

    @classmethod
    def from_json(cls, data: object) -> Reason:
        """The reason ``to_json`` wrote (``"inf"`` read back as infinity). Raises ``PlanFormatError``."""
        if not isinstance(data, Mapping):
            raise PlanFormatError(f"reason: an object, not {type(data).__name__}")
        vertex_id = data.get("vertex_id")
        if vertex_id is not None and not isinstance(vertex_id, str):
            raise PlanFormatError("vertex_id: a string or null")
        return cls(reason_code(data.get("code")), vertex_id, read_data(data.get("data", {})))


def legacy_text(text: str) -> Reason:
    """A sentence of a plan stored before reasons were codes."""
    return Reason(PlanReason.LEGACY_TEXT, None, {"text": text})


@dataclass(frozen=True)
class PlanLimit:
    """One limit of a plan: a code, the vertex it concerns (or None for the job), and numbers (a
    plain dict, so ``dataclasses.asdict`` of a plan works; treat it as read-only)."""

    code: Limit
    vertex_id: str | None = None
    data: Mapping[str, float] = field(default_factory=dict)

    def as_json(self) -> dict:
        return {"code": str(self.code), "vertex_id": self.vertex_id, "data": dict(self.data)}


@dataclass(frozen=True)
class HeldScaleDown:
    """A scale-down held by ``scale_down_interval_s`` (FLINK-36018): ``target`` is the largest
    recommendation of the window; it is due at ``due_s`` (seconds since the epoch). ``vertex_id``
    is ``"executors"`` for the executor count in micro-batch mode."""

    vertex_id: str
    current: int
    target: int
    first_at_s: float
    due_s: float

    def as_json(self) -> dict:
        return {"vertex_id": self.vertex_id, "current": self.current, "target": self.target,
                "first_at_s": self.first_at_s, "due_s": self.due_s}


class Direction(StrEnum):
    """The direction of a recommended rescale."""

    UP = "up"
    DOWN = "down"


@dataclass(frozen=True)
class AwaitingActivation:
    """A rescale recommended by ``count`` consecutive evaluations, fewer than the ``required``
    ``Policy.activation_evaluations`` (DS2's activation time, Kalavri et al., OSDI 2018, §4): it is
    not applied yet."""

    direction: Direction
    count: int
    required: int

    def as_json(self) -> dict:
        return {"direction": str(self.direction), "count": self.count, "required": self.required}
