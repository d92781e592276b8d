"""Dashboard reads that must tell the truth when Spark has nothing to say.

A window *without data* is a snapshot with no completed micro-batch (``batches == 0``: a restart, a
stall, an overloaded trigger), or a stretch of time with no snapshot at all (the runner was down).
Its rates and backlog are not measurements, so:

- the DAG is drawn from the last snapshots *with* data (:func:`dag_vertices`), and the page says it
  is stale (:func:`staleness`);
- the charts hold ``None`` (a gap) there, never a zero (:func:`chart_data`), and a chart without a
  point says so instead of drawing an empty axis (:attr:`ChartData.empty`).

Bounded queries: a fixed number per page, whatever the length of the history.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from django.conf import settings
from django.db.models import Prefetch

from scaling.forecast.job_figures import OVERHEAD_SHOWN, overhead_of_batch
from scaling.values.metrics import stage_utilization, task_skew, true_processing_rate
from scaling.values.plan import JobPlan
from webapp.jobs.models import Job, MetricSnapshot, VertexRollup, VertexSnapshot
from webapp.jobs.selectors import finite_or_inf
from webapp.jobs.stages import stage_names

#: Most points a chart draws; longer ranges are averaged into this many buckets.
MAX_CHART_POINTS = 360
#: Chart ranges a job page offers, seconds.
CHART_RANGES_S = {"15m": 900, "1h": 3600, "6h": 6 * 3600, "24h": 24 * 3600, "7d": 7 * 24 * 3600,
                  "30d": 30 * 24 * 3600}
#: The span of one roll-up (``MetricRollup.minute``): the charts read them past the raw window.
ROLLUP_STEP = timedelta(minutes=1)
#: A gap between two snapshots longer than this many collect intervals is a window without data.
GAP_INTERVALS = 3


class StaleCause(StrEnum):
    """Why the page shows older numbers than the newest collect."""

    RESTARTING = "restarting"  # an approved or executing proposal: the query is being rescaled
    DOWN = "down"  # the runner or Spark does not answer
    NO_BATCH = "no-batch"  # Spark answers, but no micro-batch completed in the newest window


STALE_TEXT = {StaleCause.RESTARTING: "restarting", StaleCause.DOWN: "runner or Spark down",
              StaleCause.NO_BATCH: "no micro-batch completed"}


@dataclass(frozen=True)
class Staleness:
    """The page's numbers are from ``since`` (the newest snapshot with data; when there was never
    one, the job's registration), not from now, because of ``cause``."""

    since: datetime
    cause: StaleCause

    @property
    def text(self) -> str:
        return STALE_TEXT[self.cause]


def last_good_snapshot(*, job: Job) -> MetricSnapshot | None:
    """The newest snapshot of ``job`` in which a micro-batch completed, vertices prefetched; or None."""
    return (job.snapshots.filter(batches__gt=0).order_by("-collected_at")
            .prefetch_related(Prefetch("vertices", queryset=VertexSnapshot.objects.order_by("position")))
            .first())


def staleness(*, job: Job, newest: MetricSnapshot | None, last_good: MetricSnapshot | None,
              busy: bool) -> Staleness | None:
    """None when the newest collect has data and the job is healthy; else since when the page's
    numbers are old and why. ``busy``: a proposal of the job is approved or executing."""
    fresh = newest is not None and newest.batches > 0 and job.health in (Job.Health.RUNNING, Job.Health.COLLECTING)
    if fresh:
        return None
    if newest is None and job.health == Job.Health.COLLECTING and not busy:
        return None  # nothing collected yet: the page says "waiting for the first metrics"
    since = last_good.collected_at if last_good is not None else job.created_at
    if busy:
        return Staleness(since, StaleCause.RESTARTING)
    if job.health == Job.Health.DOWN:
        return Staleness(since, StaleCause.DOWN)
    return Staleness(since, StaleCause.NO_BATCH)


