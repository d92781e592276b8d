"""Reads: metric windows, latest snapshots and the chart series of a job."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Prefetch
from django.utils import timezone

from scaling.policy import utilization_band
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
    """The utilization band of a JobPolicy row (``scaling.policy.utilization_band``, as ``Policy.band``)."""
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


@dataclass(frozen=True)
class JobRow:
    """One row of the jobs overview."""

    job: Job
    snapshot: MetricSnapshot | None
    backlog_trend_per_s: float | None
    pending: object | None  # Proposal
    last: object | None  # Proposal: the newest decided one
    window_left_s: float | None  # collecting: seconds until the metric window is full

    @property
    def trend_arrow(self) -> str:
        if self.backlog_trend_per_s is None:
            return ""
        if abs(self.backlog_trend_per_s) < 1:
            return "→"
        return "↑" if self.backlog_trend_per_s > 0 else "↓"


def jobs_overview(*, now: datetime | None = None) -> list[JobRow]:
    """Every job with its latest snapshot, backlog trend, pending and last decided proposal and the
    time left before its metric window is full. Five queries, whatever the number of jobs."""
    from django.db.models import OuterRef, Subquery  # noqa: PLC0415

    from webapp.proposals.models import Proposal  # noqa: PLC0415

    now = now or timezone.now()
    newest = MetricSnapshot.objects.filter(job=OuterRef("pk")).order_by("-collected_at").values("pk")
    proposals = Proposal.objects.filter(job=OuterRef("pk")).order_by("-created_at").values("pk")
    decided = [s for s in Proposal.Status.values if s not in ("pending", "superseded", "expired")]
    jobs = list(Job.objects.select_related("policy").order_by("name").annotate(
        latest_id=Subquery(newest[:1]),
        earlier_id=Subquery(newest[TREND_SNAPSHOTS:TREND_SNAPSHOTS + 1]),
        pending_id=Subquery(proposals.filter(status="pending")[:1]),
        last_id=Subquery(proposals.filter(status__in=decided)[:1])))
    snapshots = MetricSnapshot.objects.in_bulk(
        [i for j in jobs for i in (j.latest_id, j.earlier_id) if i is not None])
    wanted = [i for j in jobs for i in (j.pending_id, j.last_id) if i is not None]
    by_pk = Proposal.objects.select_related("execution").in_bulk(wanted)
    collecting = [j for j in jobs if j.health == Job.Health.COLLECTING]
    covered = window_coverage(jobs=collecting, now=now)
    rows = []
    for job in jobs:
        latest, earlier = snapshots.get(job.latest_id), snapshots.get(job.earlier_id)
        trend = None
        if latest and earlier and latest.collected_at > earlier.collected_at:
            trend = (latest.backlog - earlier.backlog) / (latest.collected_at - earlier.collected_at).total_seconds()
        left = (max(0.0, job.policy.metric_window_s * 0.9 - covered[job.pk]) if job.pk in covered else None)
        rows.append(JobRow(job=job, snapshot=latest, backlog_trend_per_s=trend, pending=by_pk.get(job.pending_id),
                           last=by_pk.get(job.last_id), window_left_s=left))
    return rows


def rescales(*, job: Job, since: datetime | None = None, limit: int = 50) -> list:
    """Finished executions of ``job`` (newest first, at most ``limit``) with their proposals."""
    from webapp.proposals.models import Execution  # noqa: PLC0415

    qs = Execution.objects.filter(proposal__job=job, finished_at__isnull=False).select_related("proposal")
    if since:
        qs = qs.filter(finished_at__gte=since)
    return list(qs.order_by("-finished_at")[:limit])
