"""Reads: metric windows, latest snapshots and the chart series of a job."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Prefetch
from django.utils import timezone

from scaling.metrics import stage_utilization, true_processing_rate
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


def dag_vertices(*, job: Job, proposal_plan: dict | None = None, recent: int = 4) -> list[dict]:
    """Per-vertex numbers for the DAG: measured over the newest ``recent`` snapshots (so the DAG has
    live numbers before the metric window is full), with the plan's fields (target rate, ideal
    parallelism, bottleneck) from the newest evaluation and the proposed parallelism from
    ``proposal_plan`` when a proposal is pending."""
    snapshots = list(job.snapshots.order_by("-collected_at").prefetch_related("vertices")[:recent])
    if not snapshots:
        return []
    latest = snapshots[0]
    total_s = sum(s.window_s for s in snapshots) or 1.0
    sums: dict[str, list[float]] = {}
    for snapshot in snapshots:
        if snapshot.run_id != latest.run_id:
            continue
        for v in snapshot.vertices.all():
            acc = sums.setdefault(v.vertex_id, [0.0, 0.0, 0.0])
            acc[0] += v.busy_s
            acc[1] += v.records_in
            acc[2] += v.records_out
    evaluation = latest_evaluation(job=job)
    evaluated = {v["vertex_id"]: v for v in (evaluation.plan.get("vertices", []) if evaluation else [])}
    proposed = {v["vertex_id"]: v["proposed"] for v in (proposal_plan or {}).get("vertices", [])}
    bottleneck = (proposal_plan or (evaluation.plan if evaluation else {})).get("bottleneck")
    rows = []
    for v in latest.vertices.all():
        busy_s, rec_in, rec_out = sums.get(v.vertex_id, [0.0, 0.0, 0.0])
        row = {
            "id": v.vertex_id, "name": v.name or v.vertex_id, "position": v.position, "upstream": v.upstream,
            "tasks": v.tasks, "proposed": proposed.get(v.vertex_id),
            "utilization": stage_utilization(busy_s, total_s, v.tasks, latest.cores),
            "true_processing_rate": _finite_or_inf(true_processing_rate(rec_in, busy_s)),
            "true_output_rate": _finite_or_inf(true_processing_rate(rec_out, busy_s)),
            "records_in_per_s": rec_in / total_s, "records_out_per_s": rec_out / total_s,
            "selectivity": round(rec_out / rec_in, 3) if rec_in else "–",
            "bottleneck": bottleneck == v.vertex_id,
        }
        if v.vertex_id in evaluated:
            plan_v = evaluated[v.vertex_id]
            row.update(target_data_rate=plan_v.get("target_data_rate"),
                       ideal_parallelism=plan_v.get("ideal_parallelism"))
        rows.append(row)
    return rows


# --- dashboard reads: bounded queries (a fixed number per page, whatever the number of jobs) ---

#: Snapshots between the latest and the one the backlog trend compares with (15 s apart: 1 min; a
#: 5-min difference showed a backlog growing while it drained fast, issue 16).
TREND_SNAPSHOTS = 4
#: Most points a chart draws; longer ranges are averaged into this many buckets.
MAX_CHART_POINTS = 360
#: Chart ranges a job page offers, seconds.
CHART_RANGES_S = {"15m": 900, "1h": 3600, "6h": 6 * 3600, "24h": 24 * 3600}


def policy_band(policy) -> tuple[float, float]:
    """The utilization band of a JobPolicy row (``scaling.policy.utilization_band``, as ``Policy.band``)."""
    return utilization_band(policy.utilization_target, policy.utilization_min, policy.utilization_max)


def _finite_or_inf(rate: float) -> float | str:
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


@dataclass(frozen=True)
class ChartData:
    """Downsampled series for the job page, aligned on ``t`` (ISO times, oldest first)."""

    t: list[str]
    arrival_rate: list[float]
    processed_rate: list[float]
    backlog: list[float]
    batch_ratio: list[float]
    executors: list[float]
    cores: list[float]
    #: vertex id -> (name, utilization per point; None where the vertex did not run)
    utilization: dict[str, tuple[str, list[float | None]]]
    range_s: int
    bucket_s: float


def chart_data(*, job: Job, range_s: int = 3600, max_points: int = MAX_CHART_POINTS) -> ChartData:
    """The job's series over the ``range_s`` seconds up to its newest snapshot, averaged into at most
    ``max_points`` buckets. Two queries: the snapshot columns of the range (index job, collected_at),
    and the vertex rows of one snapshot per bucket, so the row count is bounded by ``max_points``."""
    newest = job.snapshots.order_by("-collected_at").values_list("collected_at", flat=True).first()
    empty = ChartData([], [], [], [], [], [], [], {}, range_s, 0.0)
    if newest is None:
        return empty
    start = newest - timedelta(seconds=range_s)
    rows = list(job.snapshots.filter(collected_at__gt=start, collected_at__lte=newest).order_by("collected_at")
                .values_list("pk", "collected_at", "arrival_rate_per_s", "processed_rate_per_s", "backlog",
                             "batch_ratio", "executors", "cores", "window_s"))
    bucket_s = max(range_s / max_points, 1e-6)
    buckets: list[list[tuple]] = []
    edge = None
    for row in rows:
        if edge is None or (row[1] - edge).total_seconds() >= bucket_s:
            buckets.append([])
            edge = row[1]
        buckets[-1].append(row)

    def mean(bucket, i):
        return round(sum(r[i] for r in bucket) / len(bucket), 3)

    picked = [b[-1] for b in buckets]  # the newest snapshot of each bucket: for vertex rows and step values
    vertex_rows = (VertexSnapshot.objects.filter(snapshot_id__in=[p[0] for p in picked])
                   .values_list("snapshot_id", "vertex_id", "name", "position", "tasks", "busy_s"))
    index = {p[0]: i for i, p in enumerate(picked)}
    window = {p[0]: (p[8], p[7]) for p in picked}
    utilization: dict[str, tuple[str, list[float | None]]] = {}
    order: dict[str, int] = {}
    for snapshot_id, vertex_id, name, position, tasks, busy_s in vertex_rows:
        if vertex_id not in utilization:
            utilization[vertex_id] = (name or vertex_id, [None] * len(picked))
            order[vertex_id] = position
        window_s, cores = window[snapshot_id]
        utilization[vertex_id][1][index[snapshot_id]] = round(stage_utilization(busy_s, window_s, tasks, cores), 3)
    utilization = dict(sorted(utilization.items(), key=lambda kv: order[kv[0]]))
    return ChartData(
        t=[b[-1][1].isoformat() for b in buckets], arrival_rate=[mean(b, 2) for b in buckets],
        processed_rate=[mean(b, 3) for b in buckets], backlog=[b[-1][4] for b in buckets],
        batch_ratio=[mean(b, 5) for b in buckets], executors=[b[-1][6] for b in buckets],
        cores=[b[-1][7] for b in buckets], utilization=utilization, range_s=range_s, bucket_s=bucket_s)


def rescales(*, job: Job, since: datetime | None = None, limit: int = 50) -> list:
    """Finished executions of ``job`` (newest first, at most ``limit``) with their proposals."""
    from webapp.proposals.models import Execution  # noqa: PLC0415

    qs = Execution.objects.filter(proposal__job=job, finished_at__isnull=False).select_related("proposal")
    if since:
        qs = qs.filter(finished_at__gte=since)
    return list(qs.order_by("-finished_at")[:limit])
