"""Reads for the workflow: the jobs overview (each job with its pending and last decided proposal),
a job's executions and audit trail."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from django.db.models import (
    Case,
    Count,
    Exists,
    IntegerChoices,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.utils import timezone

from webapp.jobs.models import Job, MetricSnapshot
from webapp.jobs.selectors import TREND_SNAPSHOTS, window_coverage
from webapp.proposals.models import AuditEvent, Execution, Proposal
from webapp.proposals.reason_text import reason_text

#: The columns of the CSV export: ``reason`` is the text, ``reason_code`` and ``reason_data`` what it is rendered from.
AUDIT_FIELDS = ("id", "at", "job", "proposal", "actor", "action", "before", "after", "reason", "reason_code",
                "reason_data")


def execution_rows(*, job: Job, limit: int = 50) -> list[dict]:
    """The job's newest ``limit`` executions for the history page, newest first: ``execution``,
    ``proposal``, ``verification`` (code, "" when not verified), ``verification_display`` and
    ``can_roll_back`` (``Proposal.can_roll_back``)."""
    executions = (Execution.objects.filter(proposal__job=job).select_related("proposal__decided_by")
                  .order_by("-started_at")[:limit])
    return [{"execution": e, "proposal": e.proposal, "verification": e.proposal.verification,
             "verification_display": e.proposal.get_verification_display(),
             "can_roll_back": e.proposal.can_roll_back} for e in executions]


def audit_trail(*, job: Job) -> QuerySet[AuditEvent]:
    """Every audit event of ``job``, oldest first (the order things happened)."""
    return job.audit_events.order_by("at", "id")


#: Audit events read per query by :func:`iter_audit_rows`.
AUDIT_PAGE = 500
#: The columns :func:`iter_audit_rows` reads, in this order.
AUDIT_COLUMNS = ("id", "at", "proposal_id", "actor_name", "action", "before", "after", "reason")


def audit_row(values: tuple, job_name: str) -> dict:
    """One audit event (its :data:`AUDIT_COLUMNS`) as a plain row (JSON-ready; time in ISO 8601): ``actor``
    is the actor's name, ``reason`` ``{code, data, text}`` (None when the event has none)."""
    pk, at, proposal_id, actor_name, action, before, after, reason = values
    return {"id": pk, "at": at.isoformat(), "job": job_name, "proposal": proposal_id, "actor": actor_name,
            "action": action, "before": before, "after": after,
            "reason": {**reason, "text": reason_text(reason)} if reason else None}


def iter_audit_rows(*, job: Job, page: int = AUDIT_PAGE) -> Iterator[dict]:
    """The audit trail of ``job`` as :func:`audit_row` rows, oldest first, read ``page`` events per query
    (keyset pagination on ``(at, id)``, columns only): memory stays one page, however long the trail."""
    last: tuple | None = None
    while True:
        events = audit_trail(job=job)
        if last is not None:
            events = events.filter(Q(at__gt=last[0]) | Q(at=last[0], id__gt=last[1]))
        batch = list(events.values_list(*AUDIT_COLUMNS)[:page])
        yield from (audit_row(values, job.name) for values in batch)
        if len(batch) < page:
            return
        last = (batch[-1][1], batch[-1][0])


@dataclass(frozen=True)
class JobRow:
    """One row of the jobs overview."""

    job: Job
    snapshot: MetricSnapshot | None
    backlog_trend_per_s: float | None
    pending: Proposal | None
    last: Proposal | None  # the newest decided one
    window_left_s: float | None  # collecting: seconds until the metric window is full

    @property
    def trend_arrow(self) -> str:
        if self.backlog_trend_per_s is None:
            return ""
        if abs(self.backlog_trend_per_s) < 1:
            return "→"
        return "↑" if self.backlog_trend_per_s > 0 else "↓"


#: The columns the overview reads (its rows and ``window_coverage``): a fleet's rows are many, and
#: their JSON columns (plans, reasons, knobs, the scaler's state) cost more to load than the rest.
OVERVIEW_FIELDS = {
    "job": ("name", "health", "health_reason", "config_changed_at", "policy__job", "policy__mode",
            "policy__metric_window_s"),
    "snapshot": ("job_id", "collected_at", "batches", "backlog", "batch_ratio", "cores", "executors"),
    "proposal": ("job_id", "status", "current_config", "proposed_config", "execution__proposal",
                 "execution__downtime_s"),
}


