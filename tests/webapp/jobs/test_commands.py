"""The management commands the README advertises: ``demo_load``, ``ensure_admin``, ``register_job``."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from sparkclient.contract.load import get_rate
from tests.webapp.factories import command_output, make_job, make_snapshots
from webapp.jobs.models import Job
from webapp.loop.evaluate import evaluation_run
from webapp.proposals.models import AuditEvent

pytestmark = pytest.mark.django_db


def test_demo_load_sets_the_generator_rate_in_redis(workflow_redis):
    assert "set to 250 events/s" in command_output("demo_load", "--rate", "250", "--topic", "bids")
    assert get_rate(workflow_redis, "bids") == 250.0
    command_output("demo_load", "--rate", "0", "--topic", "bids")  # 0 pauses
    assert get_rate(workflow_redis, "bids") == 0.0


@pytest.mark.parametrize("rate", ["-1", "nan", "inf"])
def test_demo_load_refuses_a_negative_or_non_finite_rate_and_keeps_the_old_one(workflow_redis, rate):
    command_output("demo_load", "--rate", "40", "--topic", "bids")
    with pytest.raises(CommandError, match="rate"):
        call_command("demo_load", "--rate", rate, "--topic", "bids", stdout=StringIO())
    assert get_rate(workflow_redis, "bids") == 40.0


def test_ensure_admin_creates_a_superuser_once_and_prints_its_password_once():
    out = command_output("ensure_admin", "--username", "boss")
    password = re.search(r"password '([^']+)'", out).group(1)
    user = get_user_model().objects.get(username="boss")
    assert user.is_superuser and user.is_staff and user.check_password(password)
    again = command_output("ensure_admin", "--username", "boss")
    assert password not in again and "exists" in again
    assert get_user_model().objects.filter(username="boss").count() == 1
    assert get_user_model().objects.get(username="boss").check_password(password)  # unchanged


def test_register_job_creates_the_job_and_a_rerun_expires_its_pending_proposals():
    out = command_output("register_job", "--name", "orders", "--topic", "orders-log", "--query-name", "orders-q")
    job = Job.objects.get(name="orders")
    assert f"(id {job.pk})" in out and (job.topic, job.query_name) == ("orders-log", "orders-q")
    assert job.policy is not None

    pending_job = make_job("scaled", metric_window_s=45)
    make_snapshots(pending_job, count=6)
    evaluation_run(job=pending_job)
    proposal = pending_job.proposals.get(status="pending")
    command_output("register_job", "--name", "scaled")  # the runner restarted the job: a new run
    proposal.refresh_from_db()
    assert proposal.status == "expired" and proposal.decided_at is not None
    event = AuditEvent.objects.get(proposal=proposal, action="expired")
    assert event.reason == {"code": "reregistered", "data": {}} and event.actor_name == "system"
    pending_job.refresh_from_db()
    assert (pending_job.topic, pending_job.query_name) == ("nexmark", "scaled-query")  # kept when not given
    assert Job.objects.filter(name="scaled").count() == 1
