"""Celery tasks for proposals: thin, take ids, call one service."""

from celery import shared_task

from webapp.proposals import services


@shared_task(bind=True, acks_late=True, max_retries=3, retry_backoff=True)
def proposal_execute(self, proposal_id: int) -> dict:
    """Execute an approved proposal (idempotent: a second delivery finds it executed)."""
    execution = services.proposal_execute(proposal_id=proposal_id)
    return {"execution": execution.pk, "status": execution.status, "downtime_s": execution.downtime_s}
