"""The job-level gate both planners pass a computed rescale through (Flink ``ScalingExecutor.
scaleResource`` after ``computeScalingSummary``): DS2's activation time, FLIP-271's excluded
periods, the backlog-mode reason, and the autoscaler's memory afterwards (pending scale-downs,
activation streak, the scaling history's records). ``planner.plan_job`` (continuous) and
``microbatch.plan_micro_batch`` (Spark micro-batches) use it; neither writes these rules again."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from scaling.policy.periods import active_period
from scaling.policy.policy import Policy
from scaling.values.mode import Mode
from scaling.values.reasons import AwaitingActivation, Decision, Direction, PlanReason, Reason
from scaling.values.state import PendingScaleDown, ScalerState, ScalingRecord, activation

__all__ = ["Gate", "backlog_reason", "excluded_period", "job_gate", "next_state"]


@dataclass(frozen=True)
class Gate:
    """The gate's outcome for one evaluation.

    Attributes:
        decision: the decision after the gate: a ``scale`` held by the activation time or an
            excluded period becomes ``blocked``.
        awaiting: the rescale waiting for DS2's activation time, or None.
        streak: ``ScalerState.activation_streak`` to remember (``state.activation``).
        period: the excluded period the evaluation is in, or None (``JobPlan.executable`` is False).
    """

    decision: Decision
    awaiting: AwaitingActivation | None
    streak: int
    period: str | None

    @property
    def activation_reason(self) -> Reason | None:
        """``activation-pending`` (direction, count, required) while the rescale waits, else None."""
        if self.awaiting is None:
            return None
        return Reason(PlanReason.ACTIVATION_PENDING, None, self.awaiting.as_json())

    @property
    def period_reason(self) -> Reason | None:
        """``excluded-period`` (period) inside an excluded period, else None."""
        return None if self.period is None else Reason(PlanReason.EXCLUDED_PERIOD, None, {"period": self.period})


def excluded_period(policy: Policy, now_s: float) -> str | None:
    """The excluded period (``Policy.excluded_periods``, Flink's ``job.autoscaler.excluded.periods``)
    that ``now_s`` (seconds since the epoch, UTC) lies in, or None."""
    return active_period(policy.excluded_periods, now_s) if policy.excluded_periods else None


def job_gate(decision: Decision, direction: int, *, state: ScalerState | None, policy: Policy,
             now_s: float) -> Gate:
    """Pass a computed decision through the job-level rules.

    1. DS2's activation time (Kalavri et al., OSDI 2018, §4; ``Policy.activation_evaluations``): a
       ``scale`` applies only once that many consecutive evaluations recommended a rescale in its
       ``direction`` (+1 up, -1 down, 0 none; a held scale-down counts as -1); until then it is
       ``blocked`` and ``awaiting`` says how many agreed. A None ``state`` acts at once.
    2. FLIP-271 excluded periods: inside one the plan is computed but a ``scale`` is ``blocked``.
    """
    activated, streak = activation(state, policy, direction)
    awaiting = None
    if not activated and decision == Decision.SCALE:
        awaiting = AwaitingActivation(Direction.UP if streak > 0 else Direction.DOWN, abs(streak),
                                      policy.activation_evaluations)
        decision = Decision.BLOCKED
    period = excluded_period(policy, now_s)
    if period is not None and decision == Decision.SCALE:
        decision = Decision.BLOCKED
    return Gate(decision, awaiting, streak, period)


def backlog_reason(policy: Policy, mode: Mode) -> Reason:
    """``backlog-mode``: a source's lag is above ``backlog_lag_threshold_s`` (FLIP-271 backlog
    processing: utilization band [0, 1], so a scale-down never triggers a scaling)."""
    return Reason(PlanReason.BACKLOG_MODE, None, {"lag_threshold_s": policy.backlog_lag_threshold_s, "mode": mode})


def next_state(state: ScalerState, gate: Gate, pending: Iterable[PendingScaleDown],
               records: Iterable[ScalingRecord]) -> ScalerState:
    """The autoscaler's memory after the evaluation: the pending delayed scale-downs (FLINK-36018)
    and the activation streak; when the decision is ``scale``, the applied scalings enter the
    history (``ScalerState.with_records``, which clears the pending scale-downs, Flink's
    ``DelayedScaleDown.clearAll``, and the streak)."""
    after = replace(state, pending_scale_downs=tuple(pending), activation_streak=gate.streak)
    if gate.decision == Decision.SCALE:
        after = after.with_records(tuple(records))
    return after

