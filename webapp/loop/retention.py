"""Bounded metric storage: raw snapshots past the raw window are rolled up per minute, then deleted;
roll-ups past their own window are deleted (``SCALER_RETENTION_RAW_S``, ``SCALER_RETENTION_ROLLUP_S``).
Evaluations past the raw window are deleted too (one every beat: 5,760 a job a day at 15 s), except the
job's newest and those a proposal refers to (its page shows the evaluation it came from).

Each batch is one transaction: it rolls up the complete minutes of at most ``SCALER_RETENTION_BATCH``
snapshots and deletes those snapshots (their vertex rows go with them), so a minute is either rolled up
and gone or untouched. Re-running is harmless and so is a concurrent run: a minute that has a roll-up
already keeps it (one roll-up per job and minute, inserted with ``ignore_conflicts``), and a second run
deleting rows the first one deleted deletes nothing.

Nothing the live loop reads is pruned: per job, the raw window is at least the metric window plus the
hour an execution's cost is followed (``rescale_cost.FOLLOW_S``), it reaches back to the metric window
before every proposal still open or awaiting verification, and the first snapshot of the job's newest
run (where the stabilization interval is counted from, ``window.stable_snapshots``) is kept.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from itertools import groupby
from statistics import fmean

from django.conf import settings
from django.db import transaction
from django.db.models import Min, Q
from django.utils import timezone

from scaling.values.metrics import stage_utilization
from webapp.jobs.models import Evaluation, Job, MetricRollup, MetricSnapshot, VertexRollup, VertexSnapshot
from webapp.loop.rescale_cost import FOLLOW_S
from webapp.proposals.models import Proposal

#: Snapshot columns a roll-up is computed from, in this order.
SNAPSHOT_COLUMNS = ("pk", "collected_at", "window_s", "batches", "backlog", "arrival_rate_per_s",
                    "processed_rate_per_s", "batch_ratio", "executors", "cores")
#: Proposals whose evaluation window the loop still reads (verification, cost, execution).
OPEN_STATUSES = (Proposal.Status.PENDING, Proposal.Status.APPROVED, Proposal.Status.EXECUTING,
                 Proposal.Status.ROLLING_BACK)


def minute_of(at: datetime) -> datetime:
    """The start of the minute of ``at``."""
    return at.replace(second=0, microsecond=0)


def raw_cutoff(*, job: Job, now: datetime) -> datetime:
    """The minute before which ``job``'s raw snapshots may be rolled up and deleted: at least
    ``SCALER_RETENTION_RAW_S`` and the metric window plus :data:`FOLLOW_S` before ``now``, and the metric
    window before the oldest proposal that is open or awaits its verification."""
    window_s = float(job.policy.metric_window_s)
    cutoff = now - timedelta(seconds=max(settings.SCALER_RETENTION_RAW_S, window_s + FOLLOW_S))
    oldest_open = (Proposal.objects.filter(job=job).filter(
        Q(status__in=OPEN_STATUSES)
        | Q(status=Proposal.Status.SUCCEEDED, kind=Proposal.Kind.SCALE, verification=Proposal.Verification.NONE))
        .aggregate(at=Min("created_at"))["at"])
    if oldest_open is not None:
        cutoff = min(cutoff, oldest_open - timedelta(seconds=window_s))
    return minute_of(cutoff)


def run_start_pk(*, job: Job) -> int | None:
    """The first snapshot of ``job``'s newest run (the stabilization interval counts from it), or None."""
    run_id = job.snapshots.order_by("-collected_at").values_list("run_id", flat=True).first()
    if run_id is None:
        return None
    return job.snapshots.filter(run_id=run_id).order_by("collected_at", "pk").values_list("pk", flat=True).first()


def _weighted(rows: list[tuple], column: int) -> float | None:
    """The mean of ``column`` over ``rows`` weighted by their windows (as ``scaling.values.metrics.MetricWindow``
    weights samples by their span); unweighted when no row has a window; None for no rows."""
    if not rows:
        return None
    weights = [max(r[2], 0.0) for r in rows]
    return fmean([r[column] for r in rows], weights if sum(weights) > 0 else None)


def rollup_of(job_id: int, minute: datetime, rows: list[tuple], vertices: dict[int, list[tuple]]
              ) -> tuple[MetricRollup, list[VertexRollup]]:
    """The roll-up of one minute from its snapshot ``rows`` (:data:`SNAPSHOT_COLUMNS`, oldest first) and
    their ``vertices`` (``{snapshot pk: [(vertex_id, name, position, tasks, busy_s)]}``), unsaved; the
    vertex roll-ups' ``rollup`` is left for the caller to set."""
    good = [r for r in rows if r[3] > 0]
    last = good[-1] if good else None
    rollup = MetricRollup(
        job_id=job_id, minute=minute, snapshots=len(rows), window_s=sum(r[2] for r in rows),
        data_s=sum(r[2] for r in good), batches=sum(r[3] for r in rows),
        arrival_rate_per_s=_weighted(good, 5), processed_rate_per_s=_weighted(good, 6),
        batch_ratio=_weighted(good, 7), backlog_last=last[4] if last else None,
        backlog_max=max((r[4] for r in good), default=None), executors=last[8] if last else None,
        cores=last[9] if last else None)
    sums: dict[str, list] = {}  # vertex_id -> [Σ utilization × window, Σ window, name, position]
    for r in good:
        weight = max(r[2], 1e-9)
        for vertex_id, name, position, tasks, busy_s in vertices.get(r[0], ()):
            acc = sums.setdefault(vertex_id, [0.0, 0.0, name, position])
            acc[0] += stage_utilization(busy_s, r[2], tasks, r[9]) * weight
            acc[1] += weight
            acc[2:] = [name, position]
    stages = [VertexRollup(vertex_id=vid, name=acc[2], position=acc[3], utilization=round(acc[0] / acc[1], 6))
              for vid, acc in sums.items()]
    return rollup, stages