def dag_vertices(*, job: Job, proposal_plan: JobPlan | None = None, evaluation=None, recent: int = 4) -> list[dict]:
    """Per-vertex numbers for the DAG, measured over the newest ``recent`` snapshots *with data* of the
    newest run that had data (so a restart or a stall keeps the last good graph on the page).

    Each row: id, name (Spark's operator chain), stage (the short stage name shown everywhere,
    :func:`webapp.jobs.stages.stage_names`), position, upstream (ids), tasks, proposed (from
    ``proposal_plan``, or None), utilization (0..1, busy s per s per task slot), true_processing_rate
    and true_output_rate (records per busy second, or ``"inf"``; at the busiest task's pace where it
    was measured, as the plan's, FLIP-271's MAX busy-time aggregation), true_processing_rate_mean
    (at the mean task's pace; None where the busiest task was not measured), task_skew,
    records_in_per_s, records_out_per_s, selectivity, bottleneck; and target_data_rate,
    ideal_parallelism from ``evaluation`` (an :class:`~webapp.jobs.models.Evaluation`) when it
    planned the vertex."""
    snapshots = list(job.snapshots.filter(batches__gt=0).order_by("-collected_at")
                     .prefetch_related(Prefetch("vertices", queryset=VertexSnapshot.objects.order_by("position")))
                     [:recent])
    if not snapshots:
        return []
    latest = snapshots[0]
    same_run = [s for s in snapshots if s.run_id == latest.run_id]
    total_s = sum(s.window_s for s in same_run) or 1.0
    sums: dict[str, list[float]] = {}
    # Per vertex: Σ busiest-task and Σ mean-task busy seconds (a snapshot that did not measure the
    # busiest task counts its mean, as the metric window does), and whether any measured it.
    pace: dict[str, list[float]] = {}
    for snapshot in same_run:
        for v in snapshot.vertices.all():
            acc = sums.setdefault(v.vertex_id, [0.0, 0.0, 0.0])
            acc[0] += v.busy_s
            acc[1] += v.records_in
            acc[2] += v.records_out
            busiest = pace.setdefault(v.vertex_id, [0.0, 0.0, 0.0, 0.0])
            busiest[0] += v.paced_busy_s / max(1, v.tasks)
            busiest[1] += v.busy_s / max(1, v.tasks)
            busiest[2] += v.busy_max_s is not None
            busiest[3] += v.paced_busy_s
    evaluation_plan = evaluation.job_plan if evaluation else None
    evaluated = {v.vertex_id: v for v in (evaluation_plan.vertices if evaluation_plan else ())}
    proposed = {v.vertex_id: v.proposed for v in (proposal_plan.vertices if proposal_plan else ())}
    shown_plan = proposal_plan or evaluation_plan
    bottleneck = shown_plan.bottleneck if shown_plan else None
    vertices = list(latest.vertices.all())
    names = stage_names((v.vertex_id, v.name) for v in vertices)
    rows = []
    for v in vertices:
        busy_s, rec_in, rec_out = sums.get(v.vertex_id, [0.0, 0.0, 0.0])
        measured = v.vertex_id in pace and pace[v.vertex_id][2] > 0
        paced_s = pace[v.vertex_id][3] if measured else busy_s
        row = {
            "id": v.vertex_id, "name": v.name or v.vertex_id, "stage": names[v.vertex_id], "position": v.position,
            "upstream": v.upstream, "tasks": v.tasks, "proposed": proposed.get(v.vertex_id),
            "utilization": stage_utilization(busy_s, total_s, v.tasks, latest.cores),
            "true_processing_rate": finite_or_inf(true_processing_rate(rec_in, paced_s)),
            "true_output_rate": finite_or_inf(true_processing_rate(rec_out, paced_s)),
            "true_processing_rate_mean": finite_or_inf(true_processing_rate(rec_in, busy_s)) if measured else None,
            "records_in_per_s": rec_in / total_s, "records_out_per_s": rec_out / total_s,
            "selectivity": round(rec_out / rec_in, 3) if rec_in else "–",
            "bottleneck": bottleneck == v.vertex_id,
            "task_skew": round(task_skew(pace[v.vertex_id][0], pace[v.vertex_id][1]), 3) if measured else None,
        }
        if v.vertex_id in evaluated:
            plan_v = evaluated[v.vertex_id]
            row.update(target_data_rate=finite_or_inf(plan_v.target_data_rate),
                       ideal_parallelism=plan_v.ideal_parallelism)
        rows.append(row)
    return rows


def dag_overhead(*, job: Job, recent: int = 4) -> dict | None:
    """The batch overhead over the snapshots the DAG shows (:func:`dag_vertices`' newest ``recent`` with
    data, of their newest run): ``{"share", "overhead_s", "batch_s", "shown"}``, the overhead's share of
    the batch (``scaling.forecast.job_figures.overhead_of_batch``), the mean overhead and batch duration
    per batch (seconds), and whether the DAG draws it as its own element (share above
    ``OVERHEAD_SHOWN``); None without a batch duration."""
    rows = list(job.snapshots.filter(batches__gt=0).order_by("-collected_at")
                .values_list("run_id", "batches", "batch_overhead_s", "batch_duration_s")[:recent])
    run = rows[0][0] if rows else None
    rows = [r for r in rows if r[0] == run]
    batches = sum(r[1] for r in rows)
    if not batches:
        return None
    overhead_s = sum(r[1] * r[2] for r in rows) / batches
    batch_s = sum(r[1] * r[3] for r in rows) / batches
    share = overhead_of_batch(overhead_s, batch_s)
    if share is None:
        return None
    return {"share": round(share, 3), "overhead_s": round(overhead_s, 3), "batch_s": round(batch_s, 3),
            "shown": share > OVERHEAD_SHOWN}


