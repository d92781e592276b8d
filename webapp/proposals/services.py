"""Decisions on proposals: approve, reject, expire, resume auto-approval, apply a held scale-down
now; and :func:`proposal_open`, the one way a proposal is created (the live loop's
``webapp.loop.propose`` creates, revises, withdraws and auto-approves through it). Every status change
goes through ``webapp.proposals.lifecycle``; a decision that starts an execution enqueues it by the
task's registered name (``webapp.proposals.dispatch``), so nothing here imports the live loop.
Rollback is in ``webapp.proposals.rollback``, the guardrails and blocks in ``webapp.proposals.holds``.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from scaling.values.plan import JobPlan
from scaling.values.reasons import Decision
from webapp.jobs.models import Evaluation, Job, JobPolicy
from webapp.jobs.plans import plan_fields
from webapp.jobs.selectors import latest_snapshot
from webapp.outage import broker_check
from webapp.proposals import dispatch
from webapp.proposals.codes import Actor, AuditAction, AuditReason, Reason
from webapp.proposals.holds import held_scale_down
from webapp.proposals.lifecycle import BUSY, StaleRevisionError, Status, TransitionError, audit, transition
from webapp.proposals.memory import memory_fields, memory_offer, memory_request, refuse_under_pressure
from webapp.proposals.models import Proposal
from webapp.proposals.permissions import require_operator
from webapp.proposals.predictions import measured_downtimes_s, plan_cores, predict

__all__ = ["auto_approve_resume", "freeze_prediction", "memory_propose", "policy_actor", "proposal_approve",
           "proposal_open", "proposal_reject", "proposals_expire", "scale_down_apply_now"]


def policy_actor(policy: JobPolicy) -> str:
    """The audit actor of what a job's policy decides on its own (``policy:<algorithm>``)."""
    return Actor.policy(policy.algorithm)


def freeze_prediction(*, job: Job, plan: JobPlan) -> dict:
    """The prediction the approver is shown, computed once from the plan and the newest snapshot."""
    cores_now, cores_new = plan_cores(plan)
    return predict(plan=plan, snapshot=latest_snapshot(job=job),
                   downtimes_s=measured_downtimes_s(job=job, restart=cores_now != cores_new or plan.memory_changes),
                   configured_restart_s=job.policy.restart_time_s)


def proposal_open(*, job: Job, evaluation: Evaluation | None, proposed_config: dict, plan: JobPlan, actor,
                  policy: JobPolicy, now: datetime) -> Proposal:
    """A new pending proposal of ``job`` (revision 1) for ``proposed_config``, with ``plan`` and its
    reasons, its frozen prediction and its expiry after ``policy.proposal_ttl_s`` seconds; audited
    ``proposed`` by ``actor`` (a user, or a non-human actor's name) with the plan's reasons."""
    stored = plan_fields(plan)
    proposal = Proposal.objects.create(
        job=job, evaluation=evaluation, current_config=job.config, proposed_config=proposed_config,
        **stored, prediction=freeze_prediction(job=job, plan=plan),
        expires_at=now + timedelta(seconds=policy.proposal_ttl_s))
    audit(job=job, proposal=proposal, actor=actor, action=AuditAction.PROPOSED, before=job.config,
          after={**proposed_config, "revision": 1},
          reason=Reason(AuditReason.PLAN_REASONS, {"reasons": stored["reasons"]}))
    return proposal


