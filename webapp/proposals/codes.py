"""The codes of the workflow's records: audit actions, who acted, and the reason families (why a
proposal waits for a person, which guardrail it breaks, why an audit event happened). A reason is
stored as ``{"code": ..., "data": {...}}`` (:class:`Reason`); its text is rendered from the code and
the data in ``webapp.proposals.reason_text``, never stored, never parsed back.

Codes are unique across the families (a guardrail's code is the ``JobPolicy`` field it names, a
verification's is ``scaling.forecast.prediction.VerdictReason``, a withdrawal's ``WithdrawReason``), so one
renderer reads any stored reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from django.db import models

#: The code of a reason converted from free text stored before reasons had codes: data ``{"text"}``.
LEGACY_TEXT = "legacy-text"


class AuditAction(models.TextChoices):
    """What an audit event records (``AuditEvent.action``). A proposal's status moves use the status
    (``lifecycle.ProposalStatus``)."""

    PROPOSED = "proposed", "proposed"
    REVISED = "revised", "revised"
    APPROVED = "approved", "approved"
    REJECTED = "rejected", "rejected"
    SUPERSEDED = "superseded", "superseded"
    EXPIRED = "expired", "expired"
    WITHDRAWN = "withdrawn", "withdrawn"
    EXECUTING = "executing", "executing"
    SUCCEEDED = "succeeded", "succeeded"
    FAILED = "failed", "failed"
    ROLLING_BACK = "rolling_back", "rolling back"
    ROLLED_BACK = "rolled_back", "rolled back"
    AUTO_APPROVE_HELD = "auto_approve_held", "auto-approval held"
    AUTO_APPROVE_SUSPENDED = "auto_approve_suspended", "auto-approval suspended"
    AUTO_APPROVE_RESUMED = "auto_approve_resumed", "auto-approval resumed"
    ATTEMPT_STARTED = "attempt_started", "attempt started"
    ATTEMPT_FAILED = "attempt_failed", "attempt failed"
    ATTEMPT_UNANSWERED = "attempt_unanswered", "attempt unanswered"
    LATE_ANSWER = "late_answer", "late answer"
    CONFIG_CHANGED = "config_changed", "configuration changed"
    RECONCILED = "reconciled", "reconciled"
    VERIFICATION_VERIFIED = "verification_verified", "verified"
    VERIFICATION_INEFFECTIVE = "verification_ineffective", "verified ineffective"
    VERIFICATION_INCONCLUSIVE = "verification_inconclusive", "verification inconclusive"
    SCALE_UP_BLOCKED = "scale_up_blocked", "scale-ups blocked"
    SCALE_UP_BLOCK_CLEARED = "scale_up_block_cleared", "scale-up block cleared"
    JOB_CHANGED = "job_changed", "registration changed"
    POLICY_CHANGED = "policy_changed", "policy changed"
    EXECUTION_THROTTLED = "execution_throttled", "waiting for a cluster slot"


_GREY, _AMBER, _BLUE, _VIOLET, _GREEN, _RED = "#6b7280", "#d97706", "#2563eb", "#7c3aed", "#059669", "#dc2626"

#: Display colour per action (NetBox ``ChoiceSet`` style): templates never hard-code one.
ACTION_COLOURS: dict[str, str] = {
    AuditAction.PROPOSED: _AMBER, AuditAction.REVISED: _AMBER, AuditAction.APPROVED: _BLUE,
    AuditAction.REJECTED: _GREY, AuditAction.SUPERSEDED: "#9ca3af", AuditAction.EXPIRED: "#9ca3af",
    AuditAction.WITHDRAWN: "#9ca3af", AuditAction.EXECUTING: _VIOLET, AuditAction.SUCCEEDED: _GREEN,
    AuditAction.FAILED: _RED, AuditAction.ROLLING_BACK: _VIOLET, AuditAction.ROLLED_BACK: _GREY,
    AuditAction.AUTO_APPROVE_HELD: _AMBER, AuditAction.AUTO_APPROVE_SUSPENDED: _RED,
    AuditAction.AUTO_APPROVE_RESUMED: _GREEN, AuditAction.ATTEMPT_STARTED: _VIOLET,
    AuditAction.ATTEMPT_FAILED: _RED, AuditAction.ATTEMPT_UNANSWERED: _AMBER, AuditAction.LATE_ANSWER: _VIOLET,
    AuditAction.CONFIG_CHANGED: _GREEN,
    AuditAction.RECONCILED: _GREY, AuditAction.VERIFICATION_VERIFIED: _GREEN,
    AuditAction.VERIFICATION_INEFFECTIVE: _RED, AuditAction.VERIFICATION_INCONCLUSIVE: _GREY,
    AuditAction.SCALE_UP_BLOCKED: _RED, AuditAction.SCALE_UP_BLOCK_CLEARED: _GREEN,
    AuditAction.JOB_CHANGED: _BLUE, AuditAction.POLICY_CHANGED: _BLUE,
    AuditAction.EXECUTION_THROTTLED: _AMBER,
}


class Actor:
    """The names of the non-human actors (``AuditEvent.actor_name``; ``actor_user`` is empty)."""

    SYSTEM = "system"
    RECONCILE = "system:reconcile"
    VERIFICATION = "system:verification"

    POLICY_PREFIX = "policy:"

    @staticmethod
    def policy(algorithm: str) -> str:
        """The policy that approves in auto mode: ``policy:<algorithm>``."""
        return f"{Actor.POLICY_PREFIX}{algorithm or 'ds2'}"

    @staticmethod
    def algorithm_of(name: str) -> str | None:
        """The algorithm of the policy actor named ``name`` (``policy:ds2`` → ``ds2``); None for any other actor."""
        return name.removeprefix(Actor.POLICY_PREFIX) if name.startswith(Actor.POLICY_PREFIX) else None


class HoldCode(models.TextChoices):
    """Why an auto-mode proposal waits for a person (``Proposal.hold_reason``), besides a guardrail."""

    SCALE_UP_BLOCK = "ineffective_scale_up_block", "ineffective-scale-up block"  # data: knobs, proposal
    AUTO_APPROVE_SUSPENDED = "auto_approval_suspended", "auto-approval suspended"  # data: reason (text)
    EXECUTION_IN_FLIGHT = "execution_in_flight", "another execution in flight"  # data: error (text)
    # data: since (ISO 8601), waited_s, bound_s, standby (StandbySeen): the policy waits, not a person
    STANDBY_WAIT = "standby_wait", "auto-approval waits for the standby driver"


#: The holds during which auto mode itself waits (and approves on a later beat); any other hold waits for a person.
POLICY_WAITS = frozenset({HoldCode.STANDBY_WAIT.value})


class StandbySeen(StrEnum):
    """The standby driver prepared for a proposal as the web app reads it (``webapp.loop.standby.standby_seen``)."""

    READY = "ready"  # ready to take over (or taking over)
    STARTING = "starting"  # its runner is starting it
    FAILED = "failed"  # it could not start; its runner does not try again for the same proposal
    ABSENT = "absent"  # none reported for the proposal's knobs: not picked up yet, or a runner without standbys
    UNREACHABLE = "unreachable"  # Redis did not answer, or its report was malformed


class StandbyWaitEnd(StrEnum):
    """Why auto-approval stopped waiting for the standby driver (``AuditReason.STANDBY_WAIT_OVER``)."""

    READY = "standby_ready"  # the standby is ready: the rescale hands over at once
    FAILED = "standby_failed"  # it failed: waiting gains nothing, the rescale starts its own
    BOUND = "wait_bound_passed"  # auto_approve_standby_wait_s passed: the rescale waits for its standby


class ThrottleCode(models.TextChoices):
    """Why an approved proposal waits for a slot on its Spark cluster (``Proposal.waiting``,
    ``webapp.loop.throttle``). Data: cluster, in_flight (the executing proposals' ids), limit,
    cooldown_s, last_finished_at and free_at (ISO 8601, or None)."""

    CLUSTER_BUSY = "cluster_slots_busy", "every execution slot of the cluster is taken"
    CLUSTER_COOLDOWN = "cluster_cooldown", "the cluster's cooldown since its last execution"


class GuardrailCode(models.TextChoices):
    """The guardrail a change breaks (``webapp.proposals.guardrails``): the ``JobPolicy`` field."""

    DIRECTIONS = "guard_directions", "direction not auto-approved"  # data: direction, allowed
    MAX_EXECUTORS = "guard_max_executors", "executor quota"  # data: executors, max
    MAX_CHANGE_FACTOR = "guard_max_change_factor", "change factor"  # data: knob, old, new, factor, max
    EXCLUDED_PERIODS = "guard_excluded_periods", "closed change window"  # data: period


class RetryCode(StrEnum):
    """Why a failed execution attempt is retried or not (``webapp.proposals.attempts.RetryDecision``)."""

    NO_RESTART = "no_restart_strategy"  # restart strategy none
    RETRIES_SPENT = "retries_spent"  # data: strategy, attempts
    RETRY = "retry"  # data: strategy, retry (1-based), attempts, delay_s
    FAILURE_RATE_EXCEEDED = "failure_rate_exceeded"  # data: failures, interval_s, max_failures
    FAILURE_RATE_RETRY = "failure_rate_retry"  # data: failures, interval_s, max_failures, delay_s
    REFUSED = "refused_by_runner"  # data: failure (the runner's FailureCode, not retryable)


class AuditReason(models.TextChoices):
    """Why an audit event happened (``AuditEvent.reason``), besides a hold, guardrail, withdrawal or verdict."""

    COMMENT = "comment", "a person's comment"  # data: text
    LEGACY = LEGACY_TEXT, "free text"  # data: text
    REGISTRATION_EDITED = "registration_edited", "registration edited"
    POLICY_EDITED = "policy_edited", "policy edited"
    REREGISTERED = "reregistered", "job re-registered"
    PLAN_REASONS = "plan_reasons", "the plan's reasons"  # data: reasons (the proposal's)
    # data: revision, min_change (a fraction), evaluation
    RECOMMENDATION_CHANGED = "recommendation_changed", "recommendation changed"
    SUPERSEDED_BY = "superseded_by_proposal", "superseded"  # data: proposal
    SUPERSEDED_BY_HELD = "superseded_by_held_scale_down", "superseded by a held scale-down"
    INSIDE_GUARDRAILS = "inside_guardrails", "inside every guardrail"
    NO_DECISION_IN_TIME = "no_decision_in_time", "expired"  # data: expires_at (ISO 8601)
    RESUMED_BY_PERSON = "resumed_by_person", "re-enabled by a person"
    CLEARED_BY = "cleared_by", "cleared by a person"  # data: actor
    INEFFECTIVE_SCALE_UP = "ineffective_scale_up", "verified ineffective"  # data: proposal, knobs, verdict
    # data: proposal, verdict (the verification's reason)
    INCONCLUSIVE_VERIFICATION = "inconclusive_verification", "verification inconclusive"
    ROLLED_BACK_BY = "rolled_back_by", "rolled back by a person"  # data: actor
    ROLLBACK_OF = "rollback_of", "rollback"  # data: proposal, cause (a reason, or None)
    EXECUTION_STARTED = "execution_started", "execution started"  # data: kind
    LATE_SUCCESS = "late_success", "late answer"  # data: attempt
    ATTEMPT_SENT = "attempt_sent", "attempt sent"  # data: attempt, job
    CONFIG_APPLIED = "config_applied", "configuration applied"  # data: attempt, path, downtime_s
    # data: attempt (the one applied), path, downtime_s, answered_by (the attempt whose answer replayed it)
    CONFIG_APPLIED_REPLAYED = "config_applied_replayed", "configuration applied, answer replayed"
    ATTEMPT_SUCCEEDED = "attempt_succeeded", "attempt succeeded"  # data: attempt
    RESTORED_BY = "restored_by", "restored by a rollback"  # data: proposal
    ATTEMPT_FAILED = "attempt_failed", "attempt failed"  # data: error, retry (the back-off's decision)
    ATTEMPT_UNANSWERED = "attempt_unanswered", "attempt unanswered"  # data: attempt, retry
    ATTEMPTS_FAILED = "attempts_failed", "attempts failed"  # data: attempts, error
    EXECUTION_FAILED = "execution_failed", "execution failed"  # data: attempts, error
    ROLLBACK_FAILED = "rollback_failed", "rollback failed"  # data: proposal, error
    LEASE_NO_ANSWER = "lease_expired_without_answer", "lease expired, no answer"  # data: attempt, lease_s
    LEASE_ANSWERED = "lease_expired_answered", "lease expired, answered"  # data: attempt, status
    RUNNER_ANSWERED = "runner_answered", "runner answered"  # data: attempt, status
    LEASE_REQUEUED = "lease_expired_requeued", "re-enqueued after the lease"  # data: attempt
    APPROVAL_REQUEUED = "approval_requeued", "approval re-enqueued"
    # data: knob, from_mb, to_mb, reason (the plan's memory-resize reason, scaling.planner.memory)
    MEMORY_ADDED = "memory_added", "memory recommendation added"
    # data: end (StandbyWaitEnd), since (ISO 8601), waited_s, bound_s, standby (StandbySeen)
    STANDBY_WAIT_OVER = "standby_wait_over", "auto-approved after waiting for the standby driver"


@dataclass(frozen=True)
class Reason:
    """A reason as stored: ``code`` (one of the families above) and its JSON-ready ``data``."""

    code: str
    data: dict = field(default_factory=dict)

    def as_json(self) -> dict:
        """``{"code": str, "data": dict}``, what the JSON fields hold."""
        return {"code": str(self.code), "data": self.data}

    @classmethod
    def from_json(cls, stored: object) -> Reason | None:
        """A stored reason read back: ``{"code", "data"}`` as a ``Reason``; a plain string (free text
        stored inside another JSON value before reasons had codes) as ``legacy-text``; None for none
        (``{}``, ``""``, None, or a value without a code). ``data`` that is not an object reads as ``{}``."""
        if isinstance(stored, str):
            return cls(LEGACY_TEXT, {"text": stored}) if stored else None
        if not isinstance(stored, Mapping) or not stored.get("code"):
            return None
        data = stored.get("data")
        return cls(str(stored["code"]), dict(data) if isinstance(data, Mapping) else {})


def legacy(text: str) -> dict:
    """A stored free-text reason as a coded one (``{"code": "legacy-text", "data": {"text"}}``); ``{}``
    for an empty text."""
    return Reason(LEGACY_TEXT, {"text": text}).as_json() if text else {}
