"""Rollback: restore the configuration that last ran successfully, through the same execution path
as any proposal (Argo Rollouts' undo). A rollback suspends auto-approval for the job until a person
turns it back on."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from scaling.values.reasons import legacy_text
from webapp.jobs.models import Job, JobPolicy
from webapp.jobs.plans import reasons_json
from webapp.outage import broker_check
from webapp.proposals import dispatch
from webapp.proposals.codes import Actor, AuditAction, AuditReason, Reason
from webapp.proposals.lifecycle import Status, audit, transition
from webapp.proposals.models import Execution, Proposal
from webapp.proposals.permissions import actor_name, require_operator
from webapp.proposals.reason_text import reason_text


def suspend_auto_approve(*, job: Job, reason: Reason, now: datetime, actor: str = Actor.SYSTEM) -> None:
    """Suspend auto-approval of ``job`` (audited as ``actor``); the policy keeps the reason's text to show."""
    updated = JobPolicy.objects.filter(job=job, auto_approve_suspended=False).update(
        auto_approve_suspended=True, auto_approve_suspended_reason=reason_text(reason.as_json()),
        auto_approve_suspended_at=now)
    if updated:
        audit(job=job, actor=actor, action=AuditAction.AUTO_APPROVE_SUSPENDED,
              before={"auto_approve_suspended": False}, after={"auto_approve_suspended": True}, reason=reason)



def last_good_config(*, job: Job, before: Proposal) -> dict:
    """The configuration that last ran successfully before ``before`` was executed: the applied
    configuration of the newest succeeded execution of the job older than it, else the
    configuration ``before`` replaced."""
    previous = (Execution.objects.filter(proposal__job=job, status=Execution.Status.SUCCEEDED,
                                         proposal__created_at__lt=before.created_at)
                .exclude(proposal=before).order_by("-finished_at").first())
    if previous is not None:
        result = previous.rescale_result
        return (result.knobs if result is not None else None) or previous.proposal.proposed_config
    return before.current_config


def start_rollback(*, proposal: Proposal, config: dict, actor, reason: Reason) -> Proposal:
    """In a transaction: ``proposal`` → rolling back, suspend auto-approval, and create the
    rollback proposal (already approved) whose execution restores ``config``. ``reason`` is why
    (a person's comment, or the failure); the rollback has no plan, and its one reason is that
    reason's words as a text reason (``scaling.values.reasons.legacy_text``)."""
    now = timezone.now()
    rollback_of = Reason(AuditReason.ROLLBACK_OF, {"proposal": proposal.pk, "cause": reason.as_json()})
    transition(proposal=proposal, target=Status.ROLLING_BACK, actor=actor, reason=reason)
    suspend_auto_approve(job=proposal.job, reason=rollback_of, now=now)
    job = Job.objects.get(pk=proposal.job_id)
    rollback = Proposal.objects.create(
        job=job, kind=Proposal.Kind.ROLLBACK, rollback_of=proposal, status=Status.PENDING,
        current_config=job.config, proposed_config=config,
        reasons=reasons_json([legacy_text(reason_text(reason.as_json()))]))
    audit(job=job, proposal=rollback, actor=actor, action=AuditAction.PROPOSED, before=job.config, after=config,
          reason=rollback_of)
    rollback = transition(proposal=rollback, target=Status.APPROVED, actor=actor, decided_at=now,
                          reason=Reason(AuditReason.ROLLBACK_OF, {"proposal": proposal.pk, "cause": None}))
    dispatch.enqueue_attempt(rollback.pk, 1)
    return rollback


def proposal_rollback(*, proposal: Proposal, actor, reason: str = "") -> Proposal:
    """Roll back a succeeded execution: restore the configuration it replaced, through the same
    execution path. Returns the rollback proposal.

    Raises:
        PermissionDenied: ``actor`` is not an operator.
        TransitionError: the proposal has not succeeded (or is already rolling back), or another
            proposal of the job is approved or executing (one execution per job).
        ServiceUnavailable: Redis, the task broker, does not answer; nothing was changed.
    """
    require_operator(actor)
    broker_check(f"the rollback of proposal {proposal.pk}")
    with transaction.atomic():
        cause = (Reason(AuditReason.COMMENT, {"text": reason.strip()}) if reason.strip()
                 else Reason(AuditReason.ROLLED_BACK_BY, {"actor": actor_name(actor)}))
        return start_rollback(proposal=proposal, config=proposal.current_config, actor=actor, reason=cause)

