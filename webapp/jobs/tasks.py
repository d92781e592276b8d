"""Celery tasks for jobs: the collect beat. Collections of one job never overlap (Redis lock).

No retries (no ``autoretry_for``): the next beat collects again, and the collector records what
went wrong on the job (health, last error)."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

# What the collector (webapp.jobs.collect) imports inside its functions, loaded here with the
# tasks when the worker starts: a first import of pyspark (the progress listener, a
# StreamingQueryListener) from several worker threads at once deadlocked a worker (issue 15).
import sparkclient.contract.binding  # noqa: F401
import sparkclient.contract.spec  # noqa: F401
import sparkclient.collector.progress  # noqa: F401
import sparkclient.collector.rest  # noqa: F401
import sparkclient.collector.snapshot  # noqa: F401
import sparkclient.collector.topology  # noqa: F401
from webapp.jobs import evaluation
from webapp.jobs.models import Job
from webapp.jobs.redis import get_redis


@shared_task
def collect_all() -> int:
    """Beat entry point: enqueue one collect per job; returns how many were enqueued."""
    ids = list(Job.objects.values_list("pk", flat=True))
    for job_id in ids:
        collect_job.delay(job_id)
    return len(ids)


@shared_task(acks_late=True)
def collect_job(job_id: int) -> bool:
    """Collect and evaluate one job, unless another collect of it still holds the lock."""
    lock = get_redis().lock(f"ss:lock:collect:{job_id}", timeout=4 * settings.SCALER_COLLECT_INTERVAL_S)
    if not lock.acquire(blocking=False):
        return False
    try:
        job = Job.objects.select_related("policy").get(pk=job_id)
        evaluation.collect_and_evaluate(job=job)
        return True
    finally:
        lock.release()
