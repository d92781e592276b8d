"""Workflow pieces on their own: back-off strategies, guardrails, policy validation, expiry,
reconcile paths, manual rollback and verification (SQLite; not acceptance tests)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.utils import timezone

from sparkclient.contract import keys
from sparkclient.contract.control import RescalePath, RescaleResult, ResultStatus
from tests.webapp.factories import make_job, make_snapshots, make_user
from webapp.jobs.models import Job, JobPolicy
from webapp.loop.evaluate import evaluation_run
from webapp.loop.backoff import RestartStrategy, RetryDecision, next_retry
from webapp.proposals.codes import AuditReason, GuardrailCode, Reason, RetryCode
from webapp.proposals.guardrails import Guardrails, direction, violated_guardrail
from webapp.proposals.models import AuditEvent, Execution, Proposal
from webapp.loop.execute import attempt_send
from webapp.loop.reconcile import workflow_reconcile
from webapp.proposals.lifecycle import TransitionError
from webapp.proposals.rollback import proposal_rollback
from webapp.proposals.services import proposal_approve, proposal_reject
from webapp.loop.verify import proposal_verify


# --- pure -------------------------------------------------------------------------------------

def test_fixed_delay_retries_then_gives_up():
    strategy = RestartStrategy(kind="fixed-delay", attempts=2, delay_s=3)
    assert next_retry(strategy, [0], 0).delay_s == 3
    assert next_retry(strategy, [0, 1], 1).delay_s == 3
    assert next_retry(strategy, [0, 1, 2], 2) == RetryDecision(None, RetryCode.RETRIES_SPENT,
                                                               {"strategy": "fixed-delay", "attempts": 2})


def test_exponential_delay_grows_and_is_capped():
    strategy = RestartStrategy(kind="exponential-delay", attempts=5, delay_s=1, multiplier=3, max_delay_s=5)
    delays = [next_retry(strategy, [0] * n, 0).delay_s for n in range(1, 7)]
    assert delays == [1, 3, 5, 5, 5, None]


def test_failure_rate_counts_failures_inside_the_interval():
    strategy = RestartStrategy(kind="failure-rate", max_failures_per_interval=2, interval_s=60, delay_s=1)
    assert next_retry(strategy, [0, 10], 20).retry
    assert next_retry(strategy, [0, 10, 20], 21) == RetryDecision(
        None, RetryCode.FAILURE_RATE_EXCEEDED, {"failures": 3, "interval_s": 60, "max_failures": 2})
    assert next_retry(strategy, [0, 10, 100], 101).retry  # the first two fell out of the interval
    assert next_retry(RestartStrategy(kind="none"), [0], 0) == RetryDecision(None, RetryCode.NO_RESTART)


def test_guardrails_name_what_they_refuse():
    now = 0.0
    current = {"cores": 2, "a_partitions": 2, "trigger_interval_s": 2}
    knobs = {"scaled_knobs": frozenset({"cores", "a_partitions"}), "executors_knob": "cores"}
    rails = Guardrails(max_change_factor=2, max_executors=4, directions="up", **knobs)
    assert direction(rails, current, {**current, "cores": 4}) == "up"
    assert direction(rails, current, {**current, "a_partitions": 1}) == "down"
    # a knob that sets no parallelism (the pipeline declares it "other") is never a scaling direction
    assert direction(rails, current, {**current, "trigger_interval_s": 9}) == "none"
    assert violated_guardrail(rails, current, {**current, "cores": 4, "a_partitions": 4}, now) is None
    assert violated_guardrail(rails, current, {**current, "cores": 3, "a_partitions": 5}, now) == Reason(
        GuardrailCode.MAX_CHANGE_FACTOR, {"knob": "a_partitions", "old": 2, "new": 5, "factor": 2.5, "max": 2})
    assert violated_guardrail(rails, current, {**current, "cores": 5}, now) == Reason(
        GuardrailCode.MAX_EXECUTORS, {"executors": 5, "max": 4})
    assert violated_guardrail(rails, current, {**current, "cores": 1}, now) == Reason(
        GuardrailCode.DIRECTIONS, {"direction": "down", "allowed": "up"})
    closed = Guardrails(max_change_factor=2, max_executors=4, excluded_periods=("00:00-00:10",), **knobs)
    assert violated_guardrail(closed, current, {**current, "cores": 3}, 60.0) == Reason(
        GuardrailCode.EXCLUDED_PERIODS, {"period": "00:00-00:10"})


# --- with the database --------------------------------------------------------------------------

pytestmark_db = pytest.mark.django_db




def _pending(**policy) -> Proposal:
    job = make_job(metric_window_s=45, **policy)
    make_snapshots(job)
    evaluation_run(job=job)
    return job.proposals.get()


@pytestmark_db
def test_policy_validation_names_the_field():
    job = make_job()
    policy = JobPolicy.objects.get(job=job)
    policy.full_clean()
    policy.excluded_periods = ["25:00-26:00"]
    policy.guard_excluded_periods = ["not a period"]
    policy.algorithm = "no-such-policy"
    with pytest.raises(ValidationError) as error:
        policy.full_clean()
    assert {"excluded_periods", "guard_excluded_periods"} <= set(error.value.message_dict)
    policy.excluded_periods = []
    policy.guard_excluded_periods = []
    with pytest.raises(ValidationError) as error:
        policy.full_clean()
    assert "algorithm" in error.value.message_dict
    for field in JobPolicy._meta.concrete_fields:
        if field.name not in ("id", "job", "auto_approve_suspended_at"):
            assert field.help_text, f"{field.name} has no help text"


@pytestmark_db
def test_illegal_transitions_and_viewers_are_refused(enqueued):
    proposal = _pending()
    operator = make_user()
    with pytest.raises(PermissionDenied):
        proposal_approve(proposal=proposal, actor=make_user("viewer", role="viewer"))
    proposal_approve(proposal=proposal, actor=operator)
    with pytest.raises(TransitionError, match="is approved, not pending: cannot move it to rejected"):
        proposal_reject(proposal=proposal, actor=operator, comment="too late")
    with pytest.raises(TransitionError, match="cannot move it to rolling_back"):
        proposal_rollback(proposal=proposal, actor=operator)


@pytestmark_db
def test_pending_proposals_expire(enqueued):
    proposal = _pending(proposal_ttl_s=60)
    workflow_reconcile(now=timezone.now() + timedelta(seconds=30))
    assert Proposal.objects.get(pk=proposal.pk).status == "pending"
    assert workflow_reconcile(now=timezone.now() + timedelta(seconds=90))["expired"] == 1
    assert Proposal.objects.get(pk=proposal.pk).status == "expired"
    event = AuditEvent.objects.get(proposal=proposal, action="expired")
    assert (event.actor_name, event.actor_user, event.reason["code"]) == ("system", None, "no_decision_in_time")


def _executing(proposal: Proposal, *, attempt_state: str, lease_in_s: float) -> Execution:
    Proposal.objects.filter(pk=proposal.pk).update(status="executing")
    return Execution.objects.create(proposal=proposal, attempts=1, attempt_state=attempt_state,
                                    lease_expires_at=timezone.now() + timedelta(seconds=lease_in_s))


@pytestmark_db
def test_reconcile_records_the_answer_a_dead_worker_never_read(workflow_redis, enqueued):
    proposal = _pending()
    execution = _executing(proposal, attempt_state="sent", lease_in_s=-1)
    workflow_redis.set(keys.control_result(proposal.job.name, execution.exec_id()),
                       RescaleResult(id=execution.exec_id(), status=ResultStatus.SUCCEEDED,
                                     path=RescalePath.IN_PROCESS, downtime_s=1.2).to_json())
    assert workflow_reconcile()["reconciled"] == 1
    proposal.refresh_from_db()
    assert proposal.status == "succeeded"
    assert AuditEvent.objects.get(proposal=proposal, action="reconciled").reason == {
        "code": AuditReason.LEASE_ANSWERED, "data": {"attempt": 1, "status": "succeeded"}}
    assert Job.objects.get(pk=proposal.job_id).config == proposal.proposed_config


@pytestmark_db
def test_reconcile_restarts_a_lost_retry_once(enqueued, django_capture_on_commit_callbacks):
    proposal = _pending()
    execution = _executing(proposal, attempt_state="waiting_retry", lease_in_s=-1)
    with django_capture_on_commit_callbacks(execute=True):
        workflow_reconcile()
        workflow_reconcile()  # the lease was pushed: not enqueued twice
    assert enqueued == [(proposal.pk, 2, 0.0)]
    assert Execution.objects.get(pk=execution.pk).lease_expires_at > timezone.now()


@pytestmark_db
def test_a_person_rolls_back_a_succeeded_execution(enqueued, django_capture_on_commit_callbacks):
    proposal = _pending(mode="auto", guard_max_change_factor=8)
    Proposal.objects.filter(pk=proposal.pk).update(status="succeeded")
    Execution.objects.create(proposal=proposal, status="succeeded", attempts=1, attempt_state="done",
                             finished_at=timezone.now())
    with django_capture_on_commit_callbacks(execute=True):
        rollback = proposal_rollback(proposal=Proposal.objects.get(pk=proposal.pk), actor=make_user(),
                                     reason="latency got worse")
    assert rollback.kind == "rollback" and rollback.status == "approved"
    assert rollback.proposed_config == proposal.current_config
    assert Proposal.objects.get(pk=proposal.pk).status == "rolling_back"
    assert enqueued[-1] == (rollback.pk,)
    policy = JobPolicy.objects.get(job=proposal.job)
    assert policy.auto_approve_suspended and "latency got worse" in policy.auto_approve_suspended_reason


@pytestmark_db
@pytest.mark.parametrize("enrich_busy_s, backlog_step, arrival, expected, enrich_busy_max_s", [
    (15.0, 0, 900.0, "verified", None),        # same per-core rate, backlog flat
    (15.0, 5000, 900.0, "ineffective", None),  # backlog keeps growing
    (60.0, 0, 900.0, "ineffective", None),     # enrich got 4x slower per core than predicted
    (15.0, 0, 3000.0, "inconclusive", None),   # the load changed: the prediction does not apply
    (15.0, 0, 900.0, "ineffective", 60.0),     # same mean, but its slowest task sets a 4x slower pace
])
def test_verification_compares_realized_rates_and_backlog_with_the_prediction(
        enqueued, enrich_busy_s, backlog_step, arrival, expected, enrich_busy_max_s):
    proposal = _pending(verification_windows=2)
    done_at = timezone.now()
    Proposal.objects.filter(pk=proposal.pk).update(status="succeeded")
    Execution.objects.create(proposal=proposal, status="succeeded", attempts=1, attempt_state="done",
                             finished_at=done_at)
    later = done_at + timedelta(seconds=100)
    make_snapshots(proposal.job, count=6, end=later, enrich_busy_s=enrich_busy_s, backlog_step=backlog_step,
                   arrival=arrival, enrich_busy_max_s=enrich_busy_max_s)
    assert workflow_reconcile(now=later)["verified"] == 1
    proposal.refresh_from_db()
    assert proposal.verification == expected, proposal.verification_detail
    assert AuditEvent.objects.filter(proposal=proposal, action=f"verification_{expected}").exists()
    assert proposal_verify(proposal=proposal, now=later) is None  # recorded once


@pytestmark_db
def test_a_late_answer_to_a_timed_out_attempt_is_the_outcome(workflow_redis, enqueued):
    proposal = _pending()
    Proposal.objects.filter(pk=proposal.pk).update(status="executing")
    execution = Execution.objects.create(proposal=proposal, attempts=1, attempt_state="waiting_retry")
    workflow_redis.set(keys.control_result(proposal.job.name, execution.exec_id(1)),
                       RescaleResult(id=execution.exec_id(1), status=ResultStatus.SUCCEEDED,
                                     path=RescalePath.DRIVER_RESTART, downtime_s=14.0).to_json())
    execution = attempt_send(proposal_id=proposal.pk, attempt=2)
    assert execution.status == "succeeded" and execution.path == "driver-restart" and execution.downtime_s == 14.0
    assert workflow_redis.xlen(keys.control(proposal.job.name)) == 0  # nothing sent again
    assert AuditEvent.objects.filter(proposal=proposal, action="late_answer").exists()
