"""Execution (``webapp.loop.execute``): what an attempt's answer records on the job and the proposal,
when a failed attempt is retried, and what a rescale cost."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from sparkclient.contract import keys
from sparkclient.contract.messages import FailureCode, RescalePath, RescaleResult, ResultStatus
from tests.waiting import wait_for
from tests.webapp.factories import make_job, make_pending, make_snapshots, make_user
from tests.webapp.fakerunner import FakeRunner, record_answers
from webapp.api.serializers import ExecutionSerializer
from webapp.jobs.models import Job, MetricSnapshot
from webapp.loop.evaluate import evaluation_run
from webapp.loop.execute import attempt_send, execution_record_result
from webapp.loop.rescale_cost import record_open_costs
from webapp.proposals.attempts import RetryDecision
from webapp.proposals.codes import RetryCode
from webapp.proposals.lifecycle import AttemptOutcome
from webapp.proposals.models import AuditEvent, Execution, Proposal
from webapp.proposals.services import proposal_approve

pytestmark = pytest.mark.django_db


def _executing_proposal(name: str = "demo"):
    """A job with a proposal approved and executing (its attempt not yet recorded)."""
    job = make_job(name=name, metric_window_s=45)
    make_snapshots(job)
    evaluation_run(job=job)
    proposal = job.proposals.get()
    proposal_approve(proposal=proposal, actor=make_user(username=f"operator-{name}"))
    Proposal.objects.filter(pk=proposal.pk).update(status=Proposal.Status.EXECUTING)
    return job, proposal


def test_a_successful_execution_records_the_scaling_and_its_downtime(no_enqueue):
    """Ineffective scale-up detection and restart-time tracking learn from what was executed."""
    job, proposal = _executing_proposal()
    execution = Execution.objects.create(proposal=proposal, attempts=1, attempt_state="sent")
    execution_record_result(execution_id=execution.pk, attempt=1,
                            result=RescaleResult(id=execution.exec_id(1), status=ResultStatus.SUCCEEDED,
                                                 path=RescalePath.DRIVER_RESTART, downtime_s=27.5,
                                                 knobs=proposal.proposed_config))
    state = Job.objects.get(pk=job.pk).scaler_state
    assert state["restart_times_s"] == [27.5]
    scaled = {r["vertex_id"]: (r["old_parallelism"], r["new_parallelism"]) for r in state["history"]}
    assert scaled["v1"] == (1, proposal.proposed_config["enrich_partitions"])


def test_an_execution_records_its_pause_added_lag_and_catch_up_from_the_snapshots(no_enqueue):
    """pause_s from the runner; added_lag_s and catch_up_s from the backlog around the rescale."""
    job, proposal = _executing_proposal()
    start = timezone.now()
    execution = Execution.objects.create(proposal=proposal, attempts=1, attempt_state="sent")
    Execution.objects.filter(pk=execution.pk).update(started_at=start)
    execution_record_result(execution_id=execution.pk, attempt=1, now=start + timedelta(seconds=10),
                            result=RescaleResult(id=execution.exec_id(1), status=ResultStatus.SUCCEEDED,
                                                 path=RescalePath.IN_PROCESS, downtime_s=3.0, pause_s=1.2,
                                                 knobs=proposal.proposed_config))
    MetricSnapshot.objects.filter(job=job).delete()

    def snap(dt, backlog):
        MetricSnapshot.objects.create(job=job, collected_at=start + timedelta(seconds=dt), window_s=15, batches=3,
                                      backlog=backlog, arrival_rate_per_s=500.0, trigger_interval_s=2.0)

    for dt, backlog in [(-30, 1000), (-15, 1000), (-1, 1000), (15, 6000), (30, 3000)]:
        snap(dt, backlog)
    assert record_open_costs(now=start + timedelta(seconds=31)) == 0
    execution.refresh_from_db()
    assert execution.pause_s == 1.2
    assert execution.added_lag_s == pytest.approx(6000 / 500 - 1000 / 500)
    assert execution.catch_up_s is None  # not back yet
    snap(45, 1500)  # within one trigger interval of arrivals (1,000 records) of the steady 1,000
    assert record_open_costs(now=start + timedelta(seconds=46)) == 1
    execution.refresh_from_db()
    assert execution.catch_up_s == pytest.approx(45.0, abs=0.01)


def test_the_time_to_effect_runs_from_the_approval_to_the_runners_first_batch(workflow_redis, redis_server,
                                                                             no_enqueue):
    """The runner dates its first batch on the new configuration; the execution stores the seconds
    from the approval to it (not to when the answer was read), and the API gives them."""
    proposal = make_pending()
    job = proposal.job
    proposal_approve(proposal=proposal, actor=make_user())
    runner = FakeRunner(redis_server.url, job.name, delay_s=1.0, answer=lambda command, i: {
        "status": "succeeded", "path": "driver-handover", "pause_s": 1.5, "first_batch_after_s": 0.2})
    runner.start()
    try:
        approved = timezone.now() - timedelta(seconds=30)
        Proposal.objects.filter(pk=proposal.pk).update(decided_at=approved)
        attempt_send(proposal_id=proposal.pk, attempt=1)
        # the beat dates what it records by its own start, so it starts once the answer is written
        wait_for(lambda: runner.answered_at, timeout_s=10, interval_s=0.05, what="the runner's answer")
        record_answers()
    finally:
        runner.stop()
    execution = Execution.objects.get(proposal=proposal)
    assert execution.status == "succeeded"
    assert execution.time_to_effect_s == pytest.approx(execution.result["first_batch_at"] - approved.timestamp())
    assert execution.time_to_effect_s >= 30.0
    # the answer came a second after its first batch: that second is not the rescale's
    assert (execution.finished_at - approved).total_seconds() >= execution.time_to_effect_s + 0.8
    assert ExecutionSerializer(execution).data["time_to_effect_s"] == execution.time_to_effect_s


def test_a_result_without_a_first_batch_stores_no_time_to_effect(no_enqueue):
    """Nothing restarted (or an older runner): no time to effect, not the answer's time."""
    _job, proposal = _executing_proposal()
    execution = Execution.objects.create(proposal=proposal, attempts=1, attempt_state="sent")
    execution_record_result(execution_id=execution.pk, attempt=1,
                            result=RescaleResult(id=execution.exec_id(1), status=ResultStatus.SUCCEEDED,
                                                 path=RescalePath.NONE, knobs=proposal.proposed_config))
    execution.refresh_from_db()
    assert execution.status == "succeeded" and execution.time_to_effect_s is None


