"""Notices derived from the audit trail: every audit event is written by
``webapp.proposals.lifecycle.audit``; the ones :data:`webapp.inbox.kinds.AUDIT_NOTICES` names become a
notice, enqueued after the writer's transaction commits. Nothing here sends anything, and nothing
is enqueued when no target is configured."""

from django.db.models.signals import post_save
from django.dispatch import receiver

from webapp.inbox.kinds import AUDIT_NOTICES
from webapp.inbox.notify import Notice, notice_enqueue, targets_configured
from webapp.inbox.tasks import notice_publish
from webapp.proposals.models import AuditEvent


@receiver(post_save, sender=AuditEvent, dispatch_uid="sparkscaler-notify-audit-events")
def audit_event_notify(sender, instance: AuditEvent, created: bool, raw: bool = False, **kwargs) -> None:
    """Enqueue the notice of a new audit event whose action is one to tell (one EXISTS query when so)."""
    kind = AUDIT_NOTICES.get(instance.action)
    if not created or raw or kind is None or not targets_configured(instance.job_id):
        return
    notice_enqueue(Notice(kind, instance.job_id, instance.proposal_id, {"reason": instance.reason}), notice_publish)
