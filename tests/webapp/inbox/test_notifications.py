"""Notifications (``webapp.inbox``): a pending proposal produces one webhook
call to a loopback endpoint and no duplicate within the interval; a failing endpoint is retried and
never delays the loop (the loop only enqueues, after commit; nothing it runs calls HTTP)."""

from __future__ import annotations

import ipaddress
import os
import subprocess
import sys
from datetime import timedelta

import httpx
import pytest
import redis
from django.core import mail
from django.core.exceptions import ValidationError
from django.utils import timezone

from tests.repo import ROOT
from tests.webapp.factories import make_job, make_pending, make_user, reason_json
from tests.webapp.inbox.factories import Endpoint, make_pending_proposal
from webapp.celery import app
from webapp.inbox import receivers
from webapp.inbox.kinds import NoticeKind, notice_text
from webapp.inbox.models import NoticeSent, NotificationTarget
from webapp.inbox.notify import Notice
from webapp.inbox.tasks import NoticeOutcome, jobs_down_notify, notice_send, webhook_deliver
from webapp.jobs import connect
from webapp.jobs.models import Job
from webapp.proposals.codes import Actor, AuditAction, AuditReason, Reason
from webapp.proposals.lifecycle import Status, audit, transition
from webapp.proposals.models import AuditEvent, Proposal
from webapp.proposals.reason_text import reason_text

pytestmark = pytest.mark.django_db


@pytest.fixture
def endpoint():
    server = Endpoint()
    yield server
    server.close()


@pytest.fixture
def eager():
    """Celery runs every task in the caller (retries too, without their countdown)."""
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = False


@pytest.fixture
def published(monkeypatch):
    """The notices the receivers enqueue, recorded instead of published."""
    sent: list[dict] = []
    monkeypatch.setattr(receivers, "notice_publish", sent.append)
    return sent


def test_a_pending_proposal_makes_one_webhook_call_and_no_duplicate_within_the_interval(
        endpoint, eager, settings, django_capture_on_commit_callbacks):
    settings.SCALER_NOTIFY_BASE_URL = "https://scaler.example.com/"
    NotificationTarget.objects.create(name="team", webhook_url=endpoint.url)
    with django_capture_on_commit_callbacks(execute=True):
        proposal = make_pending()
    assert len(endpoint.bodies) == 1
    body = endpoint.bodies[0]
    assert (body["kind"], body["proposal"], body["job"]["name"]) == ("proposal_pending", proposal.pk, "demo")
    assert body["url"] == f"https://scaler.example.com/proposals/{proposal.pk}/"
    assert body["text"].startswith(f"[sparkscaler] job demo: proposal #{proposal.pk} waits for a decision: cores 1 → ")
    # The same event again within the interval (auto mode holding it, here written twice): nothing sent.
    for _ in range(2):
        with django_capture_on_commit_callbacks(execute=True):
            audit(job=proposal.job, proposal=proposal, actor="policy:ds2", action=AuditAction.AUTO_APPROVE_HELD)
    assert len(endpoint.bodies) == 1
    assert notice_send.apply(args=[Notice(NoticeKind.PROPOSAL_PENDING, proposal.job_id, proposal.pk).to_json()]
                             ).get() == NoticeOutcome.DUPLICATE
    # Past the interval, the same notice goes out again.
    NoticeSent.objects.update(last_sent_at=timezone.now() - timedelta(seconds=settings.SCALER_NOTIFY_INTERVAL_S + 1))
    assert notice_send.apply(args=[Notice(NoticeKind.PROPOSAL_PENDING, proposal.job_id, proposal.pk).to_json()]
                             ).get() == NoticeOutcome.SENT
    assert len(endpoint.bodies) == 2 and NoticeSent.objects.get().count == 2


def test_two_proposals_of_one_job_are_two_notices_and_each_is_suppressed_alone(endpoint, eager):
    """The deduplication key is the job, the kind and the proposal: a second pending proposal of the same
    job within the interval is told, a repeat of either is not, and the same proposal in another kind is."""
    NotificationTarget.objects.create(name="team", webhook_url=endpoint.url)
    job = make_job()
    first, second = (make_pending_proposal(job) for _ in range(2))

    def send(kind: NoticeKind, proposal: Proposal) -> NoticeOutcome:
        return notice_send.apply(args=[Notice(kind, job.pk, proposal.pk).to_json()]).get()

    assert [send(NoticeKind.PROPOSAL_PENDING, p) for p in (first, second, first, second)] == [
        NoticeOutcome.SENT, NoticeOutcome.SENT, NoticeOutcome.DUPLICATE, NoticeOutcome.DUPLICATE]
    assert send(NoticeKind.RESCALE_SUCCEEDED, first) == NoticeOutcome.SENT
    assert [(b["kind"], b["proposal"]) for b in endpoint.bodies] == [
        ("proposal_pending", first.pk), ("proposal_pending", second.pk), ("rescale_succeeded", first.pk)]
    assert NoticeSent.objects.count() == 3


