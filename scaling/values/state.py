"""What the autoscaler remembers between evaluations (FLIP-271 ``AutoScalerStateStore``): the scaling
history, pending delayed scale-downs (FLINK-36018) and measured restart times.

Everything is a frozen value; each evaluation returns the next state.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

from scaling.policy.policy import Policy

HISTORY_MAX_COUNT = 3
"""Records kept per vertex and restart measurements kept (Flink ``job.autoscaler.history.max.count``)."""
HISTORY_MAX_AGE_S = 24 * 3600.0
"""Scaling records older than this, seconds, are not used by the vertex scaler (Flink
``job.autoscaler.history.max.age``, 24 h, ``ScalingHistoryUtils.trimScalingHistory``)."""


@dataclass(frozen=True)
class ScalingRecord:
    """One applied scaling of one vertex (FLIP-271 ``ScalingSummary``).

    Attributes:
        at_s: when it was decided, seconds.
        true_processing_rate: the vertex's TPR before the scaling, records/s.
        expected_processing_rate: ``TPR × new / old`` (linear scaling), records/s.
    """

    at_s: float
    vertex_id: str
    old_parallelism: int
    new_parallelism: int
    true_processing_rate: float
    expected_processing_rate: float

    @property
    def scaled_up(self) -> bool:
        return self.new_parallelism > self.old_parallelism


@dataclass(frozen=True)
class PendingScaleDown:
    """A delayed scale-down (Flink ``DelayedScaleDown.VertexDelayedScaleDownInfo``, FLINK-36018 and
    FLINK-36863): the first trigger's time and the recommendations of the sliding window as
    ``(at_s, parallelism)`` or ``(at_s, parallelism, outside_bounds)``, kept monotonically
    decreasing in parallelism (a later, larger recommendation evicts the smaller ones before it)."""

    vertex_id: str
    first_at_s: float
    recommendations: tuple[tuple, ...]

    @property
    def max_recommended(self) -> int:
        """The largest recommendation kept: the scale-down target if it were due now."""
        return max(int(r[1]) for r in self.recommendations)

    def record(self, at_s: float, parallelism: int, outside_bounds: bool = True) -> PendingScaleDown:
        """Flink ``recordRecommendedParallelism``: drop the trailing recommendations ``<=
        parallelism`` and append this one."""
        kept = list(self.recommendations)
        while kept and int(kept[-1][1]) <= parallelism:
            kept.pop()
        kept.append((float(at_s), int(parallelism), bool(outside_bounds)))
        return replace(self, recommendations=tuple(kept))

    def max_in_window(self, window_start_s: float) -> tuple[int, bool]:
        """Flink ``getMaxRecommendedParallelism(windowStart)`` (FLINK-36863): the largest
        recommendation made at or after ``window_start_s`` and whether it was outside the
        utilization bounds. Raises ValueError when none was made in the window, as Flink's
        ``DelayedScaleDown.RecommendedParallelisms`` throws IllegalStateException (the scalers record
        the current recommendation first, so their window always holds one)."""
        inside = [r for r in self.recommendations if r[0] >= window_start_s]
        if not inside:
            raise ValueError(f"no recommendation for {self.vertex_id} at or after t={window_start_s} s")
        best = inside[0]
        return int(best[1]), bool(best[2]) if len(best) > 2 else True


@dataclass(frozen=True)
class ScalerState:
    """The autoscaler's memory for one job. ``ScalerState()`` is the state of a new job.

    ``activation_streak``: DS2's activation time (``Policy.activation_evaluations``): how many
    consecutive evaluations recommended a rescale not yet applied, positive for scale-ups, negative
    for scale-downs, 0 for none (always 0 with ``activation_evaluations`` 1).
    """

    history: tuple[ScalingRecord, ...] = ()
    pending_scale_downs: tuple[PendingScaleDown, ...] = ()
    restart_times_s: tuple[float, ...] = ()
    activation_streak: int = 0

    def last_record(self, vertex_id: str) -> ScalingRecord | None:
        """The latest applied scaling of ``vertex_id``, or None."""
        records = self.history_of(vertex_id)
        return records[-1] if records else None

    def history_of(self, vertex_id: str) -> tuple[ScalingRecord, ...]:
        """The applied scalings of ``vertex_id``, oldest first."""
        return self._history_by_vertex.get(vertex_id, ())

    def pending(self, vertex_id: str) -> PendingScaleDown | None:
        """The pending delayed scale-down of ``vertex_id``, or None (the first when several)."""
        return self._pending_by_vertex.get(vertex_id)

    @cached_property
    def _history_by_vertex(self) -> dict[str, tuple[ScalingRecord, ...]]:
        """The history by vertex, built once, so that every vertex's look-up is O(1)."""
        found: dict[str, list[ScalingRecord]] = {}
        for record in self.history:
            found.setdefault(record.vertex_id, []).append(record)
        return {vid: tuple(records) for vid, records in found.items()}

    @cached_property
    def _pending_by_vertex(self) -> dict[str, PendingScaleDown]:
        found: dict[str, PendingScaleDown] = {}
        for pending in self.pending_scale_downs:
            found.setdefault(pending.vertex_id, pending)
        return found

    def restart_time_s(self, policy: Policy) -> float:
        """The restart time to plan with, seconds (FLIP-271 restart-time tracking): with tracking
        enabled and measurements present, the max measured downtime capped at
        ``restart_time_limit_s``; otherwise ``restart_time_s`` from the policy."""
        if policy.restart_time_tracking_enabled and self.restart_times_s:
            return min(max(self.restart_times_s), policy.restart_time_limit_s)
        return policy.restart_time_s

    def with_restart_time(self, downtime_s: float) -> ScalerState:
        """Record a measured rescale downtime, seconds (the last ``HISTORY_MAX_COUNT`` are kept)."""
        return replace(self, restart_times_s=(*self.restart_times_s, float(downtime_s))[-HISTORY_MAX_COUNT:])

    def with_records(self, records: tuple[ScalingRecord, ...]) -> ScalerState:
        """Append applied scalings; keep ``HISTORY_MAX_COUNT`` per vertex. Applying a scaling
        clears every pending scale-down (FLINK-36018 ``clearAll``) and starts DS2's activation time
        over (``activation_streak`` 0)."""
        history = list(self.history) + list(records)
        kept: list[ScalingRecord] = []
        counts: dict[str, int] = {}
        for record in reversed(history):
            counts[record.vertex_id] = counts.get(record.vertex_id, 0) + 1
            if counts[record.vertex_id] <= HISTORY_MAX_COUNT:
                kept.append(record)
        return replace(self, history=tuple(reversed(kept)), pending_scale_downs=(), activation_streak=0)