def _store_rollups(job_id: int, rows: list[tuple], rollup_from: datetime) -> int:
    """Roll up the minutes of ``rows`` not rolled up yet (and not older than ``rollup_from``); returns how
    many roll-ups were written."""
    minutes = {minute_of(r[1]) for r in rows if r[1] >= rollup_from}
    existing = set(MetricRollup.objects.filter(job_id=job_id, minute__in=minutes).values_list("minute", flat=True))
    wanted = [r for r in rows if minute_of(r[1]) in minutes - existing]
    if not wanted:
        return 0
    vertices: dict[int, list[tuple]] = {}
    for snapshot_id, *vertex in (VertexSnapshot.objects.filter(snapshot_id__in=[r[0] for r in wanted if r[3] > 0])
                                 .values_list("snapshot_id", "vertex_id", "name", "position", "tasks", "busy_s")):
        vertices.setdefault(snapshot_id, []).append(tuple(vertex))
    built = [rollup_of(job_id, minute, list(group), vertices)
             for minute, group in groupby(wanted, key=lambda r: minute_of(r[1]))]
    MetricRollup.objects.bulk_create([rollup for rollup, _stages in built], ignore_conflicts=True)
    ids = dict(MetricRollup.objects.filter(job_id=job_id, minute__in=[r.minute for r, _s in built])
               .values_list("minute", "pk"))
    stages = []
    for rollup, rollup_stages in built:
        for stage in rollup_stages:
            stage.rollup_id = ids[rollup.minute]
            stages.append(stage)
    VertexRollup.objects.bulk_create(stages, ignore_conflicts=True)
    return len(built)


def prune_job_batch(*, job: Job, cutoff: datetime, rollup_from: datetime, keep: int | None,
                    batch: int) -> tuple[int, int, bool]:
    """One transaction: roll up and delete at most ``batch`` of ``job``'s snapshots older than ``cutoff``
    (whole minutes only: a minute of more than ``batch`` goes whole, alone; ``keep``: a snapshot pk never
    deleted). Returns (snapshots deleted, roll-ups written, whether older snapshots may be left)."""
    with transaction.atomic():
        older = (MetricSnapshot.objects.filter(job=job, collected_at__lt=cutoff).exclude(pk=keep)
                 .order_by("collected_at", "pk").values_list(*SNAPSHOT_COLUMNS))
        rows = list(older[:batch])
        full = len(rows) == batch
        if full:
            last_minute = minute_of(rows[-1][1])
            whole = [r for r in rows if minute_of(r[1]) < last_minute]
            # A minute of more than ``batch`` snapshots goes in one batch, all of it.
            rows = whole or list(older.filter(collected_at__lt=last_minute + timedelta(minutes=1)))
        written = _store_rollups(job.pk, rows, rollup_from)
        MetricSnapshot.objects.filter(pk__in=[r[0] for r in rows]).delete()
    return len(rows), written, full


def prune_rollups(*, before: datetime, batch: int) -> int:
    """Delete the roll-ups of minutes before ``before``, ``batch`` per transaction; returns how many."""
    deleted = 0
    while True:
        with transaction.atomic():
            ids = list(MetricRollup.objects.filter(minute__lt=before).order_by("minute")
                       .values_list("pk", flat=True)[:batch])
            MetricRollup.objects.filter(pk__in=ids).delete()
        deleted += len(ids)
        if len(ids) < batch:
            return deleted


def prune_evaluations(*, job: Job, cutoff: datetime, batch: int) -> int:
    """Delete ``job``'s evaluations older than ``cutoff``, ``batch`` per transaction, except its newest and
    those a proposal refers to; returns how many."""
    newest = job.evaluations.order_by("-created_at", "-pk").values_list("pk", flat=True).first()
    deleted = 0
    while True:
        with transaction.atomic():
            ids = list(Evaluation.objects.filter(job=job, created_at__lt=cutoff, proposals__isnull=True)
                       .exclude(pk=newest).order_by("created_at").values_list("pk", flat=True)[:batch])
            Evaluation.objects.filter(pk__in=ids).delete()
        deleted += len(ids)
        if len(ids) < batch:
            return deleted


def prune_metrics(*, now: datetime | None = None) -> dict:
    """The retention beat: per job, roll up and delete the raw snapshots past its raw window
    (:func:`raw_cutoff`), then delete the roll-ups older than ``SCALER_RETENTION_ROLLUP_S``. Returns
    ``{"snapshots": deleted, "rollups": written, "rollups_deleted": deleted, "evaluations": deleted}``
    (evaluations: :func:`prune_evaluations` past the same raw window)."""
    now = now or timezone.now()
    batch = max(1, int(settings.SCALER_RETENTION_BATCH))
    rollup_from = minute_of(now - timedelta(seconds=settings.SCALER_RETENTION_ROLLUP_S))
    deleted = written = evaluations = 0
    for job in Job.objects.select_related("policy").order_by("pk"):
        cutoff, keep = raw_cutoff(job=job, now=now), run_start_pk(job=job)
        more = True
        while more:
            count, made, more = prune_job_batch(job=job, cutoff=cutoff, rollup_from=rollup_from, keep=keep,
                                                batch=batch)
            deleted, written = deleted + count, written + made
        evaluations += prune_evaluations(job=job, cutoff=cutoff, batch=batch)
    return {"snapshots": deleted, "rollups": written,
            "rollups_deleted": prune_rollups(before=rollup_from, batch=batch), "evaluations": evaluations}
