"""Writes for proposals: create, approve, reject, execute. Each status change is one conditional
UPDATE (ARCHITECTURE.md "Proposal lifecycle"); zero updated rows means the transition is refused."""

from __future__ import annotations

import logging

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from webapp.jobs.models import Evaluation, Job
from webapp.jobs.redis import get_redis
from webapp.proposals.models import AuditEvent, Execution, Proposal

logger = logging.getLogger(__name__)
Status = Proposal.Status


class TransitionError(RuntimeError):
    """A proposal is not in the state the requested transition starts from."""


def audit(*, job: Job, actor: str, action: str, proposal: Proposal | None = None,
          before: dict | None = None, after: dict | None = None, reason: str = "") -> AuditEvent:
    """Append one audit event (never updated or deleted)."""
    return AuditEvent.objects.create(job=job, proposal=proposal, actor=actor, action=action,
                                     before=before or {}, after=after or {}, reason=reason)


def _transition(*, proposal: Proposal, source: tuple[str, ...], target: str, actor: str, reason: str = "",
                **fields) -> Proposal:
    """Move ``proposal`` from one of ``source`` to ``target`` with one conditional UPDATE, and audit it.

    Raises:
        TransitionError: the proposal is not in any of ``source`` (someone else moved it first).
    """
    updated = Proposal.objects.filter(pk=proposal.pk, status__in=source).update(status=target, **fields)
    if updated == 0:
        current = Proposal.objects.filter(pk=proposal.pk).values_list("status", flat=True).first()
        raise TransitionError(f"proposal {proposal.pk} is {current}, not {' or '.join(source)}: "
                              f"cannot move it to {target}")
    before = proposal.status
    proposal.refresh_from_db()
    audit(job=proposal.job, proposal=proposal, actor=actor, action=target,
          before={"status": before}, after={"status": target}, reason=reason)
    return proposal


def proposal_create(*, evaluation: Evaluation) -> Proposal | None:
    """Create a pending proposal from a ``scale`` evaluation.

    A pending proposal with the same configuration is kept (returns None); one with a different
    configuration is superseded by the new one.
    """
    job = evaluation.job
    with transaction.atomic():
        pending = list(job.proposals.select_for_update().filter(status=Status.PENDING))
        if any(p.proposed_config == evaluation.proposed_config for p in pending):
            return None
        for old in pending:
            _transition(proposal=old, source=(Status.PENDING,), target=Status.SUPERSEDED, actor="policy:ds2",
                        reason=f"superseded by evaluation {evaluation.pk}")
        proposal = Proposal.objects.create(
            job=job, evaluation=evaluation, current_config=job.config, proposed_config=evaluation.proposed_config,
            reasons=evaluation.reasons, plan=evaluation.plan)
        audit(job=job, proposal=proposal, actor="policy:ds2", action="proposed", before=job.config,
              after=evaluation.proposed_config, reason="; ".join(evaluation.reasons))
    return proposal


def proposal_approve(*, proposal: Proposal, actor: AbstractBaseUser) -> Proposal:
    """Approve a pending proposal and enqueue its execution after commit.

    Raises:
        TransitionError: the proposal is no longer pending (approved twice, rejected, superseded).
        TransitionError: the job's policy is ``advisor`` (proposals are never executed).
    """
    from webapp.proposals.tasks import proposal_execute  # noqa: PLC0415 - tasks import services

    if proposal.job.policy.mode == "advisor":
        raise TransitionError("the job is in advisor mode: proposals are shown but never executed; "
                              "switch its policy to manual to approve")
    with transaction.atomic():
        proposal = _transition(proposal=proposal, source=(Status.PENDING,), target=Status.APPROVED,
                               actor=actor.get_username(), decided_at=timezone.now(), decided_by=actor)
        transaction.on_commit(lambda: proposal_execute.delay(proposal.pk))
    return proposal


def proposal_reject(*, proposal: Proposal, actor: AbstractBaseUser, comment: str) -> Proposal:
    """Reject a pending proposal. ``comment`` is required.

    Raises:
        ValueError: the comment is empty.
        TransitionError: the proposal is no longer pending.
    """
    if not comment.strip():
        raise ValueError("a comment is required to reject a proposal: say why")
    with transaction.atomic():
        return _transition(proposal=proposal, source=(Status.PENDING,), target=Status.REJECTED,
                           actor=actor.get_username(), reason=comment, decided_at=timezone.now(),
                           decided_by=actor, comment=comment)


def proposal_execute(*, proposal_id: int) -> Execution:
    """Execute an approved proposal once: send the configuration to the runner over the Redis
    control channel and wait for its result (``SCALER_EXECUTION_TIMEOUT_S``).

    Idempotent: a proposal that is already executing or finished returns its execution
    without touching Spark again.

    Raises:
        TransitionError: the proposal is neither approved nor already executed.
    """
    from sparkclient.runner import send_rescale, wait_result  # noqa: PLC0415

    proposal = Proposal.objects.select_related("job").get(pk=proposal_id)
    if proposal.status != Status.APPROVED:
        existing = Execution.objects.filter(proposal=proposal).first()
        if existing is not None:
            return existing
        raise TransitionError(f"proposal {proposal_id} is {proposal.status}, not approved: nothing to execute")
    with transaction.atomic():
        proposal = _transition(proposal=proposal, source=(Status.APPROVED,), target=Status.EXECUTING,
                               actor="system")
        execution, _ = Execution.objects.get_or_create(proposal=proposal)
    job = proposal.job
    exec_id = f"proposal-{proposal.pk}"
    redis = get_redis()
    try:
        send_rescale(redis, job.name, exec_id, proposal.proposed_config)
        result = wait_result(redis, job.name, exec_id, timeout_s=settings.SCALER_EXECUTION_TIMEOUT_S)
    except (TimeoutError, OSError) as exc:
        result = {"status": "failed", "error": str(exc), "path": "none"}
    now = timezone.now()
    ok = result.get("status") == "succeeded"
    Execution.objects.filter(pk=execution.pk).update(
        status=Execution.Status.SUCCEEDED if ok else Execution.Status.FAILED, path=result.get("path") or "",
        downtime_s=result.get("downtime_s"), finished_at=now, error=result.get("error") or "", result=result)
    with transaction.atomic():
        if ok:
            applied = result.get("config") or proposal.proposed_config
            Job.objects.filter(pk=job.pk).update(config=applied, config_changed_at=now)
            audit(job=job, proposal=proposal, actor="system", action="config_changed", before=job.config,
                  after=applied, reason=f"{result.get('path')} restart, downtime {result.get('downtime_s')} s")
        _transition(proposal=proposal, source=(Status.EXECUTING,), target=Status.SUCCEEDED if ok else Status.FAILED,
                    actor="system", reason=result.get("error") or "")
    execution.refresh_from_db()
    return execution
