"""Celery tasks for proposals: thin, take ids, call one service."""

from celery import shared_task

from webapp.proposals import services


@shared_task(bind=True, acks_late=True, max_retries=3, retry_backoff=True)
def proposal_execute(self, proposal_id: int, attempt: int = 1) -> dict | None:
    """Run one execution attempt of an approved proposal. Idempotent: the attempt is claimed with a
    conditional UPDATE, so a second delivery finds it claimed and does nothing."""
    execution = services.proposal_execute(proposal_id=proposal_id, attempt=attempt)
    if execution is None:
        return None
    return {"execution": execution.pk, "status": execution.status, "attempts": execution.attempts}


@shared_task(bind=True, acks_late=True, max_retries=0)
def workflow_reconcile(self) -> dict:
    """Beat: expire proposals, take over executions past their lease, verify finished ones."""
    return services.workflow_reconcile()
