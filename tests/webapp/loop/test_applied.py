"""One rescale per approval: every attempt of an execution carries its idempotency key, and an
attempt whose answer was lost is recorded as the applied one when the runner replays it
(``webapp.loop.applied``; the runner's side is ``sparkclient.runner.applied``). SQLite and the
session's Redis; the runner's steps are played here with the runner's own key store."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from sparkclient.contract import control, keys
from sparkclient.contract.messages import RescaleCommand, RescalePath, RescaleResult, ResultStatus
from sparkclient.runner.applied import AppliedKeys
from tests.webapp.factories import make_job, make_snapshots, make_user
from webapp.api.serializers import ExecutionSerializer
from webapp.jobs.models import Job
from webapp.loop.evaluate import evaluation_run
from webapp.loop.execute import attempt_send
from webapp.loop.reconcile import workflow_reconcile
from webapp.proposals.lifecycle import AttemptOutcome
from webapp.proposals.models import AuditEvent, Execution, Proposal
from webapp.proposals.services import proposal_approve

pytestmark = pytest.mark.django_db


def _approved() -> Proposal:
    job = make_job(metric_window_s=45, restart_strategy="fixed-delay", restart_attempts=3, restart_delay_s=0.5)
    make_snapshots(job)
    evaluation_run(job=job)
    proposal = job.proposals.get()
    proposal_approve(proposal=proposal, actor=make_user())
    return proposal


def _commands(redis, job: str) -> list[RescaleCommand]:
    return [RescaleCommand.from_json(fields["json"]) for _id, fields in redis.xrange(keys.control(job))]


def _expire_lease(execution: Execution) -> None:
    Execution.objects.filter(pk=execution.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))


def test_every_attempt_carries_the_same_key_and_a_replay_records_the_first_attempt_as_applied(
        workflow_redis, enqueued, tmp_path, django_capture_on_commit_callbacks):
    proposal = _approved()
    job = proposal.job.name
    store = AppliedKeys.in_workdir(tmp_path)  # the runner's store, as the driver keeps it
    attempt_send(proposal_id=proposal.pk, attempt=1)
    [first] = _commands(workflow_redis, job)
    execution = Execution.objects.get(proposal=proposal)
    assert first.idempotency_key == execution.idempotency_key and str(proposal.pk) in first.idempotency_key
    # The runner applies attempt 1 (a restart of 3.2 s, 2.5 s without a batch); its result is lost.
    restarted_at = time.time()
    assert store.answer(first, None) is None
    store.record(first.idempotency_key, first.knobs, RescaleResult(
        id=first.id, status=ResultStatus.SUCCEEDED, path=RescalePath.IN_PROCESS, downtime_s=3.2, pause_s=2.5,
        knobs=first.knobs, completed_at=restarted_at))

    _expire_lease(execution)
    with django_capture_on_commit_callbacks(execute=True):
        workflow_reconcile()  # no answer within the lease: unanswered, not failed; retried
    execution.refresh_from_db()
    assert [e.status for e in execution.attempt_entries] == [AttemptOutcome.UNANSWERED]
    assert (proposal.pk, 2, 0.5) in enqueued

    attempt_send(proposal_id=proposal.pk, attempt=2)
    second = _commands(workflow_redis, job)[-1]
    assert second.id != first.id and second.idempotency_key == first.idempotency_key
    replay = store.answer(second, first.knobs)  # the runner answers with its first apply, touching nothing
    assert replay.replay_of == first.id
    control.write_result(workflow_redis, job, replay)
    workflow_reconcile()

    execution.refresh_from_db()
    assert Proposal.objects.get(pk=proposal.pk).status == "succeeded"
    assert (execution.attempts, execution.applied_attempt) == (2, 1)
    assert (execution.path, execution.downtime_s, execution.pause_s) == ("in-process", 3.2, 2.5)
    assert abs(execution.finished_at.timestamp() - restarted_at) < 0.01  # the real restart's time
    first, second = execution.attempt_entries
    assert [(e.attempt, e.status) for e in (first, second)] == [(1, AttemptOutcome.SUCCEEDED),
                                                                (2, AttemptOutcome.REPLAYED)]
    assert first.answered_by == 2 and second.applied_by == 1
    assert ExecutionSerializer(execution).data["applied_attempt"] == 1  # the API says which attempt applied
    actions = list(AuditEvent.objects.filter(proposal=proposal).order_by("id").values_list("action", flat=True))
    assert actions.count("config_changed") == 1 and "attempt_failed" not in actions
    assert actions.count("attempt_unanswered") == 1
    changed = AuditEvent.objects.get(proposal=proposal, action="config_changed")
    assert changed.reason == {"code": "config_applied_replayed",
                              "data": {"attempt": 1, "path": "in-process", "downtime_s": 3.2, "answered_by": 2}}
    assert AuditEvent.objects.get(proposal=proposal, action="succeeded").reason["data"] == {"attempt": 1}


def test_an_attempt_the_runner_did_apply_again_is_its_own_applied_attempt(workflow_redis, enqueued):
    """A runner without the key (older, or it never got attempt 1) applies attempt 2: attempt 1
    stays unanswered, attempt 2 is the applied one."""
    proposal = _approved()
    job = proposal.job.name
    attempt_send(proposal_id=proposal.pk, attempt=1)
    execution = Execution.objects.get(proposal=proposal)
    _expire_lease(execution)
    workflow_reconcile()
    attempt_send(proposal_id=proposal.pk, attempt=2)
    second = _commands(workflow_redis, job)[-1]
    control.write_result(workflow_redis, job, RescaleResult(
        id=second.id, status=ResultStatus.SUCCEEDED, path=RescalePath.DRIVER_HANDOVER, downtime_s=9.0,
        knobs=second.knobs))
    workflow_reconcile()
    execution.refresh_from_db()
    assert (execution.applied_attempt, execution.path) == (2, "driver-handover")
    assert [e.status for e in execution.attempt_entries] == [AttemptOutcome.UNANSWERED, AttemptOutcome.SUCCEEDED]
    assert AuditEvent.objects.get(proposal=proposal, action="config_changed").reason["code"] == "config_applied"


def test_the_key_names_the_execution_not_only_the_proposal(workflow_redis, enqueued):
    proposal = _approved()
    attempt_send(proposal_id=proposal.pk, attempt=1)
    execution = Execution.objects.get(proposal=proposal)
    key = execution.idempotency_key
    assert key.startswith(f"proposal-{proposal.pk}-revision-{proposal.revision}-execution-")
    # the same proposal id in a database that was reset names another execution: another key
    Execution.objects.filter(pk=execution.pk).update(started_at=execution.started_at + timedelta(microseconds=1))
    assert Execution.objects.get(pk=execution.pk).idempotency_key != key


def test_the_config_change_is_audited_from_what_the_proposal_changed(workflow_redis, enqueued):
    """A handover's new driver reports its configuration, and the collector stores it on the job, before
    the runner's answer arrives: the audit event still reads old → new, never new → new."""
    proposal = _approved()
    attempt_send(proposal_id=proposal.pk, attempt=1)
    command = _commands(workflow_redis, proposal.job.name)[-1]
    Job.objects.filter(pk=proposal.job.pk).update(config=proposal.proposed_config)  # the collector was first
    control.write_result(workflow_redis, proposal.job.name, RescaleResult(
        id=command.id, status=ResultStatus.SUCCEEDED, path=RescalePath.DRIVER_HANDOVER, downtime_s=9.0,
        knobs=command.knobs))
    workflow_reconcile()
    changed = AuditEvent.objects.get(proposal=proposal, action="config_changed")
    assert changed.before == proposal.current_config != changed.after