@pytest.mark.parametrize(("path", "downtime_s", "learned"), [(RescalePath.NONE, None, False),
                                                             (RescalePath.IN_PLACE, 0.0, False),
                                                             (RescalePath.DRIVER_RESTART, 12.0, True)])
def test_only_a_measured_restart_records_a_downtime_and_teaches_restart_time(no_enqueue, path, downtime_s, learned):
    """"Nothing to change" measured nothing: its downtime is not measured (None, not the answer's 0 s)
    and restart-time tracking skips it; an in-place change's 0 s is real but is not a restart."""
    job, proposal = _executing_proposal()
    execution = Execution.objects.create(proposal=proposal, attempts=1, attempt_state="sent")
    execution_record_result(execution_id=execution.pk, attempt=1,
                            result=RescaleResult(id=execution.exec_id(1), status=ResultStatus.SUCCEEDED, path=path,
                                                 downtime_s=downtime_s or 0.0, knobs=proposal.proposed_config))
    state = Job.objects.get(pk=job.pk).scaler_state
    assert state["restart_times_s"] == ([downtime_s] if learned else [])
    execution.refresh_from_db()
    assert execution.status == "succeeded"
    assert (execution.downtime_s, execution.pause_s) == (downtime_s, None if downtime_s is None else 0.0)


