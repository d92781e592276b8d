"""One waiting item of each inbox kind (``webapp.inbox.kinds.ItemKind``), for the inbox's unit and browser tests."""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from django.utils import timezone

from scaling.forecast.prediction import VerdictReason
from tests.webapp.dashboard_factories import make_succeeded
from tests.webapp.factories import CONFIG, make_job
from webapp.celery import app
from webapp.inbox.kinds import ItemKind
from webapp.inbox.tasks import jobs_down_notify
from webapp.jobs.models import Job, JobPolicy
from webapp.proposals.codes import Actor, AuditAction, Reason
from webapp.proposals.models import AuditEvent, Proposal


def make_pending_proposal(job: Job, *, waited_s: float = 600.0) -> Proposal:
    proposal = Proposal.objects.create(job=job, current_config=dict(CONFIG), proposed_config=dict(CONFIG, cores=3))
    Proposal.objects.filter(pk=proposal.pk).update(created_at=timezone.now() - timedelta(seconds=waited_s))
    return proposal


def make_inconclusive(job: Job) -> Proposal:
    """A succeeded proposal verified inconclusive 5 minutes ago (no micro-batch since the change)."""
    proposal = make_succeeded(job)
    verified_at = timezone.now() - timedelta(minutes=5)
    Proposal.objects.filter(pk=proposal.pk).update(verification=Proposal.Verification.INCONCLUSIVE,
                                                   verification_detail={"batches": 0}, verified_at=verified_at)
    AuditEvent.objects.create(job=job, proposal=proposal, actor_name=Actor.VERIFICATION,
                              action=AuditAction.VERIFICATION_INCONCLUSIVE,
                              reason=Reason(VerdictReason.NO_BATCHES).as_json())
    proposal.refresh_from_db()
    return proposal


def make_every_kind() -> dict[ItemKind, tuple[Job, str]]:
    """One job per item kind, each waiting for a person; ``{kind: (job, path of the page to act on it)}``."""
    now = timezone.now()
    pending_job = make_job("pending-job")
    pending = make_pending_proposal(pending_job)
    inconclusive_job = make_job("inconclusive-job")
    inconclusive = make_inconclusive(inconclusive_job)
    suspended_job = make_job("suspended-job", mode="auto")
    JobPolicy.objects.filter(job=suspended_job).update(
        auto_approve_suspended=True, auto_approve_suspended_reason="rolled back after a failed verification",
        auto_approve_suspended_at=now - timedelta(hours=3))
    blocked_job = make_job("blocked-job")
    Job.objects.filter(pk=blocked_job.pk).update(scale_up_block={
        "proposal": inconclusive.pk, "knobs": ["cores"], "since": (now - timedelta(hours=1)).isoformat(), "reason": {}})
    down_job = make_job("down-job")
    Job.objects.filter(pk=down_job.pk).update(health=Job.Health.DOWN, last_error="no runner has reported for this job")
    return {ItemKind.PENDING_PROPOSAL: (pending_job, f"/proposals/{pending.pk}/"),
            ItemKind.INCONCLUSIVE_VERIFICATION: (inconclusive_job, f"/proposals/{inconclusive.pk}/"),
            ItemKind.AUTO_APPROVAL_SUSPENDED: (suspended_job, f"/jobs/{suspended_job.pk}/"),
            ItemKind.SCALE_UP_BLOCKED: (blocked_job, f"/jobs/{blocked_job.pk}/"),
            ItemKind.JOB_DOWN: (down_job, f"/jobs/{down_job.pk}/")}


class Endpoint:
    """A loopback HTTP server that records each POST's JSON body, answers ``status``, and holds every
    answer while ``gate`` is clear."""

    def __init__(self) -> None:
        self.bodies: list[dict] = []
        self.status = 200
        self.gate = threading.Event()
        self.gate.set()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                endpoint.bodies.append(body)
                endpoint.gate.wait(10)
                self.send_response(endpoint.status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.gate.set()
        self.server.shutdown()
        self.server.server_close()


def notify_jobs_down(endpoint: Endpoint) -> list[dict]:
    """Send the job-down notices at once (Celery eager), close ``endpoint`` and return the bodies it
    received; one notice must have been sent."""
    app.conf.task_always_eager = True
    try:
        assert jobs_down_notify() == 1
    finally:
        app.conf.task_always_eager = False
        endpoint.close()
    return endpoint.bodies
