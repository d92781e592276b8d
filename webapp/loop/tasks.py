"""Celery tasks of the live loop: thin, take ids, call one step.

- The collect beat (``collect_all`` → ``collect_job``): collections of one job never overlap (a Redis
  lock that outlives the task's hard time limit). Celery's soft and hard time limits
  (``SCALER_COLLECT_SOFT_TIME_LIMIT_S``, ``SCALER_COLLECT_TIME_LIMIT_S``) bound a collect and evaluate
  under the prefork pool; under the threads pool, which enforces neither, the collection stops on its
  own: its Spark REST client starts no request past the soft limit and makes at most
  ``SCALER_COLLECT_MAX_REQUESTS`` (``webapp.loop.collect.rest_client``). No retries: the next beat
  collects again, and the collector records what went wrong on the job (health, last error).
- ``execute_attempt``: one execution attempt, sent by its registered name
  (``webapp.proposals.dispatch.EXECUTE_TASK``) by the decision services, which never import the loop.
- The retention beat (``prune_metrics``): raw snapshots rolled up and deleted in bounded batches,
  idempotent and safe to run twice at once (``webapp.loop.retention``).
- The reconcile beat (``workflow_reconcile``). No task retries on its own (no ``autoretry_for``): a
  lost or failed attempt is the reconcile beat's business, which re-enqueues it under the job's
  restart strategy.

Every module a task runs imports what it needs at its top, so the worker loads all of it (the
collector's Spark REST client and progress reader included) when it imports this module at start,
in one thread: a first import of a heavy package from several worker threads at once deadlocked a
worker (``tests/webapp/loop/test_faults_imports.py`` keeps function-level imports out of the task modules).
"""

from __future__ import annotations

import logging

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings

from webapp.jobs.models import Job
from webapp.jobs.redis import get_redis
from webapp.loop import evaluate, execute, reconcile, retention
from webapp.proposals.dispatch import EXECUTE_TASK

logger = logging.getLogger(__name__)


@shared_task
def collect_all() -> int:
    """Beat entry point: enqueue one collect per job; returns how many were enqueued. A collect still
    queued when the next beat comes expires (``expires``: one collect interval): workers that fall
    behind skip to the newest collection instead of working through a queue that only grows."""
    ids = list(Job.objects.values_list("pk", flat=True))
    for job_id in ids:
        collect_job.apply_async((job_id,), expires=settings.SCALER_COLLECT_INTERVAL_S)
    return len(ids)


#: Seconds the per-job collect lock outlives the task's hard time limit.
LOCK_MARGIN_S = 10.0


def collect_lock_ttl_s() -> float:
    """Seconds the per-job collect lock lives: past the hard time limit, so no second collection of
    a job starts while the first may still run."""
    return settings.SCALER_COLLECT_TIME_LIMIT_S + LOCK_MARGIN_S


@shared_task(acks_late=True, soft_time_limit=settings.SCALER_COLLECT_SOFT_TIME_LIMIT_S,
             time_limit=settings.SCALER_COLLECT_TIME_LIMIT_S)
def collect_job(job_id: int) -> bool:
    """Collect and evaluate one job, unless another collect of it still holds the lock. Returns False
    when skipped, or stopped by the soft time limit (nothing of it is stored then)."""
    lock = get_redis().lock(f"ss:lock:collect:{job_id}", timeout=collect_lock_ttl_s())
    if not lock.acquire(blocking=False):
        return False
    try:
        job = Job.objects.select_related("policy").get(pk=job_id)
        evaluate.collect_and_evaluate(job=job)
        return True
    except SoftTimeLimitExceeded:
        logger.warning("job %s: collect and evaluate stopped at the soft time limit of %g s", job_id,
                       settings.SCALER_COLLECT_SOFT_TIME_LIMIT_S)
        return False
    finally:
        lock.release()


@shared_task(name=EXECUTE_TASK, acks_late=True)
def execute_attempt(proposal_id: int, attempt: int = 1) -> dict | None:
    """Send one execution attempt of an approved proposal to its runner, and return (the reconcile
    beat records the answer). Idempotent: the attempt is claimed with a conditional UPDATE, so a
    second delivery finds it claimed and does nothing."""
    sent = execute.attempt_send(proposal_id=proposal_id, attempt=attempt)
    if sent is None:
        return None
    return {"execution": sent.pk, "status": sent.status, "attempts": sent.attempts}


@shared_task(acks_late=True)
def workflow_reconcile() -> dict:
    """Beat: expire proposals, record the runners' answers, take over executions past their lease,
    verify finished ones."""
    return reconcile.workflow_reconcile()


@shared_task(acks_late=True)
def prune_metrics() -> dict:
    """Beat: roll up and delete the raw snapshots past their window, delete old roll-ups."""
    return retention.prune_metrics()
