"""Reads for the workflow: a job's audit trail."""

from __future__ import annotations

from django.db.models import QuerySet

from webapp.jobs.models import Job
from webapp.proposals.models import AuditEvent

AUDIT_FIELDS = ("id", "at", "job", "proposal", "actor", "action", "before", "after", "reason")


def audit_trail(*, job: Job) -> QuerySet[AuditEvent]:
    """Every audit event of ``job``, oldest first (the order things happened)."""
    return job.audit_events.order_by("at", "id")


def audit_rows(*, job: Job) -> list[dict]:
    """The audit trail as plain rows (JSON-ready; times in ISO 8601)."""
    return [{"id": e.pk, "at": e.at.isoformat(), "job": job.name, "proposal": e.proposal_id, "actor": e.actor,
             "action": e.action, "before": e.before, "after": e.after, "reason": e.reason}
            for e in audit_trail(job=job)]