def stage_names_of(snapshot: MetricSnapshot | None) -> dict[str, str]:
    """``{vertex_id: stage name}`` of the stages of ``snapshot`` (empty for None)."""
    if snapshot is None:
        return {}
    return stage_names((v.vertex_id, v.name) for v in snapshot.vertices.all())


def job_stage_names(*, job: Job) -> dict[str, str]:
    """``{vertex_id: stage name}`` of the job's newest snapshot with data (empty when none)."""
    return stage_names_of(last_good_snapshot(job=job))


@dataclass(frozen=True)
class ChartData:
    """Downsampled series for the job page, aligned on ``t`` (ISO times, oldest first). ``None`` marks
    a window without data (a gap in the chart, never a zero)."""

    t: list[str]
    arrival_rate: list[float | None]
    capacity_rate: list[float | None]
    backlog: list[float | None]
    batch_ratio: list[float | None]
    executors: list[float | None]
    cores: list[float | None]
    #: vertex id -> (stage name, utilization per point; None where the vertex did not run)
    utilization: dict[str, tuple[str, list[float | None]]]
    range_s: int
    bucket_s: float

    @property
    def empty(self) -> bool:
        """Whether no series holds a point: nothing to draw (the page says "no data yet", not an axis)."""
        series = (self.arrival_rate, self.capacity_rate, self.backlog, self.batch_ratio, self.executors, self.cores,
                  *(values for _name, values in self.utilization.values()))
        return all(value is None for values in series for value in values)


def series_rows(*, job: Job, start: datetime, newest: datetime) -> list[tuple]:
    """The rows of ``job``'s charts in ``(start, newest]``, oldest first, each ``(key, at, arrival,
    capacity, backlog, batch_ratio, executors, cores, window_s, batches, batch_duration_s)``: the raw
    snapshots (key: the snapshot pk), and beyond them the per-minute roll-ups (key: minus the roll-up pk;
    ``at`` the minute's end; backlog its last; batch duration None). A raw snapshot whose minute was
    rolled up already is left out."""
    rollups = [(-r[0], r[1] + ROLLUP_STEP, *r[2:], None)
               for r in job.rollups.filter(minute__gt=start - ROLLUP_STEP, minute__lte=newest).order_by("minute")
               .values_list("pk", "minute", "arrival_rate_per_s", "processed_rate_per_s", "backlog_last",
                            "batch_ratio", "executors", "cores", "data_s", "batches")]
    rolled = {r[1] - ROLLUP_STEP for r in rollups}
    raw = [r for r in job.snapshots.filter(collected_at__gt=start, collected_at__lte=newest).order_by("collected_at")
           .values_list("pk", "collected_at", "arrival_rate_per_s", "processed_rate_per_s", "backlog",
                        "batch_ratio", "executors", "cores", "window_s", "batches", "batch_duration_s")
           if r[1].replace(second=0, microsecond=0) not in rolled]
    return sorted(rollups + raw, key=lambda r: r[1])


def _utilization(picked: list[tuple | None]) -> dict[str, tuple[str, list[float | None]]]:
    """Utilization per stage at each bucket's ``picked`` row (None: no data): from the snapshot's vertex
    rows, or the roll-up's. Two queries."""
    index = {p[0]: i for i, p in enumerate(picked) if p}
    newest_first = sorted(index, key=index.__getitem__, reverse=True)
    window = {p[0]: (p[8], p[7]) for p in picked if p}  # key -> (window_s, cores)
    measured = [(snapshot_id, vertex_id, name, position,
                 stage_utilization(busy_s, window[snapshot_id][0], tasks, window[snapshot_id][1]))
                for snapshot_id, vertex_id, name, position, tasks, busy_s in VertexSnapshot.objects.filter(
                    snapshot_id__in=[k for k in index if k > 0])
                .values_list("snapshot_id", "vertex_id", "name", "position", "tasks", "busy_s")]
    measured += [(-rollup_id, vertex_id, name, position, utilization)
                 for rollup_id, vertex_id, name, position, utilization in VertexRollup.objects.filter(
                     rollup_id__in=[-k for k in index if k < 0])
                 .values_list("rollup_id", "vertex_id", "name", "position", "utilization")]
    utilization: dict[str, list[float | None]] = {}
    order: dict[str, int] = {}
    raw_names: dict[str, str] = {}
    rank = {key: i for i, key in enumerate(newest_first)}
    # Newest point first: the legend and the order follow the stages as they are now.
    for key, vertex_id, name, position, value in sorted(measured, key=lambda m: rank[m[0]]):
        if vertex_id not in utilization:
            utilization[vertex_id] = [None] * len(picked)
            order[vertex_id] = position
            raw_names[vertex_id] = name
        utilization[vertex_id][index[key]] = round(value, 3)
    names = stage_names(raw_names.items())
    return {vid: (names[vid], utilization[vid]) for vid in sorted(utilization, key=order.__getitem__)}


