"""A runner that reports a crash loop (``state=crash_looping`` with its crash record) marks the job down
with the coded reason (``webapp.jobs.runnerdown``); the job page, the overview's row, the inbox item and
the ``job_down`` webhook name the exception, its log and what to do, in the words of
``webapp.proposals.reason_text``. A runner that runs again takes the reason away."""

from __future__ import annotations

import html

import pytest

from tests.webapp.factories import make_job
from tests.webapp.inbox.factories import Endpoint, notify_jobs_down
from tests.webapp.loop.test_collect import write_runner_status
from webapp.inbox.models import NotificationTarget
from webapp.jobs.models import Job
from webapp.jobs.runnerdown import RunnerDown
from webapp.loop.collect import snapshot_collect

pytestmark = pytest.mark.django_db

LOG = "/var/jobs/orders/driver.log"
LOOPING = {"state": "crash_looping", "exit_code": 1, "exception": "ValueError",
           "exception_message": "the pipeline raises once it has lived 25 s", "log_path": LOG, "crashes": 3,
           "crash_window_s": 600.0, "restart_at": 1_712_000_060.0, "error": "driver exited with code 1"}
KILLED = "ValueError: the pipeline raises once it has lived 25 s"


def _text(client, path: str) -> str:
    page = client.get(path)
    assert page.status_code == 200
    return html.unescape(page.content.decode())


@pytest.fixture
def looping_job(workflow_redis):
    job = make_job("orders")
    write_runner_status(workflow_redis, job, **LOOPING)
    assert snapshot_collect(job=job) is None
    job.refresh_from_db()
    return job


def test_a_crash_loop_is_named_on_the_job_page_the_overview_and_the_inbox(client, operator, looping_job):
    assert looping_job.health == Job.Health.DOWN
    assert looping_job.health_reason["code"] == RunnerDown.CRASH_LOOPING
    job_page = _text(client, f"/jobs/{looping_job.pk}/")
    assert f"crash looping: 3 driver crashes within 10 min, the last {KILLED} (exit code 1)" in job_page
    assert f"Read the trace in {LOG} and fix the pipeline or what it reads" in job_page
    overview = _text(client, "/")
    assert f'<span class="health-note">crash looping: {KILLED}</span>' in overview
    inbox = _text(client, "/inbox/")
    assert f"the job is down: crash looping: 3 driver crashes within 10 min, the last {KILLED}" in inbox
    assert LOG in inbox


def test_a_crash_loop_is_told_by_the_job_down_webhook_with_its_coded_reason(looping_job):
    endpoint = Endpoint()
    NotificationTarget.objects.create(name="orders team", job=looping_job, webhook_url=endpoint.url)
    [body] = notify_jobs_down(endpoint)
    assert body["kind"] == "job_down" and body["data"]["down"]["code"] == RunnerDown.CRASH_LOOPING
    assert body["data"]["down"]["data"]["exception"] == "ValueError"
    assert f"the last {KILLED} (exit code 1). Read the trace in {LOG}" in body["text"]


def test_an_out_of_memory_loop_asks_for_more_memory(client, operator, workflow_redis):
    job = make_job("orders")
    write_runner_status(workflow_redis, job, **{**LOOPING, "exception": "java.lang.OutOfMemoryError",
                                                "exception_message": "Java heap space"})
    snapshot_collect(job=job)
    page = _text(client, f"/jobs/{job.pk}/")
    assert "the last java.lang.OutOfMemoryError: Java heap space (exit code 1)" in page
    assert "give the driver more memory" in page and "fix the pipeline" not in page


@pytest.mark.parametrize(("fields", "code"), [
    ({"state": "crash_looping"}, RunnerDown.CRASH_LOOPING),
    ({"state": "failed"}, RunnerDown.CRASHED),
    ({"state": "failed", "exit_code": 0}, None),  # the dying driver's own "failed": no supervisor record yet
    ({"state": "starting"}, None),  # the next driver starts: the crash record is history
])
def test_only_the_supervisor_s_crash_record_is_a_crash_reason(workflow_redis, fields, code):
    job = make_job("orders")
    write_runner_status(workflow_redis, job, **{**LOOPING, **fields})
    snapshot_collect(job=job)
    job.refresh_from_db()
    assert job.health == Job.Health.DOWN and job.health_reason.get("code") == code
