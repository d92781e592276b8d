"""An attempt the runner answers "nothing to change" (it found the configuration applied) succeeds only
once a batch completed on that configuration (``webapp.loop.execute.proven``, read by the reconcile
beat), on a real ``redis-server``: the runner's status and published progress as the driver writes them."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from sparkclient.contract import control, keys
from sparkclient.contract.messages import (
    RescaleCommand,
    RescalePath,
    RescaleResult,
    ResultStatus,
    RunnerState,
    StatusUpdate,
)
from tests.webapp.factories import make_job, make_snapshots, make_user
from webapp.jobs.models import Job
from webapp.loop.evaluate import evaluation_run
from webapp.loop.execute import attempt_send, lease_s
from webapp.loop.reconcile import execution_poll
from webapp.proposals.lifecycle import AttemptOutcome, AttemptState
from webapp.proposals.models import Execution, Proposal
from webapp.proposals.services import proposal_approve

pytestmark = pytest.mark.django_db

OLD_RUN, NEW_RUN = "run-old", "run-new"


def _sent_attempt(redis):
    """An approved proposal whose attempt 1 was sent and answered "nothing to change" by the runner."""
    job = make_job(name="clicks", metric_window_s=45)
    make_snapshots(job)
    evaluation_run(job=job)
    proposal = job.proposals.get()
    proposal_approve(proposal=proposal, actor=make_user(username="operator"))
    execution = attempt_send(proposal_id=proposal.pk)
    proposal.refresh_from_db()
    control.write_result(redis, job.name, RescaleResult(id=execution.exec_id(1), status=ResultStatus.SUCCEEDED,
                                                        path=RescalePath.NONE, knobs=proposal.proposed_config))
    return job, proposal, execution


def _running(redis, job: Job, run_id: str, knobs: dict) -> None:
    """The runner's status: running ``run_id`` on ``knobs`` (as the driver writes it when a query starts)."""
    control.write_status(redis, job.name, StatusUpdate(state=RunnerState.RUNNING, run_id=run_id, knobs=knobs))


def _published(redis, job: Job, run_id: str, *, executed: bool = True) -> None:
    """A progress of ``run_id`` as the runner's listener publishes it: a batch, or an idle trigger."""
    durations = {"addBatch": 400, "triggerExecution": 500} if executed else {"triggerExecution": 3}
    redis.xadd(keys.progress(job.name), {"json": json.dumps({
        "id": "q", "runId": run_id, "name": "clicks", "batchId": 7, "timestamp": "2026-12-02T16:00:00.000Z",
        "durationMs": durations, "numInputRows": 10 if executed else 0, "sink": {"numOutputRows": -1}})})


def _status(execution: Execution) -> tuple[str, str]:
    execution.refresh_from_db()
    return execution.status, execution.attempt_state


def test_nothing_to_change_succeeds_only_by_a_batch_of_the_run_on_its_configuration(workflow_redis, no_enqueue):
    job, proposal, execution = _sent_attempt(workflow_redis)
    new = proposal.proposed_config
    # the new configuration's run started (a handover's new query) and completed no batch yet
    _published(workflow_redis, job, OLD_RUN)
    _running(workflow_redis, job, NEW_RUN, new)
    _published(workflow_redis, job, NEW_RUN, executed=False)  # an idle trigger is not a batch
    assert execution_poll(execution=execution) is None
    assert _status(execution) == ("running", AttemptState.SENT)
    # a batch on the OLD configuration after the apply: the stopped run's late progress...
    _published(workflow_redis, job, OLD_RUN)
    assert execution_poll(execution=execution) is None
    # ...or a runner back on the old configuration, whose run completes batches
    _running(workflow_redis, job, OLD_RUN, proposal.current_config)
    _published(workflow_redis, job, OLD_RUN)
    assert execution_poll(execution=execution) is None
    assert _status(execution) == ("running", AttemptState.SENT)
    assert Job.objects.get(pk=job.pk).config == proposal.current_config

    # one batch of the run on the new configuration: succeeded, its downtime not measured
    _running(workflow_redis, job, NEW_RUN, new)
    _published(workflow_redis, job, NEW_RUN)
    assert execution_poll(execution=execution) is not None
    execution.refresh_from_db()
    assert execution.status == "succeeded" and execution.path == RescalePath.NONE
    assert (execution.downtime_s, execution.pause_s, execution.time_to_effect_s) == (None, None, None)
    assert Job.objects.get(pk=job.pk).config == new
    assert Job.objects.get(pk=job.pk).scaler_state["restart_times_s"] == []  # nothing learned from it


def test_nothing_to_change_without_a_batch_fails_at_its_lease_and_is_retried(workflow_redis, no_enqueue):
    job, proposal, execution = _sent_attempt(workflow_redis)
    _running(workflow_redis, job, NEW_RUN, proposal.proposed_config)
    before = timezone.now() + timedelta(seconds=lease_s() - 5)
    assert execution_poll(execution=execution, now=before) is None  # still executing within its lease
    after = timezone.now() + timedelta(seconds=lease_s() + 5)
    assert execution_poll(execution=execution, now=after) is not None
    execution.refresh_from_db()
    assert execution.status == "running" and execution.attempt_state == AttemptState.WAITING_RETRY
    [entry] = execution.attempt_entries
    assert entry.status is AttemptOutcome.FAILED and "no batch completed on it" in entry.error
    assert Proposal.objects.get(pk=proposal.pk).status == Proposal.Status.EXECUTING
    # the retry finds attempt 1's "nothing to change" still without a batch: not its outcome, sent again
    Execution.objects.filter(pk=execution.pk).update(next_attempt_at=timezone.now())
    attempt_send(proposal_id=proposal.pk, attempt=2)
    assert _status(execution) == ("running", AttemptState.SENT) and execution.attempts == 2
    assert [c.id for c in _commands(workflow_redis, job)] == [execution.exec_id(1), execution.exec_id(2)]


def _commands(redis, job: Job) -> list[RescaleCommand]:
    return [RescaleCommand.from_json(fields["json"]) for _id, fields in redis.xrange(keys.control(job.name))]