@pytest.mark.parametrize("later", ["next-execution", "load-change"])
def test_a_rescale_is_not_charged_what_follows_its_own_window(no_enqueue, later):
    """The backlog never comes back within a trigger of arrivals; then another execution starts, or
    the load quadruples, and the backlog runs away: the rescale keeps the added lag of its own window."""
    job, proposal = _executing_proposal()
    start = timezone.now()
    execution = Execution.objects.create(proposal=proposal, attempts=1, attempt_state="sent")
    Execution.objects.filter(pk=execution.pk).update(started_at=start)
    execution_record_result(execution_id=execution.pk, attempt=1, now=start + timedelta(seconds=6),
                            result=RescaleResult(id=execution.exec_id(1), status=ResultStatus.SUCCEEDED,
                                                 path=RescalePath.DRIVER_RESTART, downtime_s=5.9, pause_s=5.9,
                                                 knobs=proposal.proposed_config))
    MetricSnapshot.objects.filter(job=job).delete()
    rows = [(-30, 1000, 500), (-15, 1000, 500), (-1, 1000, 500), (15, 4000, 500), (30, 2600, 500), (45, 2500, 500)]
    overload = 2000.0 if later == "load-change" else 500.0
    rows += [(60 + 15 * i, 50_000 * (i + 1), overload) for i in range(6)]
    for dt, backlog, rate in rows:
        MetricSnapshot.objects.create(job=job, collected_at=start + timedelta(seconds=dt), window_s=15, batches=3,
                                      backlog=backlog, arrival_rate_per_s=rate, trigger_interval_s=2.0)
    if later == "next-execution":
        following = Proposal.objects.create(job=job, status=Proposal.Status.FAILED, current_config=job.config,
                                            proposed_config=job.config)
        Execution.objects.create(proposal=following, status="failed", attempts=1, attempt_state="done")
        Execution.objects.filter(proposal=following).update(started_at=start + timedelta(seconds=50))
    record_open_costs(now=start + timedelta(seconds=200))
    execution.refresh_from_db()
    assert execution.added_lag_s == pytest.approx(4000 / 500 - 1000 / 500)
    assert execution.catch_up_s is None


def test_a_command_the_runner_refuses_for_what_it_is_is_not_retried(no_enqueue):
    """``state-not-repartitionable`` (and out-of-bounds, malformed) is refused before anything stops
    and would be refused again: the proposal fails at its first attempt and rolls back, where it was
    retried 3 times (found approving a proposal on HDFS-backed state). Other failures still retry."""
    job, proposal = _executing_proposal()
    execution = Execution.objects.create(proposal=proposal, attempts=1, attempt_state="sent")
    execution_record_result(execution_id=execution.pk, attempt=1,
                            result=RescaleResult.failed(execution.exec_id(1), FailureCode.STATE_NOT_REPARTITIONABLE,
                                                        "state_partitions is pinned by the checkpoint (2): ..."))
    execution.refresh_from_db()
    proposal.refresh_from_db()
    assert execution.status == "failed" and execution.attempts == 1 and no_enqueue == []
    assert execution.attempt_entries[0].retry == RetryDecision(None, RetryCode.REFUSED,
                                                               {"failure": "state-not-repartitionable"})
    assert proposal.status in ("rolling_back", "rolled_back")

    _job, other = _executing_proposal(name="other")
    execution = Execution.objects.create(proposal=other, attempts=1, attempt_state="sent")
    execution_record_result(execution_id=execution.pk, attempt=1,
                            result=RescaleResult.failed(execution.exec_id(1), FailureCode.RESTART_FAILED,
                                                        "the query did not start", path=RescalePath.IN_PROCESS))
    execution.refresh_from_db()
    assert execution.attempt_state == "waiting_retry" and execution.attempt_entries[0].retry.retry


def test_a_late_answer_to_a_timed_out_attempt_is_the_outcome(workflow_redis, enqueued):
    proposal = make_pending()
    Proposal.objects.filter(pk=proposal.pk).update(status="executing")
    execution = Execution.objects.create(proposal=proposal, attempts=1, attempt_state="waiting_retry")
    workflow_redis.set(keys.control_result(proposal.job.name, execution.exec_id(1)),
                       RescaleResult(id=execution.exec_id(1), status=ResultStatus.SUCCEEDED,
                                     path=RescalePath.DRIVER_RESTART, downtime_s=14.0).to_json())
    execution = attempt_send(proposal_id=proposal.pk, attempt=2)
    assert execution.status == "succeeded" and execution.path == "driver-restart" and execution.downtime_s == 14.0
    assert execution.applied_attempt == 1  # attempt 2 was claimed, never sent
    assert [(e.attempt, e.status) for e in execution.attempt_entries] == [(1, AttemptOutcome.SUCCEEDED),
                                                                          (2, AttemptOutcome.NOT_SENT)]
    assert workflow_redis.xlen(keys.control(proposal.job.name)) == 0  # nothing sent again
    assert AuditEvent.objects.filter(proposal=proposal, action="late_answer").exists()
