"""Notices of the proposals' moves: every audited move of a proposal is sent by
``webapp.proposals.lifecycle.audit`` as the signal ``webapp.proposals.signals.proposal_moved``; the
moves :data:`webapp.inbox.kinds.AUDIT_NOTICES` names become a notice, enqueued after the writer's
transaction commits. Nothing here sends anything, and nothing is enqueued when no target is configured."""

from django.dispatch import receiver

from webapp.inbox.kinds import AUDIT_NOTICES
from webapp.inbox.notify import Notice, notice_enqueue, targets_configured
from webapp.inbox.tasks import notice_publish
from webapp.proposals.codes import AuditAction, Reason
from webapp.proposals.models import Proposal
from webapp.proposals.signals import proposal_moved


@receiver(proposal_moved, dispatch_uid="sparkscaler-notify-proposal-moves")
def proposal_move_notify(sender, *, proposal: Proposal, action: AuditAction, reason: Reason | None,
                         **kwargs) -> None:
    """Enqueue the notice of a move whose action is one to tell (one EXISTS query when so)."""
    kind = AUDIT_NOTICES.get(action)
    if kind is None or not targets_configured(proposal.job_id):
        return
    data = {"reason": reason.as_json() if reason is not None else {}}
    notice_enqueue(Notice(kind, proposal.job_id, proposal.pk, data), notice_publish)
