"""A Spark UI whose answer is too large or too slow (:mod:`tests.hostile_spark` on 127.0.0.1): the collection
ends, stores nothing, marks the job ``down`` with the refusal's code as its health reason
(``sparkclient.collector.answers.AnswerRefusal``), and the job page names the reason in words
(``webapp.proposals.reason_text.health_text``), on the status line and in why no proposal is pending."""

from __future__ import annotations

import html

import pytest

from sparkclient.collector.answers import AnswerRefusal
from tests.fakespark import APP
from tests.hostile_spark import MiB, hostile_spark, huge_body, trickle_body, trickle_headers
from tests.webapp.factories import make_job
from tests.webapp.loop.test_collect import collect, running
from webapp.jobs.models import Job, MetricSnapshot
from webapp.proposals.reason_text import health_text

pytestmark = pytest.mark.django_db

JOBS = f"/api/v1/applications/{APP}/jobs"


def _collect_from(redis, answer) -> Job:
    """A job whose runner reports the hostile UI, collected once while ``/jobs`` gets ``answer``."""
    job = make_job()
    with hostile_spark() as ui:
        ui.answers[JOBS] = answer
        running(redis, job, ui.url)
        assert collect(job) is None
        assert ui.requested == [JOBS]  # nothing after the refused answer
    job.refresh_from_db()
    assert job.health == Job.Health.DOWN and not MetricSnapshot.objects.exists()
    return job


def _page_text(client, job: Job) -> str:
    page = client.get(f"/jobs/{job.pk}/")
    assert page.status_code == 200
    return html.unescape(page.content.decode())


def test_a_body_over_its_limit_marks_the_job_down_and_the_page_names_the_reason(client, operator, workflow_redis):
    job = _collect_from(workflow_redis, huge_body(100 * MiB, declared=False))
    assert job.health_reason["code"] == AnswerRefusal.TOO_LARGE
    assert job.health_reason["data"]["endpoint"] == "jobs"
    words = health_text(job.health_reason, job.last_error)
    assert words.startswith("the Spark UI's answer to /jobs was refused past its limit of 8 MiB")
    assert _page_text(client, job).count(words) == 2  # the status line and why no proposal is pending


def test_a_trickle_ends_the_collection_at_its_deadline_and_the_page_names_the_reason(client, operator,
                                                                                    workflow_redis, settings):
    """The collection's deadline is the soft time limit less one request timeout (5 s here)."""
    settings.SCALER_COLLECT_SOFT_TIME_LIMIT_S = 10.0
    job = _collect_from(workflow_redis, trickle_body())
    assert job.health_reason == {"code": AnswerRefusal.TOO_SLOW,
                                 "data": {"endpoint": "jobs", "bound": "collection", "deadline_s": 5.0}}
    words = health_text(job.health_reason, job.last_error)
    assert "did not finish its answer to /jobs within the collection's deadline of 5 s" in words
    assert _page_text(client, job).count(words) == 2


def test_trickled_headers_end_at_the_deadline_through_the_address_check(workflow_redis, settings):
    """The web app's client checks the address first (``GuardedTransport``), over the collector's deadline
    transport: headers that trickle in are cut at the deadline too, not only a body between its chunks."""
    settings.SCALER_COLLECT_SOFT_TIME_LIMIT_S = 10.0
    job = _collect_from(workflow_redis, trickle_headers())
    assert job.health_reason["code"] == AnswerRefusal.TOO_SLOW, job.health_reason


def test_a_health_reason_of_another_kind_shows_the_stored_error():
    refusal = {"code": "ui_host_not_allowed", "reported": "10.0.0.9", "allowed": "127.0.0.1"}
    assert health_text(refusal, "the Spark UI host ...") == "the Spark UI host ..."
    assert health_text({}, "runner state is 'failed'") == "runner state is 'failed'"
