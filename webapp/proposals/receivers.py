"""Receivers of the jobs app's signals: its audited edits go into the audit trail."""

from django.dispatch import receiver

from webapp.jobs.models import Job
from webapp.jobs.signals import job_edited
from webapp.proposals.codes import AuditAction, AuditReason, Reason
from webapp.proposals.lifecycle import audit


@receiver(job_edited, dispatch_uid="sparkscaler-audit-job-edits")
def audit_job_edit(sender, *, job: Job, actor, action: str, before: dict, after: dict, reason: str,
                   **kwargs) -> None:
    """One audit event per audited edit of a job or its policy (``webapp.jobs.signals.job_edited``):
    ``actor`` a user or a non-human actor's name, ``action`` an ``AuditAction``, ``reason`` an
    ``AuditReason`` code."""
    audit(job=job, actor=actor, action=AuditAction(action), before=before, after=after,
          reason=Reason(AuditReason(reason)))
