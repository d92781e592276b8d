"""Advisor mode never executes and says so; auto mode executes a scale-up inside the
guardrails without a click, and holds one outside them for a person, naming the guardrail.

The execution path is the real one (service → ``send_rescale`` on a real Redis → runner answer),
with Celery tasks run eagerly and a fake runner on the control channel instead of Spark.
"""

from __future__ import annotations

import time

import pytest
from rest_framework.authtoken.models import Token

from tests.webapp.factories import make_job, make_snapshots, make_user
from tests.webapp.fakerunner import FakeRunner, record_answers
from webapp.celery import app as celery_app
from webapp.jobs.models import Job
from webapp.loop.evaluate import evaluation_run
from webapp.loop.execute import attempt_send
from webapp.loop.reconcile import workflow_reconcile
from webapp.proposals.lifecycle import TransitionError
from webapp.proposals.models import AuditEvent, Execution, Proposal
from webapp.proposals.services import proposal_approve

pytestmark = [pytest.mark.django_db, pytest.mark.workflow]


@pytest.fixture
def runner(workflow_redis, redis_server, settings, monkeypatch):
    """A fake runner answering every command with success; execution tasks run in-process."""
    from webapp.loop.tasks import execute_attempt

    settings.SCALER_EXECUTION_TIMEOUT_S = 5
    monkeypatch.setattr("webapp.proposals.dispatch.send",
                        lambda proposal_id, attempt, countdown_s: execute_attempt.apply((proposal_id, attempt)))
    celery_app.conf.task_always_eager = True
    fake = FakeRunner(redis_server.url, "demo")
    fake.start()
    yield fake
    fake.stop()
    celery_app.conf.task_always_eager = False


def _evaluate(job: Job, capture) -> Proposal:
    make_snapshots(job)
    with capture(execute=True):
        evaluation_run(job=job)
    record_answers()
    return job.proposals.get()


def test_advisor_mode_never_executes_and_says_so(runner, client, django_capture_on_commit_callbacks):
    job = make_job(metric_window_s=45, mode="advisor")
    proposal = _evaluate(job, django_capture_on_commit_callbacks)
    assert proposal.status == Proposal.Status.PENDING
    operator = make_user()
    with pytest.raises(TransitionError, match="advisor mode"):
        proposal_approve(proposal=proposal, actor=operator)
    token = Token.objects.create(user=operator)
    refused = client.post(f"/api/proposals/{proposal.pk}/approve/", HTTP_AUTHORIZATION=f"Token {token.key}")
    assert refused.status_code == 409 and "advisor mode" in refused.json()["detail"]
    # Even a forged "approved" row is not executed in advisor mode.
    Proposal.objects.filter(pk=proposal.pk).update(status=Proposal.Status.APPROVED)
    with pytest.raises(TransitionError, match="advisor mode"):
        attempt_send(proposal_id=proposal.pk)
    workflow_reconcile()
    time.sleep(0.5)
    assert runner.commands == [] and not Execution.objects.exists()
    client.force_login(operator)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert "advisor mode" in page
    assert 'value="approve"' not in page


def test_auto_mode_executes_a_scale_up_inside_the_guardrails_without_a_click(
        runner, django_capture_on_commit_callbacks):
    job = make_job(metric_window_s=45, mode="auto", guard_max_change_factor=8, guard_max_executors=8,
                   guard_directions="up")
    proposal = _evaluate(job, django_capture_on_commit_callbacks)
    proposal.refresh_from_db()
    assert proposal.status == Proposal.Status.SUCCEEDED, proposal.hold_reason
    assert proposal.decided_by is None and proposal.hold_reason == {}
    assert len(runner.commands) == 1 and runner.commands[0]["config"]["cores"] == proposal.proposed_config["cores"]
    job.refresh_from_db()
    assert job.config["cores"] == proposal.proposed_config["cores"] > 1
    actions = list(AuditEvent.objects.filter(proposal=proposal).order_by("id").values_list("action", "actor_name"))
    assert actions[:3] == [("proposed", "policy:ds2"), ("approved", "policy:ds2"), ("executing", "system")]
    assert ("succeeded", "system") in actions and ("config_changed", "system") in actions


@pytest.mark.parametrize("guardrail, options", [
    ("guard_max_executors", {"guard_max_executors": 1, "guard_max_change_factor": 8}),
    ("guard_max_change_factor", {"guard_max_change_factor": 1.5}),
    ("guard_directions", {"guard_directions": "down", "guard_max_change_factor": 8}),
    ("guard_excluded_periods", {"guard_excluded_periods": ["* * * * *"], "guard_max_change_factor": 8}),
])
def test_auto_mode_holds_a_proposal_outside_the_guardrails_for_a_person(
        runner, client, django_capture_on_commit_callbacks, guardrail, options):
    job = make_job(metric_window_s=45, mode="auto", **options)
    proposal = _evaluate(job, django_capture_on_commit_callbacks)
    assert proposal.status == Proposal.Status.PENDING
    assert proposal.hold_reason["code"] == guardrail
    assert runner.commands == []
    held = AuditEvent.objects.get(proposal=proposal, action="auto_approve_held")
    assert (held.actor_name, held.actor_user, held.reason) == ("policy:ds2", None, proposal.hold_reason)
    client.force_login(make_user())
    assert f'data-code="{guardrail}"' in client.get(f"/jobs/{job.pk}/").content.decode()
    hold = client.get(f"/api/proposals/{proposal.pk}/").json()["hold_reason"]
    assert (hold["code"], hold["data"], hold["text"]) == (guardrail, proposal.hold_reason["data"], proposal.hold_text)
    # A person approves it: then it executes.
    with django_capture_on_commit_callbacks(execute=True):
        proposal_approve(proposal=proposal, actor=make_user("person"))
    record_answers()
    proposal.refresh_from_db()
    assert proposal.status == Proposal.Status.SUCCEEDED and proposal.decided_by.username == "person"
    assert len(runner.commands) == 1
