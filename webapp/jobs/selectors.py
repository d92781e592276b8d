"""Reads: metric windows, latest snapshots and the chart series of a job."""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from django.db.models import Prefetch
from django.utils import timezone

from scaling.policy.policy import utilization_band
from webapp.jobs.models import Evaluation, Job, MetricSnapshot, VertexSnapshot


def snapshots_in_window(*, job: Job, window_s: float, now: datetime | None = None) -> list[MetricSnapshot]:
    """Snapshots of ``job`` collected within the last ``window_s`` seconds and after the running
    configuration last changed, oldest first, with their vertices prefetched."""
    now = now or timezone.now()
    qs = job.snapshots.filter(collected_at__gt=now - timedelta(seconds=window_s), collected_at__lte=now)
    if job.config_changed_at:
        qs = qs.filter(collected_at__gt=job.config_changed_at)
    return list(qs.order_by("collected_at").prefetch_related("vertices"))


def latest_snapshot(*, job: Job) -> MetricSnapshot | None:
    """The newest snapshot of ``job`` with its vertices, or None."""
    return (job.snapshots.order_by("-collected_at")
            .prefetch_related(Prefetch("vertices", queryset=VertexSnapshot.objects.order_by("position")))
            .first())


def latest_evaluation(*, job: Job) -> Evaluation | None:
    """The newest evaluation of ``job``, or None."""
    return job.evaluations.order_by("-created_at").first()


TREND_SNAPSHOTS = 4
#: Most points a chart draws; longer ranges are averaged into this many buckets.
#: Chart ranges a job page offers, seconds.


def policy_band(policy) -> tuple[float, float]:
    """The utilization band of a JobPolicy row (``scaling.policy.policy.utilization_band``, as ``Policy.band``)."""
    return utilization_band(policy.utilization_target, policy.utilization_min, policy.utilization_max)


def finite_or_inf(rate: float) -> float | str:
    """A rate for JSON and templates: the number, or ``"inf"`` for an idle stage's infinite true rate."""
    return rate if math.isfinite(rate) else "inf"


def window_coverage(*, jobs: list[Job], now: datetime | None = None) -> dict[int, float]:
    """Seconds of metrics in each job's current window (after its last configuration change), in one
    query for all ``jobs``."""
    now = now or timezone.now()
    if not jobs:
        return {}
    longest_s = max(job.policy.metric_window_s for job in jobs)
    rows = (MetricSnapshot.objects.filter(job_id__in=[j.pk for j in jobs],
                                          collected_at__gt=now - timedelta(seconds=longest_s), collected_at__lte=now)
            .values_list("job_id", "collected_at", "window_s"))
    by_id = {j.pk: j for j in jobs}
    covered: dict[int, float] = {j.pk: 0.0 for j in jobs}
    for job_id, at, window_s in rows:
        job = by_id[job_id]
        if at > now - timedelta(seconds=job.policy.metric_window_s) and (
                job.config_changed_at is None or at > job.config_changed_at):
            covered[job_id] += window_s
    return covered
