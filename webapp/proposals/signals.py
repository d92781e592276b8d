"""Receivers of the jobs app's signals: its audited edits go into the audit trail."""

from django.dispatch import receiver

from webapp.jobs.models import Job
from webapp.jobs.signals import job_edited
from webapp.proposals.lifecycle import audit


@receiver(job_edited, dispatch_uid="sparkscaler-audit-job-edits")
def audit_job_edit(sender, *, job: Job, actor: str, action: str, before: dict, after: dict, reason: str,
                   **kwargs) -> None:
    """One audit event per audited edit of a job or its policy (``webapp.jobs.signals.job_edited``)."""
    audit(job=job, actor=actor, action=action, before=before, after=after, reason=reason)
