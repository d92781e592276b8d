"""Decisions on proposals: approve, reject, expire, resume auto-approval, apply a held scale-down
now; and :func:`proposal_open`, the one way a proposal is created (the live loop's
``webapp.loop.propose`` creates, revises, withdraws and auto-approves through it). Every status change
goes through ``webapp.proposals.lifecycle``; a decision that starts an execution enqueues it by the
task's registered name (``webapp.proposals.dispatch``), so nothing here imports the live loop.
Rollback is in ``webapp.proposals.rollback``, the guardrails and blocks in ``webapp.proposals.holds``.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from scaling.plan import JobPlan
from webapp.jobs.models import Evaluation, Job, JobPolicy
from webapp.jobs.plans import reasons_json
from webapp.jobs.selectors import latest_snapshot
from webapp.outage import broker_check
from webapp.proposals import dispatch
from webapp.proposals.codes import Actor, AuditAction, AuditReason, Reason
from webapp.proposals.holds import held_scale_down
from webapp.proposals.lifecycle import BUSY, StaleRevisionError, Status, TransitionError, audit, transition
from webapp.proposals.models import Proposal
from webapp.proposals.permissions import require_operator
from webapp.proposals.predictions import measured_downtimes_s, plan_cores, predict

__all__ = ["StaleRevisionError", "TransitionError", "auto_approve_resume", "freeze_prediction", "policy_actor",
           "proposal_approve", "proposal_open", "proposal_reject", "proposals_expire", "scale_down_apply_now"]


def policy_actor(policy: JobPolicy) -> str:
    """The audit actor of what a job's policy decides on its own (``policy:<algorithm>``)."""
    return Actor.policy(policy.algorithm)


def freeze_prediction(*, job: Job, plan: JobPlan) -> dict:
    """The prediction the approver is shown, computed once from the plan and the newest snapshot."""
    cores_now, cores_new = plan_cores(plan)
    return predict(plan=plan, snapshot=latest_snapshot(job=job),
                   downtimes_s=measured_downtimes_s(job=job, restart=cores_now != cores_new),
                   configured_restart_s=job.policy.restart_time_s)


def proposal_open(*, job: Job, evaluation: Evaluation | None, proposed_config: dict, plan: JobPlan, actor,
                  policy: JobPolicy, now: datetime) -> Proposal:
    """A new pending proposal of ``job`` (revision 1) for ``proposed_config``, with ``plan`` and its
    reasons, its frozen prediction and its expiry after ``policy.proposal_ttl_s`` seconds; audited
    ``proposed`` by ``actor`` (a user, or a non-human actor's name) with the plan's reasons."""
    proposal = Proposal.objects.create(
        job=job, evaluation=evaluation, current_config=job.config, proposed_config=proposed_config,
        reasons=reasons_json(plan.reasons), plan=plan.to_json(), prediction=freeze_prediction(job=job, plan=plan),
        expires_at=now + timedelta(seconds=policy.proposal_ttl_s))
    audit(job=job, proposal=proposal, actor=actor, action=AuditAction.PROPOSED, before=job.config,
          after={**proposed_config, "revision": 1},
          reason=Reason(AuditReason.PLAN_REASONS, {"reasons": reasons_json(plan.reasons)}))
    return proposal


def proposal_approve(*, proposal: Proposal, actor, revision: int | None = None) -> Proposal:
    """Approve revision ``revision`` of a pending proposal and enqueue its execution after commit.
    The approval names the revision it approves (the page always sends it; without one, the API
    approves the current revision and the audit event names it).

    Raises:
        PermissionDenied: ``actor`` is not an operator.
        StaleRevisionError: ``revision`` is not the proposal's current revision (a 409 with it).
        TransitionError: the proposal is no longer pending (approved twice, rejected, superseded,
            withdrawn), the job's policy is ``advisor`` (proposals are never executed), or another
            proposal of the job is approved or executing (one execution per job, a database constraint).
        ServiceUnavailable: Redis, the task broker, does not answer; nothing was changed.
    """
    require_operator(actor)
    if JobPolicy.objects.filter(job_id=proposal.job_id).values_list("mode", flat=True).first() == "advisor":
        raise TransitionError("the job is in advisor mode: proposals are shown but never executed; "
                              "switch its policy to manual or auto to approve")
    broker_check(f"the approval of proposal {proposal.pk}")
    if revision is None:
        revision = Proposal.objects.filter(pk=proposal.pk).values_list("revision", flat=True).first()
    with transaction.atomic():
        try:
            proposal = transition(proposal=proposal, target=Status.APPROVED, source=(Status.PENDING,),
                                  actor=actor, decided_at=timezone.now(), decided_by=actor,
                                  match={"revision": revision}, audit_after={"revision": revision})
        except TransitionError:
            current = Proposal.objects.filter(pk=proposal.pk).values_list("status", "revision").first()
            if current and current[0] == Status.PENDING and current[1] != revision:
                raise StaleRevisionError(proposal.pk, revision, current[1]) from None
            raise
        dispatch.enqueue_attempt(proposal.pk, 1)
    return proposal


