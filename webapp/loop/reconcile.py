"""The reconcile beat: expire pending proposals, record the runners' answers to the attempts in
flight, record an attempt with no answer past its lease as unanswered (its outcome unknown),
enqueue again an attempt or an approval whose message was lost or whose cluster slot freed, verify
executions that ran long enough, record what each rescale cost.
The beat is what makes an execution finish: no worker waits on a runner (``webapp.loop.execute``).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from webapp.jobs.redis import get_redis
from webapp.loop.execute import execution_record_result, lease_s, proven, runner_result, unanswered, unproven
from webapp.loop.propose import auto_approve_waiting
from webapp.loop.rescale_cost import record_open_costs
from webapp.loop.standby import standby_refresh
from webapp.loop.throttle import waiting_due
from webapp.loop.verify import proposal_verify, verification_due
from webapp.proposals import dispatch
from webapp.proposals.codes import Actor, AuditAction, AuditReason, Reason
from webapp.proposals.lifecycle import AttemptState, ExecutionStatus, Status, audit
from webapp.proposals.models import AuditEvent, Execution, Proposal
from webapp.proposals.reason_text import reason_text
from webapp.proposals.services import proposals_expire


def execution_poll(*, execution: Execution, now: datetime | None = None) -> str | None:
    """Record the runner's answer to the attempt in flight, if it has one; record the attempt as
    unanswered (outcome unknown, retried under the same idempotency key) when its lease expired
    without one. A "nothing to change" answer waits for a batch on its configuration
    (``webapp.loop.execute.proven``); past the lease without one it fails ``no-first-batch``.
    Returns what was done (None: still waiting)."""
    now = now or timezone.now()
    proposal = execution.proposal
    redis = get_redis()
    result = runner_result(redis, proposal.job.name, execution.exec_id())
    expired = execution.lease_expires_at is not None and execution.lease_expires_at < now
    if result is not None and not proven(redis, execution, result):  # "nothing to change" before a batch on it
        if not expired:
            return None
        result = unproven(result, now)
    if result is None and not expired:
        return None
    no_answer = result is None
    if no_answer:
        what = Reason(AuditReason.LEASE_NO_ANSWER, {"attempt": execution.attempts, "lease_s": lease_s()})
        result = unanswered(execution.exec_id(),
                            f"no answer from the runner to {execution.exec_id()} before the lease expired", now)
    else:
        what = Reason(AuditReason.LEASE_ANSWERED if expired else AuditReason.RUNNER_ANSWERED,
                      {"attempt": execution.attempts, "status": str(result.status)})
    if expired:
        # Two overlapping beats both see the lease expired: the one whose conditional UPDATE takes the
        # attempt over records it; the other leaves it (one ``reconciled`` event, one outcome).
        if not Execution.objects.filter(pk=execution.pk, attempts=execution.attempts,
                                        attempt_state=AttemptState.SENT,
                                        lease_expires_at=execution.lease_expires_at).update(
                lease_expires_at=now + timedelta(seconds=lease_s())):
            return None
        audit(job=proposal.job, proposal=proposal, actor=Actor.RECONCILE, action=AuditAction.RECONCILED,
              before={"attempt": execution.attempts, "attempt_state": execution.attempt_state}, reason=what)
    execution_record_result(execution_id=execution.pk, attempt=execution.attempts, result=result, now=now,
                            no_answer=no_answer)
    return reason_text(what.as_json())


def execution_requeue(*, execution: Execution, now: datetime | None = None) -> str:
    """An attempt that never ran (pending, or a retry whose back-off passed) past its lease: enqueue
    it again (the claim makes a late duplicate a no-op), pushing the lease so the next beat does
    not enqueue it twice. Returns what was done."""
    now = now or timezone.now()
    proposal = execution.proposal
    updated = Execution.objects.filter(pk=execution.pk, attempts=execution.attempts,
                                       attempt_state=execution.attempt_state,
                                       lease_expires_at=execution.lease_expires_at).update(
        lease_expires_at=now + timedelta(seconds=lease_s()))
    if not updated:
        return "changed meanwhile"
    what = Reason(AuditReason.LEASE_REQUEUED, {"attempt": execution.attempts})
    with transaction.atomic():
        audit(job=proposal.job, proposal=proposal, actor=Actor.RECONCILE, action=AuditAction.RECONCILED,
              before={"attempt": execution.attempts, "attempt_state": execution.attempt_state}, reason=what)
        dispatch.enqueue_attempt(proposal.pk, execution.attempts + 1)
    return reason_text(what.as_json())


def _restart_lost_approvals(now: datetime) -> int:
    """Approved proposals whose first attempt was never started within a lease of their decision or
    of their last requeue: enqueue it again (those waiting for a cluster slot are
    ``throttle.waiting_due``'s). The requeue is audited with its time (``data.at``); ``decided_at``
    keeps the decision's time, from which the time to effect counts."""
    restarted = 0
    stale = now - timedelta(seconds=lease_s())
    requeued = AuditEvent.objects.filter(proposal=OuterRef("pk"), action=AuditAction.RECONCILED,
                                         reason__code=AuditReason.APPROVAL_REQUEUED.value,
                                         reason__data__at__gte=stale.isoformat())
    for proposal in Proposal.objects.select_related("job").filter(
            status=Status.APPROVED, execution__isnull=True).exclude(waiting__has_key="code").filter(
            Q(decided_at__lt=stale) | Q(decided_at__isnull=True, created_at__lt=stale)).exclude(Exists(requeued)):
        with transaction.atomic():
            # the row lock makes two overlapping beats requeue it once
            if Proposal.objects.select_for_update().filter(pk=proposal.pk, status=Status.APPROVED).exclude(
                    Exists(requeued)).exists():
                audit(job=proposal.job, proposal=proposal, actor=Actor.RECONCILE, action=AuditAction.RECONCILED,
                      reason=Reason(AuditReason.APPROVAL_REQUEUED, {"at": now.isoformat()}))
                dispatch.enqueue_attempt(proposal.pk, 1)
                restarted += 1
    return restarted


def workflow_reconcile(*, now: datetime | None = None) -> dict:
    """The reconcile beat: expire pending proposals, record the runners' answers (and fail attempts
    past their lease), re-enqueue attempts whose message was lost, and verify executions that ran
    long enough. Returns counts per kind of work: ``expired``, ``recorded`` (answers recorded in
    time), ``reconciled`` (executions taken over past their lease), ``restarted``, ``unthrottled`` (proposals
    waiting for a cluster slot enqueued again, their slot free), ``verified``, ``costed`` (executions whose
    rescale cost was recorded), ``auto_approved`` (proposals whose auto-approval waited for their standby
    driver and is now given, ``webapp.loop.propose.auto_approve_waiting``), ``standby`` (jobs whose standby
    request was renewed, ``webapp.loop.standby``)."""
    now = now or timezone.now()
    counts = {"expired": proposals_expire(now=now), "recorded": 0, "reconciled": 0, "restarted": 0, "verified": 0}
    for execution in Execution.objects.select_related("proposal__job").filter(
            status=ExecutionStatus.RUNNING, attempt_state=AttemptState.SENT):
        expired = execution.lease_expires_at is not None and execution.lease_expires_at < now
        if execution_poll(execution=execution, now=now) is not None:
            counts["reconciled" if expired else "recorded"] += 1
    for execution in Execution.objects.select_related("proposal__job").filter(
            status=ExecutionStatus.RUNNING, lease_expires_at__lt=now).exclude(attempt_state=AttemptState.SENT):
        execution_requeue(execution=execution, now=now)
        counts["reconciled"] += 1
    counts["restarted"] = _restart_lost_approvals(now)
    counts["unthrottled"] = waiting_due(now=now)
    for proposal in verification_due(now=now):
        if proposal_verify(proposal=proposal, now=now) is not None:
            counts["verified"] += 1
    counts["costed"] = record_open_costs(now=now)
    counts["auto_approved"] = auto_approve_waiting(now=now)
    counts["standby"] = standby_refresh()
    return counts
