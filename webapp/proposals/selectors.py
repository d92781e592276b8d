"""Reads for the workflow: a job's executions and audit trail."""

from __future__ import annotations

from django.db.models import QuerySet

from webapp.jobs.models import Job
from webapp.proposals.models import AuditEvent, Execution, Proposal

AUDIT_FIELDS = ("id", "at", "job", "proposal", "actor", "action", "before", "after", "reason")


def execution_rows(*, job: Job, limit: int = 50) -> list[dict]:
    """The job's newest ``limit`` executions for the history page, newest first: ``execution``,
    ``proposal``, ``verification`` (code, "" when not verified), ``verification_display`` and
    ``can_roll_back`` (a succeeded scale proposal)."""
    executions = (Execution.objects.filter(proposal__job=job).select_related("proposal__decided_by")
                  .order_by("-started_at")[:limit])
    return [{"execution": e, "proposal": e.proposal, "verification": e.proposal.verification,
             "verification_display": e.proposal.get_verification_display(),
             "can_roll_back": e.proposal.status == Proposal.Status.SUCCEEDED
             and e.proposal.kind == Proposal.Kind.SCALE} for e in executions]


def audit_trail(*, job: Job) -> QuerySet[AuditEvent]:
    """Every audit event of ``job``, oldest first (the order things happened)."""
    return job.audit_events.order_by("at", "id")


def audit_rows(*, job: Job) -> list[dict]:
    """The audit trail as plain rows (JSON-ready; times in ISO 8601)."""
    return [{"id": e.pk, "at": e.at.isoformat(), "job": job.name, "proposal": e.proposal_id, "actor": e.actor,
             "action": e.action, "before": e.before, "after": e.after, "reason": e.reason}
            for e in audit_trail(job=job)]