def proposal_reject(*, proposal: Proposal, actor, comment: str) -> Proposal:
    """Reject a pending proposal. ``comment`` is required.

    Raises:
        PermissionDenied: ``actor`` is not an operator.
        ValueError: the comment is empty.
        TransitionError: the proposal is no longer pending.
    """
    require_operator(actor)
    if not comment.strip():
        raise ValueError("a comment is required to reject a proposal: say why")
    with transaction.atomic():
        return transition(proposal=proposal, target=Status.REJECTED, source=(Status.PENDING,),
                          actor=actor, reason=Reason(AuditReason.COMMENT, {"text": comment}),
                          decided_at=timezone.now(), decided_by=actor, comment=comment)


def proposals_expire(*, now: datetime | None = None) -> int:
    """Expire pending proposals past their ``expires_at``; returns how many."""
    now = now or timezone.now()
    expired = 0
    for proposal in Proposal.objects.select_related("job").filter(status=Status.PENDING, expires_at__lt=now):
        try:
            with transaction.atomic():
                transition(proposal=proposal, target=Status.EXPIRED, actor=Actor.SYSTEM,
                           reason=Reason(AuditReason.NO_DECISION_IN_TIME,
                                         {"expires_at": proposal.expires_at.isoformat()}))
            expired += 1
        except TransitionError:
            pass  # decided meanwhile
    return expired


def auto_approve_resume(*, job: Job, actor) -> JobPolicy:
    """A person turns auto-approval back on after a rollback or an inconclusive verification suspended it.

    Raises:
        PermissionDenied: ``actor`` is not an operator.
    """
    require_operator(actor)
    with transaction.atomic():
        policy = JobPolicy.objects.select_for_update().get(job=job)
        before = {"auto_approve_suspended": policy.auto_approve_suspended,
                  "reason": policy.auto_approve_suspended_reason}
        JobPolicy.objects.filter(pk=policy.pk).update(auto_approve_suspended=False, auto_approve_suspended_reason="",
                                                      auto_approve_suspended_at=None)
        audit(job=job, actor=actor, action=AuditAction.AUTO_APPROVE_RESUMED, before=before,
              after={"auto_approve_suspended": False}, reason=Reason(AuditReason.RESUMED_BY_PERSON))
        policy.refresh_from_db()
    return policy


def scale_down_apply_now(*, job: Job, actor, now: datetime | None = None) -> Proposal:
    """An operator applies a held scale-down now instead of waiting for the scale-down interval:
    creates a pending proposal for the held configuration (the usual approval follows).

    Raises:
        PermissionDenied: ``actor`` is not an operator.
        TransitionError: no scale-down is held, or a proposal is approved or executing.
    """
    require_operator(actor)
    now = now or timezone.now()
    policy = JobPolicy.objects.get(job=job)
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job.pk)
        held = held_scale_down(job=job, now=now)
        if held is None or held["plan"] is None or not held["config"] or held["config"] == job.config:
            raise TransitionError(f"job {job.name} holds no scale-down to apply")
        if job.proposals.filter(status__in=BUSY).exists():
            raise TransitionError(f"job {job.name} has a proposal being executed: apply the scale-down after it")
        for old in job.proposals.select_for_update().filter(status=Status.PENDING, kind=Proposal.Kind.SCALE):
            transition(proposal=old, target=Status.SUPERSEDED, actor=actor,
                       reason=Reason(AuditReason.SUPERSEDED_BY_HELD))
        return proposal_open(job=job, evaluation=held["evaluation"], proposed_config=held["config"],
                             plan=held["plan"], actor=actor, policy=policy, now=now)
