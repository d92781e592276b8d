"""What the proposals app tells the apps above it (the live loop, the inbox), so that it never imports them."""

from django.dispatch import Signal

#: A move of a proposal was recorded: sent by ``webapp.proposals.lifecycle.audit`` inside the writer's
#: transaction, once per audit event of a proposal (a status move made by ``lifecycle.transition``, and
#: the moves that keep the status: proposed, revised, auto-approval held, verified, an attempt).
#: Arguments: ``proposal`` (the ``Proposal``), ``action`` (its ``AuditAction``; a status move's is the
#: target status) and ``reason`` (its coded ``Reason``, or None). A receiver that acts outside the
#: database (Redis, the broker) defers it with ``transaction.on_commit``: the writer never waits for it.
#: The loop's standby (``webapp.loop.standby``) and the notices (``webapp.inbox.receivers``) hear it.
proposal_moved = Signal()
