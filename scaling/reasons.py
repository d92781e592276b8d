"""Decisions and reasons as values (Flink's ``ScaleReason`` is the model): StrEnum codes with
structured data. Text for people is rendered from them; nothing parses a sentence.

A ``StrEnum`` member equals its string value, so ``plan.decision == "scale"`` keeps working.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum


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
    """Why a vertex gets its recommendation (``VertexDecision.reason``, data in ``.data``)."""

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
    BACKLOG_NO_SCALE_DOWN = "backlog-no-scale-down"  # no longer produced (backlog mode joins scale-downs, as
    #                                                  Flink); kept so plans stored before still read
    HELD_SCALE_DOWN = "held-scale-down"    # data: target, due_s, first_at_s
    DELAYED_SCALE_DOWN_DUE = "delayed-scale-down-due"  # data: target, window_start_s


class Limit(StrEnum):
    """What limits a micro-batch plan (issue 13 item 6; ``JobPlan.limits``)."""

    MAX_EXECUTORS = "max-executors"        # data: cores_needed, cores_max
    PINNED_STAGE = "pinned-stage"          # vertex_id; data: fill (share of the trigger interval)
    PARTITIONS = "partitions"              # vertex_id; data: tasks (its cap), fill
    BOTTLENECK = "bottleneck"              # vertex_id; data: fill, skew
    CATCH_UP_UNREACHABLE = "catch-up-unreachable"  # data: catch_up_s (at max executors), catch_up_duration_s
    RETENTION_RISK = "retention-risk"      # vertex_id; data: lag_s, retention_s


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


def activation_text(wait: AwaitingActivation) -> str:
    """The sentence of a plan held by DS2's activation time."""
    return (f"activation time: scale-{wait.direction} recommended by {wait.count} of {wait.required} consecutive "
            f"evaluations; it applies when {wait.required} agree (DS2)")


def excluded_period_text(period: str) -> str:
    """The sentence of a plan computed inside the excluded period ``period`` (``JobPlan.executable`` False)."""
    return f"excluded period {period!r}: the plan is computed but not executable"
