"""What the jobs app tells the apps above it, so that it never imports them."""

from django.dispatch import Signal

#: An audited edit of a job's registration or policy (``webapp.jobs.services``), sent inside its
#: transaction with ``job``, ``actor``, ``action`` (``job_changed`` or ``policy_changed``),
#: ``before`` and ``after`` (the changed fields only) and ``reason`` (a code: ``registration_edited`` or
#: ``policy_edited``, ``webapp.proposals.codes.AuditReason``). The proposals app records it
#: in the audit trail (``webapp.proposals.receivers``).
job_edited = Signal()