def test_a_failing_endpoint_is_retried(endpoint, eager):
    endpoint.status = 500
    result = webhook_deliver.apply(args=[endpoint.url, {"text": "x"}])
    assert len(endpoint.bodies) == webhook_deliver.max_retries + 1 == 6
    assert result.failed() and isinstance(result.result, httpx.HTTPError)
    endpoint.bodies.clear()
    endpoint.status = 404  # refused for good: not retried
    assert webhook_deliver.apply(args=[endpoint.url, {"text": "x"}]).get() == 404
    assert len(endpoint.bodies) == 1


def test_a_blocked_endpoint_never_delays_the_loop(endpoint, monkeypatch, settings,
                                                  django_capture_on_commit_callbacks):
    NotificationTarget.objects.create(name="team", webhook_url=endpoint.url)
    endpoint.gate.clear()  # the endpoint answers nothing until released
    published = []
    delay = notice_send.delay
    # Published to the tests' in-memory broker, as a worker would receive it; recorded here.
    monkeypatch.setattr(notice_send, "delay", lambda stored: (published.append(stored), delay(stored))[1])

    http_calls = []

    def no_http(*args, **kwargs):
        http_calls.append(args)
        raise AssertionError("the live loop called HTTP")

    monkeypatch.setattr(httpx, "post", no_http)
    monkeypatch.setattr(httpx.Client, "send", no_http)
    with django_capture_on_commit_callbacks(execute=True):
        proposal = make_pending()
    assert proposal.status == Proposal.Status.PENDING
    assert [Notice.from_json(n).kind for n in published] == [NoticeKind.PROPOSAL_PENDING]
    assert endpoint.bodies == [] and http_calls == []
    monkeypatch.undo()
    settings.SCALER_NOTIFY_TIMEOUT_S = 0.2
    with pytest.raises(httpx.TimeoutException):  # the worker's delivery times out (and is retried)
        webhook_deliver.run(endpoint.url, {"text": "x"})
    endpoint.gate.set()


def test_a_broker_outage_when_enqueueing_is_logged_not_raised(monkeypatch, django_capture_on_commit_callbacks):
    NotificationTarget.objects.create(name="team", webhook_url="http://127.0.0.1:9/hook")

    def down(stored):
        raise redis.exceptions.ConnectionError("no broker")

    monkeypatch.setattr(receivers, "notice_publish", down)
    with django_capture_on_commit_callbacks(execute=True):
        proposal = make_pending()
    assert proposal.status == Proposal.Status.PENDING


