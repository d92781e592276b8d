"""Celery tasks of the notifications: thin, take JSON.

- ``notice_send``: one notice (``webapp.inbox.notify``): skipped when it no longer holds (a proposal
  no longer pending), when nobody wants it, or when an identical one was sent within the interval;
  else one delivery task per webhook and one for the e-mail.
- ``webhook_deliver`` and ``email_deliver``: one delivery, retried with an exponential back-off
  (``retry_backoff``) up to ``SCALER_NOTIFY_MAX_RETRIES`` times when the endpoint fails (an HTTP
  error, a 5xx or 429 answer, a timeout of ``SCALER_NOTIFY_TIMEOUT_S``; an SMTP error).
- The beat ``jobs_down_notify``: a notice for every job that is down (the collector records it on
  the job, not in the audit trail); the deduplication makes it one per interval while it stays down.
"""

from __future__ import annotations

import logging
import smtplib
from datetime import timedelta
from enum import StrEnum

import httpx
from celery import shared_task
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.utils import timezone

from webapp.inbox.kinds import NoticeKind
from webapp.inbox.models import NoticeSent, NotificationTarget, webhook_url_validator
from webapp.inbox.notify import Notice, notice_claim, notice_payload, targets_configured, targets_for
from webapp.jobs.connect import AddressRefused, GuardedTransport
from webapp.jobs.models import Job
from webapp.proposals.models import Proposal

logger = logging.getLogger(__name__)


class NoticeOutcome(StrEnum):
    """What ``notice_send`` did."""

    SENT = "sent"
    DUPLICATE = "duplicate"  # an identical notice was sent within SCALER_NOTIFY_INTERVAL_S
    NO_TARGET = "no_target"  # no target wants this kind
    OUTDATED = "outdated"  # the proposal is no longer pending (auto mode approved it in the same transaction)
    GONE = "gone"  # the job or the proposal was deleted


@shared_task(acks_late=True)
def notice_send(stored: dict) -> str:
    """Send one notice (``Notice.to_json``) to its targets; returns a :class:`NoticeOutcome`."""
    notice = Notice.from_json(stored)
    job = Job.objects.filter(pk=notice.job_id).first()
    proposal = Proposal.objects.filter(pk=notice.proposal_id).first() if notice.proposal_id else None
    if job is None or (notice.proposal_id and proposal is None):
        return NoticeOutcome.GONE
    if notice.kind == NoticeKind.PROPOSAL_PENDING and proposal.status != Proposal.Status.PENDING:
        return NoticeOutcome.OUTDATED
    destinations = targets_for(job.pk, notice.kind)
    if not destinations:
        return NoticeOutcome.NO_TARGET
    now = timezone.now()
    if not notice_claim(notice, now):
        return NoticeOutcome.DUPLICATE
    payload = notice_payload(notice, job, proposal, now)
    for url in destinations.webhooks:
        webhook_deliver.delay(url, payload)
    if destinations.emails:
        email_deliver.delay(payload["text"], f"{payload['text']}\n\n{payload['url']}", list(destinations.emails))
    return NoticeOutcome.SENT


class RetryableStatus(httpx.HTTPStatusError):
    """The endpoint answered 5xx or 429: try again later."""


@shared_task(acks_late=True, autoretry_for=(httpx.HTTPError,), retry_backoff=True, retry_backoff_max=600,
             max_retries=settings.SCALER_NOTIFY_MAX_RETRIES)
def webhook_deliver(url: str, payload: dict) -> int | None:
    """POST ``payload`` as JSON to ``url`` (http or https to an allowed host, checked again at
    connection time by ``webapp.jobs.connect.GuardedTransport``, else not sent: None); returns the answer's
    status. A transport error, a timeout or a 5xx/429 answer raises ``httpx.HTTPError`` and is retried;
    another 4xx is logged and not retried (the body would be refused again)."""
    try:
        webhook_url_validator(url)
    except ValidationError as exc:
        logger.warning("notification webhook %r is refused (%s): not sent", url, "; ".join(exc.messages))
        return None
    try:
        with httpx.Client(transport=GuardedTransport(), timeout=settings.SCALER_NOTIFY_TIMEOUT_S) as client:
            response = client.post(url, json=payload, follow_redirects=False)
    except AddressRefused as exc:
        logger.warning("notification webhook %r is refused: %s", url, exc)
        return None
    if response.status_code >= 500 or response.status_code == 429:
        raise RetryableStatus(f"{response.status_code} from the webhook", request=response.request, response=response)
    if response.status_code >= 400:
        logger.warning("notification webhook answered %s: not retried", response.status_code)
    return response.status_code


@shared_task(acks_late=True, autoretry_for=(OSError, smtplib.SMTPException), retry_backoff=True,
             retry_backoff_max=600, max_retries=settings.SCALER_NOTIFY_MAX_RETRIES)
def email_deliver(subject: str, body: str, recipients: list[str]) -> int:
    """One e-mail to ``recipients`` through Django's e-mail backend; returns how many were sent."""
    return send_mail(subject[:200], body, None, recipients)


@shared_task(acks_late=True)
def jobs_down_notify() -> int:
    """Beat: enqueue a notice for each job that is down and was not told so within the interval;
    returns how many (at most four queries, whatever the number of jobs)."""
    if not targets_configured(None):
        return 0
    told = NoticeSent.objects.filter(kind=NoticeKind.JOB_DOWN, last_sent_at__gt=timezone.now() - timedelta(
        seconds=settings.SCALER_NOTIFY_INTERVAL_S)).values("job_id")
    down = Job.objects.filter(health=Job.Health.DOWN).exclude(pk__in=told)
    if not (settings.SCALER_NOTIFY_WEBHOOK_URL or settings.SCALER_NOTIFY_EMAILS or NotificationTarget.objects.filter(
            enabled=True, job__isnull=True).exists()):
        down = down.filter(notification_targets__enabled=True).distinct()  # only jobs with a target of their own
    down = down.values_list("pk", "last_error")
    enqueued = 0
    for job_id, error in down:
        notice_send.delay(Notice(NoticeKind.JOB_DOWN, job_id, None, {"error": error}).to_json())
        enqueued += 1
    return enqueued


def notice_publish(stored: dict) -> None:
    """Enqueue ``notice_send`` (what the receivers pass to ``notify.notice_enqueue``)."""
    notice_send.delay(stored)

