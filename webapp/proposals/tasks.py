"""Celery tasks for proposals: thin, take ids, call one service.

No task retries on its own (no ``autoretry_for``): a lost or failed attempt is the reconcile beat's
business (``webapp.proposals.execution``), which re-enqueues it under the job's restart strategy.
"""

from celery import shared_task

from webapp.proposals import execution
from webapp.proposals.dispatch import EXECUTE_TASK


@shared_task(name=EXECUTE_TASK, acks_late=True)
def execute_attempt(proposal_id: int, attempt: int = 1) -> dict | None:
    """Send one execution attempt of an approved proposal to its runner, and return (the reconcile
    beat records the answer). Idempotent: the attempt is claimed with a conditional UPDATE, so a
    second delivery finds it claimed and does nothing."""
    sent = execution.attempt_send(proposal_id=proposal_id, attempt=attempt)
    if sent is None:
        return None
    return {"execution": sent.pk, "status": sent.status, "attempts": sent.attempts}


@shared_task(acks_late=True)
def workflow_reconcile() -> dict:
    """Beat: expire proposals, record the runners' answers, take over executions past their lease,
    verify finished ones."""
    return execution.workflow_reconcile()