class Attention(IntegerChoices):
    """What a job's overview row waits for, most urgent first: the overview's order (then by name)."""

    DOWN = 0, "down"
    DEGRADED = 1, "degraded"
    PENDING = 2, "a proposal waits for a decision"
    IN_FLIGHT = 3, "a rescale is approved or executing"
    NONE = 4, "nothing waits"


def overview_jobs(*, q: str = "") -> QuerySet[Job]:
    """The overview's jobs whose name contains ``q`` (case-insensitive; "" for all), annotated with their
    :class:`Attention` (``attention``), the latest and trend snapshot and the pending and last decided
    proposal (ids), ordered by attention then name. Slice it: the database orders, the page reads its rows."""
    newest = MetricSnapshot.objects.filter(job=OuterRef("pk")).order_by("-collected_at").values("pk")
    proposals = Proposal.objects.filter(job=OuterRef("pk")).order_by("-created_at").values("pk")
    decided = [s for s in Proposal.Status.values if s not in ("pending", "superseded", "expired")]
    jobs = Job.objects.select_related("policy").only(*OVERVIEW_FIELDS["job"]).annotate(
        attention=_attention(),
        latest_id=Subquery(newest[:1]),
        earlier_id=Subquery(newest[TREND_SNAPSHOTS:TREND_SNAPSHOTS + 1]),
        pending_id=Subquery(proposals.filter(status="pending")[:1]),
        last_id=Subquery(proposals.filter(status__in=decided)[:1]))
    if q:
        jobs = jobs.filter(name__icontains=q)
    return jobs.order_by("attention", "name")


def _waiting(statuses) -> Exists:
    return Exists(Proposal.objects.filter(job=OuterRef("pk"), status__in=statuses))


def _attention() -> Case:
    return Case(When(health=Job.Health.DOWN, then=Value(Attention.DOWN)),
                When(health=Job.Health.DEGRADED, then=Value(Attention.DEGRADED)),
                When(_waiting([Proposal.Status.PENDING]), then=Value(Attention.PENDING)),
                When(_waiting(Proposal.IN_FLIGHT), then=Value(Attention.IN_FLIGHT)),
                default=Value(Attention.NONE), output_field=IntegerField())


def overview_counts(*, q: str = "") -> dict[str, int]:
    """In one aggregate query: ``jobs`` (all), ``attention`` (those whose :class:`Attention` is not NONE)
    and ``matching`` (whose name contains ``q``; all when ``q`` is "")."""
    needs = Q(health__in=[Job.Health.DOWN, Job.Health.DEGRADED]) | Q(
        _waiting([Proposal.Status.PENDING, *Proposal.IN_FLIGHT]))
    return Job.objects.aggregate(jobs=Count("pk"), attention=Count("pk", filter=needs),
                                 matching=Count("pk", filter=Q(name__icontains=q)) if q else Count("pk"))


def jobs_overview(jobs: list[Job] | None = None, *, now: datetime | None = None) -> list[JobRow]:
    """The rows of ``jobs`` (read from :func:`overview_jobs`; None: all of them): each job with its latest
    snapshot, backlog trend, pending and last decided proposal and the time left before its metric window
    is full. Three queries, whatever the number of jobs."""
    now = now or timezone.now()
    jobs = list(overview_jobs()) if jobs is None else jobs
    snapshots = MetricSnapshot.objects.only(*OVERVIEW_FIELDS["snapshot"]).in_bulk(
        [i for j in jobs for i in (j.latest_id, j.earlier_id) if i is not None])
    wanted = [i for j in jobs for i in (j.pending_id, j.last_id) if i is not None]
    by_pk = Proposal.objects.select_related("execution").only(*OVERVIEW_FIELDS["proposal"]).in_bulk(wanted)
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
    qs = Execution.objects.filter(proposal__job=job, finished_at__isnull=False).select_related("proposal")
    if since:
        qs = qs.filter(finished_at__gte=since)
    return list(qs.order_by("-finished_at")[:limit])
