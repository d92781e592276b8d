"""Cross-job throttles: at most ``SCALER_CLUSTER_MAX_IN_FLIGHT`` executions in flight per Spark
cluster, and ``SCALER_CLUSTER_COOLDOWN_S`` seconds from the end of one execution on a cluster to the
start of the next: Cruise Control caps concurrent movements (``max.num.cluster.movements``), and a
cluster-wide cooldown was proposed for Flink's Kubernetes operator, for the same reason: jobs sharing
a cluster that all restart at once churn it (and its own autoscaler). Flink's autoscaler itself has
no cross-job limit; these are our settings, not ``job.autoscaler.*`` options.

A job's cluster is ``Job.cluster`` (:func:`cluster_key`, from what its runner reports): the master
URL, or ``local@<host>`` for local mode. A job whose runner never reported one is a cluster of its
own: only the per-job rule applies (one execution at a time, ``one_execution_in_flight_per_job``).

An execution is in flight from its start (approved → executing) until it is done, back-off
between attempts included. A rollback is never held: it restores a job a rescale left broken, and
holding it would prolong the outage (it does count as in flight for the others).

Slots go first come, first served: a proposal that has waited longer (approved earlier) goes first.
The decision and the start are one transaction that first locks the rows of the cluster's jobs
(``SELECT ... FOR UPDATE``, in primary-key order; on SQLite every transaction already takes the
write lock at ``BEGIN IMMEDIATE``), so two workers never both take the last slot. A proposal that
does not get a slot keeps its status (approved) with the reason in ``Proposal.waiting``
(:class:`ThrottleCode`); it is enqueued again when an execution on its cluster finishes
(:func:`wake_waiting`, after the cooldown), and the reconcile beat enqueues every waiting proposal
whose slot looks free (:func:`waiting_due`), so a lost message or a restarted worker only delays it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlsplit

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from webapp.jobs.models import Job
from webapp.proposals import dispatch
from webapp.proposals.codes import Actor, AuditAction, Reason, ThrottleCode
from webapp.proposals.lifecycle import ExecutionStatus, Status, audit
from webapp.proposals.models import Execution, Proposal

#: Longest cluster key stored (``Job.cluster``).
MAX_KEY = 300
_CLUSTER_SCHEMES = ("spark://", "k8s://", "mesos://", "yarn")


#: The cluster key of a local-mode runner, before its host.
LOCAL_PREFIX = "local@"


def cluster_key(master: str, ui_url: str) -> str:
    """The cluster a runner's driver runs on: its master URL (``spark://host:7077``, ``k8s://...``,
    ``yarn``), or ``local@<host of its UI>`` for local mode (``local``, ``local[N]``); ``""`` when
    the runner reported neither. Lower-cased, at most :data:`MAX_KEY` characters."""
    master = (master or "").strip().lower()
    if master.startswith(_CLUSTER_SCHEMES):
        return master.rstrip("/")[:MAX_KEY]
    host = urlsplit(ui_url.strip()).hostname if ui_url and "://" in ui_url else None
    if host:
        return f"{LOCAL_PREFIX}{host}"[:MAX_KEY]
    return ""


@dataclass(frozen=True)
class SlotDecision:
    """Whether an execution may start on a cluster now.

    Attributes:
        free: a slot is free and the cooldown has passed.
        code: why not (:class:`ThrottleCode`), None when free.
        free_at: epoch seconds the slot frees (the cooldown's end), None when free or unknown
            (a slot frees when one of the executions in flight finishes).
    """

    free: bool
    code: ThrottleCode | None = None
    free_at: float | None = None


def slot_decision(*, in_flight: int, limit: int, last_finished_at: float | None, cooldown_s: float,
                  now: float, ahead: int = 0) -> SlotDecision:
    """The throttle on one cluster: busy when ``in_flight`` executions (not counting the one asking)
    plus the ``ahead`` proposals that have waited longer reach ``limit`` (first come, first served);
    cooling down while ``now`` is less than ``cooldown_s`` seconds after the last execution on the
    cluster finished (``last_finished_at``; None: none finished). Times in epoch seconds.

    Raises:
        ValueError: ``limit`` < 1, ``cooldown_s`` < 0 or a negative count.
    """
    if limit < 1 or cooldown_s < 0 or in_flight < 0 or ahead < 0:
        raise ValueError(f"need limit >= 1, cooldown_s >= 0 and counts >= 0, got {limit}, {cooldown_s}, "
                         f"{in_flight}, {ahead}")
    if in_flight + ahead >= limit:
        return SlotDecision(False, ThrottleCode.CLUSTER_BUSY)
    if last_finished_at is not None and now < last_finished_at + cooldown_s:
        return SlotDecision(False, ThrottleCode.CLUSTER_COOLDOWN, last_finished_at + cooldown_s)
    return SlotDecision(True)


def _executions(job: Job):
    """The executions on ``job``'s cluster (its own, for a job without one)."""
    return Execution.objects.filter(proposal__job__cluster=job.cluster) if job.cluster else \
        Execution.objects.filter(proposal__job=job)


def cluster_state(job: Job, *, exclude: int | None = None) -> tuple[list[int], datetime | None]:
    """The proposals executing on ``job``'s cluster (oldest first; ``exclude``: a proposal not counted)
    and when the last execution on it finished (None: none did)."""
    executions = _executions(job)
    running = executions.filter(status=ExecutionStatus.RUNNING).exclude(proposal_id=exclude)
    in_flight = list(running.order_by("started_at").values_list("proposal_id", flat=True))
    last = executions.exclude(finished_at=None).aggregate(last=Max("finished_at"))["last"]
    return in_flight, last


def decide(job: Job, *, now: datetime, proposal: Proposal | None = None) -> tuple[SlotDecision, Reason | None]:
    """The throttle's decision for a new execution of ``job`` now (``proposal``: the one asking, not
    counted; the proposals that have waited longer go first), and the waiting reason when it must
    wait (``ThrottleCode``; data: cluster, in_flight and ahead (proposal ids), limit, cooldown_s,
    last_finished_at and free_at, ISO 8601 or None). A job without a cluster is never held."""
    if not job.cluster:
        return SlotDecision(True), None
    in_flight, last = cluster_state(job, exclude=proposal.pk if proposal else None)
    ahead = [p.pk for p in _waiting([job.cluster]) if proposal is not None and _queued(p) < _queued(proposal)]
    limit, cooldown_s = settings.SCALER_CLUSTER_MAX_IN_FLIGHT, settings.SCALER_CLUSTER_COOLDOWN_S
    decision = slot_decision(in_flight=len(in_flight), limit=limit, cooldown_s=cooldown_s, now=now.timestamp(),
                             last_finished_at=last.timestamp() if last else None, ahead=len(ahead))
    if decision.free:
        return decision, None
    free_at = datetime.fromtimestamp(decision.free_at, tz=now.tzinfo) if decision.free_at is not None else None
    return decision, Reason(decision.code, {
        "cluster": job.cluster, "in_flight": in_flight, "ahead": ahead, "limit": limit, "cooldown_s": cooldown_s,
        "last_finished_at": last.isoformat() if last else None, "free_at": free_at.isoformat() if free_at else None})


def lock_cluster(job: Job) -> None:
    """Inside a transaction: lock the rows of the jobs on ``job``'s cluster (``SELECT ... FOR UPDATE``,
    primary-key order, so two lockers never deadlock) until it commits."""
    rows = Job.objects.filter(cluster=job.cluster) if job.cluster else Job.objects.filter(pk=job.pk)
    list(rows.select_for_update().order_by("pk").values_list("pk", flat=True))


def hold(proposal: Proposal, reason: Reason) -> bool:
    """Record that the approved ``proposal`` waits for a slot (``Proposal.waiting``), with an audit
    event when it starts waiting or the reason's code changes. Returns False when the proposal is no
    longer approved (nothing recorded)."""
    stored = reason.as_json()
    before = Proposal.objects.filter(pk=proposal.pk).values_list("waiting", flat=True).first() or {}
    if not Proposal.objects.filter(pk=proposal.pk, status=Status.APPROVED).update(waiting=stored):
        return False
    proposal.waiting = stored
    if before.get("code") != stored["code"]:
        audit(job=proposal.job, proposal=proposal, actor=Actor.SYSTEM, action=AuditAction.EXECUTION_THROTTLED,
              before={"waiting": before.get("code")}, after={"waiting": stored["code"]}, reason=reason)
    return True


def _queued(proposal: Proposal) -> tuple[datetime, int]:
    """A proposal's place in its cluster's queue: its approval, then its id."""
    return proposal.decided_at or proposal.created_at, proposal.pk


def _waiting(clusters: Iterable[str] | None = None) -> list[Proposal]:
    """Approved proposals that wait for a slot, oldest approval first (``clusters``: only on those)."""
    rows = Proposal.objects.select_related("job").filter(status=Status.APPROVED, execution__isnull=True)
    if clusters is not None:
        rows = rows.filter(job__cluster__in=list(clusters))
    return sorted((p for p in rows if p.waiting), key=_queued)


def _due(waiting: list[Proposal], now: datetime) -> list[Proposal]:
    """Of ``waiting``, per cluster, the oldest ones that would get a slot now (no lock: a guess the
    execute task checks under the lock)."""
    due: list[Proposal] = []
    for cluster in dict.fromkeys(p.job.cluster for p in waiting):
        queue = [p for p in waiting if p.job.cluster == cluster]
        decision, _ = decide(queue[0].job, now=now, proposal=queue[0])
        if decision.free:
            in_flight, _ = cluster_state(queue[0].job)
            due += queue[:settings.SCALER_CLUSTER_MAX_IN_FLIGHT - len(in_flight)] if cluster else queue
    return due


def waiting_due(*, now: datetime | None = None) -> int:
    """Reconcile beat: enqueue again the waiting proposals whose slot looks free (oldest approval
    first on each cluster). Returns how many were enqueued."""
    due = _due(_waiting(), now or timezone.now())
    for proposal in due:
        dispatch.enqueue_attempt(proposal.pk, 1)
    return len(due)


def wake_waiting(job: Job) -> int:
    """An execution on ``job``'s cluster finished: enqueue the oldest proposal waiting on it, when the
    cooldown has passed (``SCALER_CLUSTER_COOLDOWN_S`` later). Returns how many were enqueued."""
    if not job.cluster:
        return 0
    waiting = _waiting([job.cluster])[:1]
    for proposal in waiting:
        dispatch.enqueue_attempt(proposal.pk, 1, countdown_s=settings.SCALER_CLUSTER_COOLDOWN_S + 0.05)
    return len(waiting)


def start_or_hold(proposal: Proposal, start) -> Reason | None:
    """In one transaction with the cluster locked: call ``start()`` (approved → executing) when the
    throttle lets ``proposal`` start, else record why it waits. A rollback always starts. Returns
    the waiting reason (None: started, or another delivery started it)."""
    now = timezone.now()
    with transaction.atomic():
        lock_cluster(proposal.job)
        if proposal.kind != Proposal.Kind.ROLLBACK:
            _, reason = decide(proposal.job, now=now, proposal=proposal)
            if reason is not None:
                # Not approved any more: another delivery started it, and its claim decides.
                return reason if hold(proposal, reason) else None
        start()
    return None


def retry_after_s(reason: Reason, now: datetime) -> float | None:
    """Seconds until a proposal held by the cooldown may start (its end, a moment after); None for
    one held by a busy cluster (a finishing execution wakes it: :func:`wake_waiting`)."""
    free_at = reason.data.get("free_at")
    if reason.code != ThrottleCode.CLUSTER_COOLDOWN or not free_at:
        return None
    return max(0.0, (datetime.fromisoformat(free_at) - now).total_seconds()) + 0.05
