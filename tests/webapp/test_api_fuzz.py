"""Schemathesis against the live API with a valid token: every operation of the OpenAPI schema,
examples, coverage and fuzzing phases, with malformed input too; no response may be a 5xx."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rest_framework.authtoken.models import Token

from tests.webapp.dashboard_factories import make_role_user, make_succeeded
from tests.webapp.factories import make_job, make_snapshots
from webapp.jobs.services import evaluation_run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(400)]

ARTIFACTS = Path(os.environ.get("TEST_ARTIFACTS", Path(__file__).resolve().parents[2] / "test-artifacts"))


@pytest.fixture
def no_enqueue(monkeypatch):
    """Approvals and rollbacks are accepted but nothing is executed (no broker here); the live
    server runs in this process, so patching the tasks reaches it."""
    import webapp.proposals.tasks as tasks

    for name in dir(tasks):
        task = getattr(tasks, name)
        if hasattr(task, "delay"):
            monkeypatch.setattr(task, "delay", lambda *a, **k: None)
            monkeypatch.setattr(task, "apply_async", lambda *a, **k: None)


def test_schemathesis_finds_no_server_error(live_server, no_enqueue, tmp_path):
    for name in ("alpha", "beta"):
        job = make_job(name, metric_window_s=45)
        make_snapshots(job, count=6)
        evaluation_run(job=job)
        make_succeeded(job)
    token = Token.objects.create(user=make_role_user("fuzzer"))
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    report = ARTIFACTS / "schemathesis-junit.xml"
    command = [str(Path(sys.executable).with_name("st")), "run", f"{live_server.url}/api/schema/",
               "--url", live_server.url, "--header", f"Authorization: Token {token.key}",
               "--checks", "not_a_server_error", "--phases", "examples,coverage,fuzzing",
               "--max-examples", "15", "--workers", "1", "--seed", "271", "--request-timeout", "20",
               "--generation-allow-x00", "true", "--report", "junit", "--report-junit-path", str(report)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=360, cwd=tmp_path,
                          env={**os.environ, "NO_COLOR": "1", "SCHEMATHESIS_HOOKS": ""})
    (ARTIFACTS / "schemathesis.log").write_text(done.stdout + done.stderr)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert "Server error" not in done.stdout
    assert re.search(r"\d+ generated, \d+ passed", done.stdout), done.stdout[-3000:]
