"""Notices: what happened (a :class:`Notice`, derived from a proposal's move or a job found down),
who is told (:func:`targets_for`), whether it was told already (:func:`notice_claim`), and what is
sent (:func:`notice_payload`). The Celery tasks in ``webapp.inbox.tasks`` deliver; the live loop
only enqueues, after its transaction commits (:func:`notice_enqueue`).

Deduplication follows Flink's ``job.autoscaler.scaling.event.interval`` (``AutoScalerEventHandler``:
an event with the same key is not re-emitted within the interval, 30 min by default): the key is
the job, the kind and the proposal (:attr:`Notice.key`), the interval ``SCALER_NOTIFY_INTERVAL_S``.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.urls import reverse

from webapp.inbox.items import config_changes
from webapp.inbox.kinds import NoticeKind, notice_text
from webapp.inbox.models import NoticeSent, NotificationTarget, email_list
from webapp.jobs.models import Job
from webapp.outage import REDIS_ERRORS
from webapp.proposals.models import Proposal
from webapp.proposals.reason_text import reason_text

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Notice:
    """Something to tell: its ``kind``, the job, the proposal (None for a job down) and what the
    source knew (``data``: ``reason``, a stored reason, for a proposal's move; ``error`` for a job down)."""

    kind: NoticeKind
    job_id: int
    proposal_id: int | None = None
    data: dict = field(default_factory=dict)

    @property
    def key(self) -> str:
        """sha256 of the job, the kind and the proposal: what makes two notices identical."""
        raw = json.dumps([self.job_id, str(self.kind), self.proposal_id])
        return hashlib.sha256(raw.encode()).hexdigest()

    def to_json(self) -> dict:
        return {"kind": str(self.kind), "job": self.job_id, "proposal": self.proposal_id, "data": self.data}

    @classmethod
    def from_json(cls, stored: dict) -> Notice:
        """Raises ValueError for a kind this version does not know."""
        proposal = int(stored["proposal"]) if stored.get("proposal") is not None else None
        return cls(NoticeKind(stored["kind"]), int(stored["job"]), proposal, dict(stored.get("data") or {}))


@dataclass(frozen=True)
class Destinations:
    """Where one notice goes: webhook URLs and e-mail addresses (deduplicated, in order)."""

    webhooks: tuple[str, ...] = ()
    emails: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.webhooks or self.emails)


def _settings_defaults() -> tuple[str, list[str]]:
    return settings.SCALER_NOTIFY_WEBHOOK_URL, list(settings.SCALER_NOTIFY_EMAILS)


def targets_configured(job_id: int | None) -> bool:
    """Whether a notice of the job (None: of any job) could go anywhere (one EXISTS query; none with
    the settings' defaults)."""
    webhook, emails = _settings_defaults()
    if webhook or emails:
        return True
    targets = NotificationTarget.objects.filter(enabled=True)
    return (targets if job_id is None else targets.filter(Q(job_id=job_id) | Q(job__isnull=True))).exists()


def targets_for(job_id: int, kind: str) -> Destinations:
    """The webhooks and addresses of the targets of the job and the deployment-wide ones that want
    ``kind``, and the settings' defaults (``SCALER_NOTIFY_WEBHOOK_URL``, ``SCALER_NOTIFY_EMAILS``)."""
    webhook, emails = _settings_defaults()
    hooks, addresses = [webhook] if webhook else [], list(emails)
    for target in NotificationTarget.objects.filter(Q(job_id=job_id) | Q(job__isnull=True), enabled=True):
        if target.wants(kind):
            hooks += [target.webhook_url] if target.webhook_url else []
            addresses += email_list(target.emails)
    return Destinations(tuple(dict.fromkeys(hooks)), tuple(dict.fromkeys(addresses)))


def notice_claim(notice: Notice, now: datetime) -> bool:
    """Claim the right to send ``notice``: True when no identical one was sent within
    ``SCALER_NOTIFY_INTERVAL_S`` seconds (the row's ``last_sent_at`` moves to ``now``), False otherwise.
    A conditional UPDATE (or the unique key on insert) decides, so concurrent workers claim once."""
    row, created = NoticeSent.objects.get_or_create(
        key=notice.key, defaults={"job_id": notice.job_id, "kind": notice.kind, "last_sent_at": now})
    if created:
        return True
    due = now - timedelta(seconds=settings.SCALER_NOTIFY_INTERVAL_S)
    return bool(NoticeSent.objects.filter(pk=row.pk, last_sent_at__lte=due).update(last_sent_at=now,
                                                                                    count=F("count") + 1))


def notice_data(notice: Notice, job: Job, proposal: Proposal | None) -> dict:
    """The data the text is rendered from (``webapp.inbox.kinds.NoticeKind``)."""
    data: dict = {}
    if proposal is not None:
        data = {"proposal": proposal.pk, "changes": config_changes(proposal.current_config, proposal.proposed_config)}
        if notice.kind == NoticeKind.PROPOSAL_PENDING:
            data["hold"] = reason_text(proposal.hold_reason)
    if notice.data.get("reason"):
        data["reason"] = reason_text(notice.data["reason"])
    if notice.kind == NoticeKind.JOB_DOWN:
        data["error"] = str(notice.data.get("error") or job.last_error)
        if job.health_reason:  # the coded reason too (a crashed runner's exception, exit code, log)
            data["down"] = job.health_reason
    return data


def notice_payload(notice: Notice, job: Job, proposal: Proposal | None, now: datetime) -> dict:
    """The JSON body of a webhook (Slack's incoming-webhook ``text``, plus structured fields):
    ``{"text", "kind", "job": {"id", "name"}, "proposal", "url", "at", "data"}``. ``url`` is the page
    to act on, absolute when ``SCALER_NOTIFY_BASE_URL`` is set (and then also at the end of ``text``)."""
    path = (reverse("dashboard:proposal", args=[proposal.pk]) if proposal is not None
            else reverse("dashboard:job", args=[job.pk]))
    base = settings.SCALER_NOTIFY_BASE_URL.rstrip("/")
    data = notice_data(notice, job, proposal)
    text = notice_text(notice.kind, job.name, data)
    return {"text": f"{text} {base}{path}" if base else text, "kind": str(notice.kind),
            "job": {"id": job.pk, "name": job.name}, "proposal": proposal.pk if proposal is not None else None,
            "url": f"{base}{path}", "at": now.isoformat(), "data": data}


def notice_enqueue(notice: Notice, publish: Callable[[dict], object]) -> None:
    """Call ``publish(notice.to_json())`` (it enqueues the delivery task) once the current transaction
    commits; a broker that does not answer is logged, never raised into the caller (the live loop)."""

    def send() -> None:
        try:
            publish(notice.to_json())
        except REDIS_ERRORS as exc:
            logger.warning("notice %s of job %s not enqueued: %s", notice.kind, notice.job_id, exc)

    transaction.on_commit(send)
