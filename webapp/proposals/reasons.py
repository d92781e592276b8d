"""Structured reasons of the live loop (issue 13): why a pending proposal was withdrawn, and why a
``scale`` evaluation did not become a proposal. Each is a StrEnum with its data in a dict; the text
an operator reads is rendered from them here, and nothing parses it back.
"""

from __future__ import annotations

from enum import StrEnum


class WithdrawReason(StrEnum):
    """Why a pending proposal was withdrawn (``Proposal.withdrawal["reason"]``)."""

    INSIDE_BAND = "inside_band"  # N evaluations in a row found the load inside the utilization band
    OPPOSITE = "opposite_direction"  # N evaluations in a row pointed the other way
    NOT_SUPPORTED = "not_supported"  # N in a row, some inside the band and some pointing the other way
    CONFIG_CHANGED = "config_changed"  # the running configuration changed underneath it
    KNOB_PINNED = "knob_pinned"  # it changes a knob the checkpoint now pins: the runner would refuse it


class EvaluationHold(StrEnum):
    """Why a ``scale`` evaluation did not become a proposal (``Evaluation.hold``)."""

    # After an execution, until its verification has measured the realized capacity (the restart's
    # backlog and a fresh JVM's warm-up batches are expected, not a reason to scale up).
    AWAITING_VERIFICATION = "awaiting_verification"
    # Realized capacity matches the prediction: the backlog of the restart drains as predicted.
    RESTART_CATCH_UP = "restart_catch_up"
    # An execution was verified ineffective: scale-ups of its knobs wait until a person clears the block.
    SCALE_UP_BLOCKED = "scale_up_blocked"


def _minutes(seconds: float) -> str:
    seconds = max(0.0, float(seconds))
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def withdrawal_text(withdrawal: dict) -> str:
    """The sentence for ``Proposal.withdrawal`` (``{"reason": WithdrawReason, ...}``)."""
    reason = withdrawal.get("reason")
    count = len(withdrawal.get("evaluations") or ())
    if reason == WithdrawReason.CONFIG_CHANGED:
        return (f"the running configuration changed underneath it: it was proposed for "
                f"{withdrawal.get('proposed_for')}, the job now runs {withdrawal.get('running')}")
    if reason == WithdrawReason.KNOB_PINNED:
        return (f"it changes {', '.join(withdrawal.get('knobs') or ())}, which the checkpoint pins (its state "
                "cannot be repartitioned offline): the runner would refuse it")
    if reason == WithdrawReason.INSIDE_BAND:
        return f"{count} evaluations in a row found the load inside the utilization band: no longer needed"
    if reason == WithdrawReason.OPPOSITE:
        return f"{count} evaluations in a row pointed the other way ({withdrawal.get('direction')})"
    if reason == WithdrawReason.NOT_SUPPORTED:
        return f"{count} evaluations in a row no longer supported it (inside the band or pointing the other way)"
    return f"withdrawn ({reason})"


def hold_text(hold: str, detail: dict) -> str:
    """The sentence for ``Evaluation.hold`` with its ``hold_detail``."""
    if hold == EvaluationHold.AWAITING_VERIFICATION:
        return (f"no scale-up while proposal #{detail.get('proposal')} is being verified (due in "
                f"{_minutes(detail.get('due_in_s', 0))}): right after a restart the backlog of the downtime and "
                f"the warm-up batches of a fresh JVM are expected")
    if hold == EvaluationHold.RESTART_CATCH_UP:
        return (f"no scale-up: proposal #{detail.get('proposal')} realized the predicted capacity "
                f"({detail.get('capacity_per_s', 0):,.0f} rec/s for {detail.get('arrival_per_s', 0):,.0f} rec/s "
                f"arriving), and the backlog of its restart drains as predicted (catch-up ends in "
                f"{_minutes(detail.get('catch_up_left_s', 0))})")
    if hold == EvaluationHold.SCALE_UP_BLOCKED:
        knobs = ", ".join(detail.get("knobs") or ())
        return (f"scale-ups of {knobs} are blocked: proposal #{detail.get('proposal')} was verified ineffective; "
                f"a person clears the block on the job page")
    return hold
