"""Reads: metric windows, latest snapshots and the chart series of a job."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Prefetch, QuerySet
from django.utils import timezone

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


@dataclass(frozen=True)
class Series:
    """Time series for the job page charts (one list per metric, aligned on ``t``)."""

    t: list[str]
    arrival_rate: list[float]
    processed_rate: list[float]
    backlog: list[int]
    batch_ratio: list[float]
    cores: list[int]


def job_series(*, job: Job, since: datetime | None = None, limit: int = 400) -> Series:
    """Chart series of the newest ``limit`` snapshots (oldest first)."""
    qs: QuerySet[MetricSnapshot] = job.snapshots.order_by("-collected_at")
    if since:
        qs = qs.filter(collected_at__gte=since)
    rows = list(qs.values_list("collected_at", "arrival_rate_per_s", "processed_rate_per_s", "backlog",
                               "batch_ratio", "cores")[:limit])[::-1]
    return Series(
        t=[r[0].isoformat() for r in rows], arrival_rate=[r[1] for r in rows],
        processed_rate=[r[2] for r in rows], backlog=[r[3] for r in rows],
        batch_ratio=[r[4] for r in rows], cores=[r[5] for r in rows])


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
        slots = max(1, min(v.tasks, latest.cores))
        row = {
            "id": v.vertex_id, "name": v.name or v.vertex_id, "position": v.position, "upstream": v.upstream,
            "tasks": v.tasks, "proposed": proposed.get(v.vertex_id),
            "utilization": min(1.0, busy_s / total_s / slots),
            "true_processing_rate": (rec_in / busy_s) if busy_s > 0 else "inf",
            "true_output_rate": (rec_out / busy_s) if busy_s > 0 else "inf",
            "records_in_per_s": rec_in / total_s,
            "selectivity": round(rec_out / rec_in, 3) if rec_in else "–",
            "bottleneck": bottleneck == v.vertex_id,
        }
        if v.vertex_id in evaluated:
            plan_v = evaluated[v.vertex_id]
            row.update(target_data_rate=plan_v.get("target_data_rate"),
                       ideal_parallelism=plan_v.get("ideal_parallelism"))
        rows.append(row)
    return rows