def test_nothing_is_enqueued_without_a_target(published, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        make_pending()
    assert published == []


def test_a_failed_move_is_told_after_commit_with_its_reason_and_an_audit_row_alone_is_not(
        published, django_capture_on_commit_callbacks):
    NotificationTarget.objects.create(name="team", webhook_url="http://127.0.0.1:9/hook")
    job = make_job()
    proposal = Proposal.objects.create(job=job, status=Status.EXECUTING)
    with django_capture_on_commit_callbacks(execute=True):  # an imported row, say: not a move
        AuditEvent.objects.create(job=job, proposal=proposal, actor_name=Actor.SYSTEM, action=AuditAction.FAILED)
    assert published == []
    reason = Reason(AuditReason.EXECUTION_FAILED, {"attempts": 3, "error": "the runner refused it"})
    with django_capture_on_commit_callbacks(execute=True):
        transition(proposal=proposal, target=Status.FAILED, actor=Actor.SYSTEM, reason=reason)
        assert published == []  # not before the move commits
    assert published == [Notice(NoticeKind.RESCALE_FAILED, job.pk, proposal.pk, {"reason": reason.as_json()}).to_json()]


def test_a_proposal_approved_in_the_same_transaction_is_not_told_as_pending(endpoint, eager,
                                                                            django_capture_on_commit_callbacks):
    """Auto mode proposes and approves in one transaction: by the time the notice runs, nothing waits."""
    NotificationTarget.objects.create(name="team", webhook_url=endpoint.url, kinds=[NoticeKind.PROPOSAL_PENDING])
    job = make_job()
    with django_capture_on_commit_callbacks(execute=True):
        proposal = Proposal.objects.create(job=job)
        audit(job=job, proposal=proposal, actor="policy:ds2", action=AuditAction.PROPOSED)
        Proposal.objects.filter(pk=proposal.pk).update(status=Proposal.Status.APPROVED)
    assert endpoint.bodies == []
    assert notice_send.apply(args=[Notice(NoticeKind.PROPOSAL_PENDING, job.pk, proposal.pk).to_json()]
                             ).get() == NoticeOutcome.OUTDATED


def test_targets_per_job_kinds_and_email(endpoint, eager, settings, django_capture_on_commit_callbacks):
    job, other = make_job("orders"), make_job("clicks")
    NotificationTarget.objects.create(name="orders team", job=job, webhook_url=endpoint.url,
                                      emails="a@example.com, b@example.com", kinds=[NoticeKind.RESCALE_FAILED])
    settings.SCALER_NOTIFY_EMAILS = ["ops@example.com"]
    for target in (job, other):
        proposal = Proposal.objects.create(job=target, status=Proposal.Status.FAILED)
        with django_capture_on_commit_callbacks(execute=True):
            audit(job=target, proposal=proposal, actor=Actor.SYSTEM, action=AuditAction.SUCCEEDED)
            audit(job=target, proposal=proposal, actor=Actor.SYSTEM, action=AuditAction.FAILED)
    assert [(b["kind"], b["job"]["name"]) for b in endpoint.bodies] == [("rescale_failed", "orders")]
    # The settings' address hears every kind of every job; the orders team only its job's failures.
    recipients = sorted(tuple(m.to) for m in mail.outbox)
    assert recipients == sorted([("ops@example.com",)] * 3 + [("ops@example.com", "a@example.com", "b@example.com")])


def test_a_job_down_is_told_once_per_interval(endpoint, eager):
    job, other = make_job("orders"), make_job("clicks")
    NotificationTarget.objects.create(name="orders team", job=job, webhook_url=endpoint.url)
    Job.objects.filter(pk__in=[job.pk, other.pk]).update(health=Job.Health.DOWN,
                                                         last_error="Spark REST API: connection refused")
    assert jobs_down_notify() == 1  # only the job with a target
    assert jobs_down_notify() == 0  # told within the interval
    assert notice_send.apply(args=[Notice(NoticeKind.JOB_DOWN, job.pk).to_json()]).get() == NoticeOutcome.DUPLICATE
    assert [b["text"] for b in endpoint.bodies] == [
        "[sparkscaler] job orders: the job is down: Spark REST API: connection refused"]
    NotificationTarget.objects.create(name="everyone", webhook_url=endpoint.url)
    assert jobs_down_notify() == 1  # now the other one too
    assert [b["job"]["name"] for b in endpoint.bodies] == ["orders", "clicks"]


@pytest.mark.parametrize("url", ["ftp://example.com/hook", "javascript:alert(1)", "file:///etc/passwd"])
def test_a_webhook_url_must_be_http_or_https(url):
    with pytest.raises(ValidationError) as exc:
        NotificationTarget(name="bad", webhook_url=url).full_clean()
    assert "webhook_url" in exc.value.message_dict
    assert webhook_deliver.run(url, {"text": "x"}) is None


def test_a_webhook_whose_name_resolves_to_a_denied_address_is_not_posted(endpoint, monkeypatch):
    answers = {"hooks.example.test": [ipaddress.ip_address("100.100.100.200")]}
    monkeypatch.setattr(connect, "system_resolve", lambda name, _port: answers[name])
    url = endpoint.url.replace("127.0.0.1", "hooks.example.test")
    NotificationTarget(name="team", webhook_url=url).full_clean()  # a name: checked when posting
    assert webhook_deliver.run(url, {"text": "x"}) is None
    assert endpoint.bodies == []
    # Control: resolving to the endpoint's address, it is posted there.
    answers["hooks.example.test"] = [ipaddress.ip_address("127.0.0.1")]
    assert webhook_deliver.run(url, {"text": "x"}) == 200 and endpoint.bodies == [{"text": "x"}]


@pytest.mark.parametrize(("url", "refused"), [("http://0xa9fea9fe/hook", "link-local"),
                                             ("http://[::ffff:127.0.0.1]/hook", "written as IPv6"),
                                             ("https://hooks.example.com/T0", "")])
def test_the_deployment_wide_webhook_is_checked_at_start_up(url, refused):
    env = {k: os.environ[k] for k in ("PATH", "HOME", "PYTHONPATH", "SPARKSCALER_VAR_DIR") if k in os.environ}
    done = subprocess.run([sys.executable, "-c", "import webapp.settings"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={**env, "DEBUG": "true", "SCALER_NOTIFY_WEBHOOK_URL": url})
    assert (done.returncode != 0) == bool(refused), done.stderr
    if refused:
        assert "ImproperlyConfigured: SCALER_NOTIFY_WEBHOOK_URL: " in done.stderr and refused in done.stderr


def test_a_target_needs_a_destination_and_valid_addresses_and_kinds():
    with pytest.raises(ValidationError) as exc:
        NotificationTarget(name="t", emails="not-an-address", kinds=["nope"]).full_clean()
    assert set(exc.value.message_dict) == {"emails", "kinds"}
    with pytest.raises(ValidationError) as exc:
        NotificationTarget(name="t").full_clean()
    assert set(exc.value.message_dict) == {"webhook_url"}


def test_the_admin_edits_a_target_with_its_kinds(client):
    client.force_login(make_user("root", role="admin", is_superuser=True, is_staff=True))
    assert client.get("/admin/inbox/notificationtarget/add/").status_code == 200
    job = make_job("orders")
    response = client.post("/admin/inbox/notificationtarget/add/", {
        "name": "orders team", "job": job.pk, "webhook_url": "https://hooks.example.com/T0/B0",
        "emails": "a@example.com", "kinds": [NoticeKind.PROPOSAL_PENDING, NoticeKind.JOB_DOWN], "enabled": "on"})
    assert response.status_code == 302, response.content.decode()[:2000]
    target = NotificationTarget.objects.get()
    assert (target.job, target.kinds) == (job, ["proposal_pending", "job_down"])
    refused = client.post("/admin/inbox/notificationtarget/add/", {"name": "bad", "webhook_url": "ftp://x.example.com/",
                                                                   "enabled": "on"})
    assert refused.status_code == 200 and NotificationTarget.objects.count() == 1
    assert client.get("/admin/inbox/noticesent/").status_code == 200


@pytest.mark.parametrize(("kind", "data", "text"), [
    (NoticeKind.PROPOSAL_PENDING, {"proposal": 7, "changes": {"cores": [1, 2]}, "hold": ""},
     "proposal #7 waits for a decision: cores 1 → 2"),
    (NoticeKind.RESCALE_SUCCEEDED, {"proposal": 7, "changes": {"cores": [1, 2]}},
     "proposal #7 was executed: cores 1 → 2"),
    (NoticeKind.RESCALE_FAILED, {"proposal": 7, "changes": {"cores": [1, 2]}, "reason": "the runner refused it"},
     "proposal #7 failed (cores 1 → 2): the runner refused it"),
    (NoticeKind.ROLLED_BACK, {"proposal": 7, "changes": {"cores": [1, 2]}},
     "proposal #7 was rolled back (it changed cores 1 → 2)"),
    (NoticeKind.VERIFICATION_INCONCLUSIVE, {"proposal": 7, "reason": "no micro-batch completed since the change"},
     "the verification of proposal #7 was inconclusive: no micro-batch completed since the change"),
    (NoticeKind.JOB_DOWN, {"error": ""}, "the job is down"),
])
def test_every_notice_kind_has_its_words(kind, data, text):
    assert notice_text(kind, "orders", data) == f"[sparkscaler] job orders: {text}"


def test_a_crash_looping_job_is_told_with_its_exception_and_the_coded_reason(endpoint, eager):
    job = make_job("orders")
    NotificationTarget.objects.create(name="orders team", job=job, webhook_url=endpoint.url)
    reason = reason_json("runner_crash_looping", exit_code=1, exception="ValueError", message="boom", crashes=3,
                         window_s=300.0, log_path="var/jobs/orders/driver.log")
    Job.objects.filter(pk=job.pk).update(health=Job.Health.DOWN, last_error=reason_text(reason), health_reason=reason)
    assert jobs_down_notify() == 1
    [body] = endpoint.bodies
    assert body["data"]["down"] == reason
    assert "crash looping: 3 driver crashes within 5 min, the last ValueError: boom (exit code 1)" in body["text"]
