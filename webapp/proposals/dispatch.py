"""Enqueue an execution attempt (the Celery task ``webapp.loop.tasks.execute_attempt``) once the
current transaction commits. The task is sent by its name, so the services never import the tasks
module (the tasks import the services, one way)."""

from __future__ import annotations

import logging

from django.db import transaction

from webapp.celery import app
from webapp.outage import REDIS_ERRORS

logger = logging.getLogger(__name__)

#: The Celery name of the task that sends one execution attempt to the runner.
EXECUTE_TASK = "webapp.loop.tasks.execute_attempt"


def send(proposal_id: int, attempt: int, countdown_s: float) -> None:
    """Publish the task now, by its name (Redis is the broker). Tests replace this function."""
    app.send_task(EXECUTE_TASK, args=(proposal_id, attempt), countdown=max(0.0, countdown_s) or None)


def enqueue_attempt(proposal_id: int, attempt: int, countdown_s: float = 0.0) -> None:
    """Enqueue attempt ``attempt`` of ``proposal_id``'s execution after commit, ``countdown_s`` later.
    A broker that does not answer is logged: the reconcile beat enqueues it again."""

    def publish() -> None:
        try:
            send(proposal_id, attempt, countdown_s)
        except REDIS_ERRORS as exc:
            logger.warning("proposal %s attempt %s: not enqueued (%s); the reconcile beat will retry it",
                           proposal_id, attempt, exc)

    transaction.on_commit(publish)
