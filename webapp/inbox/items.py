"""The inbox: everything that waits for a person, across jobs (the page ``/inbox/``, the API
``/api/inbox/`` and the count in the navigation bar all read it here).

- a **pending proposal** (how long it has waited, what auto mode held it for);
- an **inconclusive verification** nobody has looked at: the job's newest proposal, verified
  inconclusive, with no person's audit event on the job since the verdict (an approval, a rejection,
  a rollback, a cleared block or a comment means someone looked);
- **suspended auto-approval** (``JobPolicy.auto_approve_suspended``, a rollback suspends it);
- **blocked scale-ups** (``Job.scale_up_block``, FLIP-271's ineffective-scale-up detection);
- a **job down** (``Job.health``: the collector could not read the runner or Spark), since its
  newest metric snapshot, or since it was registered when it never sent one.

Bounded queries: :func:`inbox_items` runs three, :func:`inbox_count` two, whatever the number of jobs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import Count, Exists, JSONField, OuterRef, Q, Subquery
from django.urls import reverse
from django.utils import timezone

from webapp.inbox.kinds import ITEM_COLOURS, ItemKind, item_text
from webapp.jobs.models import Job, MetricSnapshot
from webapp.proposals.codes import AuditAction
from webapp.proposals.models import AuditEvent, Proposal
from webapp.proposals.reason_text import reason_text


@dataclass(frozen=True)
class InboxItem:
    """One thing that waits for a person: its ``kind``, the job, since when (None: unknown), the
    kind's ``data`` (``webapp.inbox.kinds.ItemKind``) and the ``path`` of the page to act on it."""

    kind: ItemKind
    job_id: int
    job_name: str
    since: datetime | None
    path: str
    data: dict = field(default_factory=dict)

    @property
    def text(self) -> str:
        return item_text(self.kind, self.data)

    @property
    def label(self) -> str:
        return ItemKind(self.kind).label

    @property
    def colour(self) -> str:
        return ITEM_COLOURS.get(self.kind, "#6b7280")


def config_changes(current: dict, proposed: dict) -> dict[str, list]:
    """``{knob: [old, new]}`` for every knob whose value differs, in the proposed configuration's order."""
    return {knob: [current.get(knob), new] for knob, new in proposed.items() if current.get(knob) != new}


def _unlooked_inconclusive() -> Q:
    """Proposals verified inconclusive that are their job's newest and that no person acted on since."""
    newer = Proposal.objects.filter(job_id=OuterRef("job_id"), created_at__gt=OuterRef("created_at"))
    looked = AuditEvent.objects.filter(job_id=OuterRef("job_id"), actor_user__isnull=False,
                                       at__gte=OuterRef("verified_at"))
    return Q(verification=Proposal.Verification.INCONCLUSIVE) & ~Q(Exists(newer)) & ~Q(Exists(looked))


_WAITING_JOBS = Q(health=Job.Health.DOWN) | ~Q(scale_up_block={}) | Q(policy__auto_approve_suspended=True)


def _proposal_items(now: datetime) -> list[InboxItem]:
    items = []
    for p in Proposal.objects.filter(status=Proposal.Status.PENDING).select_related("job").order_by("created_at"):
        items.append(InboxItem(
            ItemKind.PENDING_PROPOSAL, p.job_id, p.job.name, p.created_at, reverse("dashboard:proposal", args=[p.pk]),
            {"proposal": p.pk, "revision": p.revision, "waited_s": round((now - p.created_at).total_seconds()),
             "changes": config_changes(p.current_config, p.proposed_config), "hold": reason_text(p.hold_reason)}))
    verdict = (AuditEvent.objects.filter(proposal_id=OuterRef("pk"), action=AuditAction.VERIFICATION_INCONCLUSIVE)
               .order_by("-at").values("reason")[:1])
    for p in (Proposal.objects.filter(_unlooked_inconclusive()).select_related("job")
              .annotate(verdict=Subquery(verdict, output_field=JSONField())).order_by("verified_at")):
        items.append(InboxItem(
            ItemKind.INCONCLUSIVE_VERIFICATION, p.job_id, p.job.name, p.verified_at,
            reverse("dashboard:proposal", args=[p.pk]), {"proposal": p.pk, "reason": reason_text(p.verdict)}))
    return items


def _job_items() -> list[InboxItem]:
    items = []
    last_seen = MetricSnapshot.objects.filter(job_id=OuterRef("pk")).order_by("-collected_at").values("collected_at")
    for job in (Job.objects.filter(_WAITING_JOBS).select_related("policy")
                .annotate(last_seen=Subquery(last_seen[:1])).order_by("name")):
        path = reverse("dashboard:job", args=[job.pk])
        if job.health == Job.Health.DOWN:  # down since its last metrics; never seen: since it was registered
            items.append(InboxItem(ItemKind.JOB_DOWN, job.pk, job.name, job.last_seen or job.created_at, path,
                                   {"error": job.last_error}))
        if job.scale_up_block:
            block = job.scale_up_block
            items.append(InboxItem(ItemKind.SCALE_UP_BLOCKED, job.pk, job.name, _parse(block.get("since")), path,
                                   {"knobs": list(block.get("knobs") or ()), "proposal": block.get("proposal")}))
        if job.policy.auto_approve_suspended:
            items.append(InboxItem(ItemKind.AUTO_APPROVAL_SUSPENDED, job.pk, job.name,
                                   job.policy.auto_approve_suspended_at, path,
                                   {"reason": job.policy.auto_approve_suspended_reason}))
    return items


def _parse(value: object) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value)) if value else None
    except ValueError:
        return None


def inbox_items(now: datetime | None = None) -> list[InboxItem]:
    """Everything that waits for a person, jobs down first, then the oldest first."""
    now = now or timezone.now()
    items = _job_items() + _proposal_items(now)
    rank = {ItemKind.JOB_DOWN: 0}
    return sorted(items, key=lambda i: (rank.get(i.kind, 1), i.since is None, i.since or now, i.job_name))


def inbox_count() -> int:
    """How many items :func:`inbox_items` lists, in two aggregate queries (the navigation bar's badge)."""
    proposals = Proposal.objects.aggregate(
        pending=Count("pk", filter=Q(status=Proposal.Status.PENDING)),
        inconclusive=Count("pk", filter=_unlooked_inconclusive()))
    jobs = Job.objects.filter(_WAITING_JOBS).aggregate(
        down=Count("pk", filter=Q(health=Job.Health.DOWN)), blocked=Count("pk", filter=~Q(scale_up_block={})),
        suspended=Count("pk", filter=Q(policy__auto_approve_suspended=True)))
    return sum(proposals.values()) + sum(jobs.values())