def proposal_approve(*, proposal: Proposal, actor, revision: int | None = None, with_memory: bool = False
                     ) -> Proposal:
    """Approve revision ``revision`` of a pending proposal and enqueue its execution after commit.
    The approval names the revision it approves (the page always sends it; without one, the API
    approves the current revision and the audit event names it). ``with_memory``: the approved
    configuration also sets each memory knob the proposal leaves to the job's recommendation
    (``webapp.proposals.memory.memory_offer``; audited ``memory_added`` with the figures).

    Raises:
        PermissionDenied: ``actor`` is not an operator.
        StaleRevisionError: ``revision`` is not the proposal's current revision (a 409 with it).
        TransitionError: the proposal is no longer pending (approved twice, rejected, superseded,
            withdrawn), the job's policy is ``advisor`` (proposals are never executed), or another
            proposal of the job is approved or executing (one execution per job, a database constraint).
        ServiceUnavailable: Redis, the task broker, does not answer; nothing was changed.
        TransitionError: ``with_memory`` while the job has no memory recommendation to add (a conflict
            with the job's state, as an outdated revision: the API answers 409).
    """
    require_operator(actor)
    if JobPolicy.objects.filter(job_id=proposal.job_id).values_list("mode", flat=True).first() == "advisor":
        raise TransitionError("the job is in advisor mode: proposals are shown but never executed; "
                              "switch its policy to manual or auto to approve")
    broker_check(f"the approval of proposal {proposal.pk}")
    if revision is None:
        revision = Proposal.objects.filter(pk=proposal.pk).values_list("revision", flat=True).first()
    memory, reason, after = {}, None, {"revision": revision}
    if with_memory:
        offer = memory_offer(proposal)
        if offer is None:
            raise TransitionError(f"proposal {proposal.pk}: no memory recommendation to add (none now, no memory knob, "
                             "or the proposal changes the memory knob already); nothing was changed")
        memory, reason = memory_fields(proposal, offer)
        after.update(offer.config)
    with transaction.atomic():
        try:
            proposal = transition(proposal=proposal, target=Status.APPROVED, source=(Status.PENDING,),
                                  actor=actor, decided_at=timezone.now(), decided_by=actor, reason=reason,
                                  match={"revision": revision}, audit_after=after, **memory)
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
        MemoryPressureRefusal: the job is under memory pressure (no scale-down while it lasts); its
            ``reason`` is the ``memory-pressure`` code with the figures.
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
        refuse_under_pressure(job)
        if job.proposals.filter(status__in=BUSY).exists():
            raise TransitionError(f"job {job.name} has a proposal being executed: apply the scale-down after it")
        for old in job.proposals.select_for_update().filter(status=Status.PENDING, kind=Proposal.Kind.SCALE):
            transition(proposal=old, target=Status.SUPERSEDED, actor=actor,
                       reason=Reason(AuditReason.SUPERSEDED_BY_HELD))
        return proposal_open(job=job, evaluation=held["evaluation"], proposed_config=held["config"],
                             plan=held["plan"], actor=actor, policy=policy, now=now)


def memory_propose(*, job: Job, actor, now: datetime | None = None) -> Proposal:
    """An operator proposes the job's memory recommendations (the job page's "Propose the recommended
    memory": the heap and the other memory knobs, ``memory_request``): a pending proposal that changes
    only memory knobs, decided as any other (approval, auto-approval
    and its guardrails, the cluster's throttle). Its plan is the newest evaluation's with every stage
    and the executors as they run, and ``memory-resize`` in its reasons.

    Raises:
        PermissionDenied: ``actor`` is not an operator.
        TransitionError: no recommendation to apply (none, no memory knob, at the knob's bound, or a
            decrease under memory pressure), a proposal is pending (approve it with the memory
            recommendation instead), or one is approved or executing.
    """
    require_operator(actor)
    now = now or timezone.now()
    policy = JobPolicy.objects.get(job=job)
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job.pk)
        offer = memory_request(job)
        if offer is None:
            raise TransitionError(f"job {job.name} has no memory recommendation to propose")
        if job.proposals.filter(status__in=BUSY).exists():
            raise TransitionError(f"job {job.name} has a proposal being executed: propose the memory after it")
        pending = job.proposals.filter(status=Status.PENDING).first()
        if pending is not None:
            raise TransitionError(f"proposal {pending.pk} of job {job.name} is pending: approve it with the memory "
                                  "recommendation, or decide it first")
        evaluation = job.evaluations.order_by("-created_at", "-id").first()
        plan = (evaluation.job_plan if evaluation is not None else None) or JobPlan(Decision.SCALE, (), ())
        plan = offer.applied(replace(plan, decision=Decision.SCALE, reasons=(),
                                     executors_proposed=plan.executors_current,
                                     vertices=tuple(replace(v, proposed=v.current) for v in plan.vertices)))
        config = {**job.config, **offer.config}
        return proposal_open(job=job, evaluation=None, proposed_config=config, plan=plan, actor=actor, policy=policy,
                             now=now)