def _without_running_batches(buckets: list[list[tuple]], *, good) -> list[list[tuple]]:
    """``buckets`` less those without data while a batch was running: no point at all there (the line
    joins its neighbours), rather than a gap. A batch was running through a bucket when the next
    batch with data took at least the time since the last one (a job whose batches take 2 minutes
    completes none in most 15 s collect windows); after the newest batch, for up to two of its
    durations. A longer stretch without data, and a stretch with no row at all, stays a gap."""
    upcoming: list[float | None] = [None] * len(buckets)
    duration = None
    for i in range(len(buckets) - 1, -1, -1):
        rows = good(buckets[i])
        if rows:
            duration = rows[0][10]
        upcoming[i] = duration
    kept, last = [], None
    for i, bucket in enumerate(buckets):
        rows = good(bucket)
        if rows:
            last = rows[-1]
        elif bucket[0][0] != "gap" and last is not None:
            running_s = upcoming[i] if upcoming[i] is not None else 2 * (last[10] or 0.0)
            if (bucket[-1][1] - last[1]).total_seconds() <= running_s:
                continue
        kept.append(bucket)
    return kept


def chart_data(*, job: Job, range_s: int = 3600, max_points: int = MAX_CHART_POINTS) -> ChartData:
    """The job's series over the ``range_s`` seconds up to its newest snapshot (or roll-up), averaged into
    at most ``max_points`` buckets over the snapshots *with data*; past the raw retention window the
    points come from the per-minute roll-ups (``webapp.loop.retention``). A bucket whose rows all lack
    data, and a stretch longer than ``GAP_INTERVALS`` collect intervals (roll-up minutes) with no row,
    become a ``None`` point, unless a batch was running (:func:`_without_running_batches`). Five queries."""
    newest_raw = job.snapshots.order_by("-collected_at").values_list("collected_at", flat=True).first()
    newest_rollup = job.rollups.order_by("-minute").values_list("minute", flat=True).first()
    ends = [at for at in (newest_raw, newest_rollup and newest_rollup + ROLLUP_STEP) if at is not None]
    if not ends:
        return ChartData([], [], [], [], [], [], [], {}, range_s, 0.0)
    newest = max(ends)
    rows = series_rows(job=job, start=newest - timedelta(seconds=range_s), newest=newest)
    bucket_s = max(range_s / max_points, 1e-6)
    gap_s = max(GAP_INTERVALS * settings.SCALER_COLLECT_INTERVAL_S, 2 * bucket_s)
    rollup_gap_s = max(gap_s, GAP_INTERVALS * ROLLUP_STEP.total_seconds())
    buckets: list[list[tuple]] = []
    edge = previous = None
    for row in rows:
        if previous is not None and (row[1] - previous).total_seconds() > (rollup_gap_s if row[0] < 0 else gap_s):
            buckets.append([("gap", previous + (row[1] - previous) / 2)])  # nothing was collected here
            edge = None
        if edge is None or (row[1] - edge).total_seconds() >= bucket_s:
            buckets.append([])
            edge = row[1]
        buckets[-1].append(row)
        previous = row[1]

    def good(bucket) -> list[tuple]:
        return [r for r in bucket if r[0] != "gap" and r[9] > 0]

    buckets = _without_running_batches(buckets, good=good)

    def mean(bucket, i):
        rows_with_data = good(bucket)
        return round(sum(r[i] for r in rows_with_data) / len(rows_with_data), 3) if rows_with_data else None

    def last(bucket, i):
        rows_with_data = good(bucket)
        return rows_with_data[-1][i] if rows_with_data else None

    picked = [good(b)[-1] if good(b) else None for b in buckets]  # newest row with data per bucket
    return ChartData(
        t=[b[-1][1].isoformat() for b in buckets], arrival_rate=[mean(b, 2) for b in buckets],
        capacity_rate=[mean(b, 3) for b in buckets], backlog=[last(b, 4) for b in buckets],
        batch_ratio=[mean(b, 5) for b in buckets], executors=[last(b, 6) for b in buckets],
        cores=[last(b, 7) for b in buckets], utilization=_utilization(picked), range_s=range_s, bucket_s=bucket_s)