def activation(state: ScalerState | None, policy: Policy, direction: int) -> tuple[bool, int]:
    """DS2's activation time (Kalavri et al., OSDI 2018, §4; ``scaling_manager.activation_time`` of the DS2
    controller, strymon-system/ds2): a rescale acts only when ``policy.activation_evaluations`` consecutive
    evaluations recommended one in ``direction`` (+1 up, -1 down, 0 none); the latest plan is applied.

    Returns ``(activated, streak)``: whether it may act now, and the ``ScalerState.activation_streak`` to
    remember (0 once it acts or with no recommendation). A ``state`` of None (stateless) acts at once.
    """
    required = policy.activation_evaluations
    if direction == 0 or state is None or required <= 1:
        return True, 0
    previous = state.activation_streak
    count = (abs(previous) if previous * direction > 0 else 0) + 1
    if count >= required:
        return True, 0
    return False, count if direction > 0 else -count


def activated_streak(policy: Policy, direction: int) -> int:
    """The ``activation_streak`` of a rescale (``direction`` +1 up, -1 down) that ``activation`` let through but
    is not applied yet (proposed, awaiting a decision): ``±policy.activation_evaluations``, so the next evaluation
    in that direction acts too and one in the other starts over; ``ScalerState.with_records`` resets it."""
    required = policy.activation_evaluations
    if required <= 1 or direction == 0:
        return 0
    return required if direction > 0 else -required


def state_to_dict(state: ScalerState) -> dict:
    """``state`` as plain JSON types, for a store outside this package (the web app keeps it per job);
    ``activation_streak`` only when not 0."""
    data = {
        "history": [vars(r).copy() for r in state.history],
        "pending_scale_downs": [{"vertex_id": p.vertex_id, "first_at_s": p.first_at_s,
                                 "recommendations": [list(r) for r in p.recommendations]}
                                for p in state.pending_scale_downs],
        "restart_times_s": list(state.restart_times_s),
    }
    if state.activation_streak:
        data["activation_streak"] = state.activation_streak
    return data


def state_from_dict(data: dict | None) -> ScalerState:
    """The inverse of :func:`state_to_dict`; an empty or missing document is a new job's state.

    Raises:
        KeyError, TypeError, ValueError: the document is not one :func:`state_to_dict` wrote.
    """
    if not data:
        return ScalerState()
    return ScalerState(
        history=tuple(ScalingRecord(**r) for r in data.get("history", ())),
        pending_scale_downs=tuple(PendingScaleDown(p["vertex_id"], float(p["first_at_s"]),
                                                   tuple((float(r[0]), int(r[1]), bool(r[2]) if len(r) > 2 else True)
                                                         for r in p["recommendations"]))
                                  for p in data.get("pending_scale_downs", ())),
        restart_times_s=tuple(float(t) for t in data.get("restart_times_s", ())),
        activation_streak=int(data.get("activation_streak", 0)),
    )
