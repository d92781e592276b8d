"""Workflow pieces on their own: guardrails, policy validation, refused transitions and a manual
rollback (SQLite; not acceptance tests). The loop's steps have their own files (tests/webapp/loop/:
test_backoff, test_reconcile, test_verify, test_execute)."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.utils import timezone

from tests.webapp.factories import make_job, make_pending, make_user
from webapp.jobs.models import JobPolicy
from webapp.proposals.codes import Actor, AuditAction, AuditReason, GuardrailCode, Reason
from webapp.proposals.guardrails import Guardrails, direction, violated_guardrail
from webapp.proposals.lifecycle import TransitionError
from webapp.proposals.models import AuditEvent, Execution, Proposal
from webapp.proposals.rollback import proposal_rollback, suspend_auto_approve
from webapp.proposals.services import auto_approve_resume, proposal_approve, proposal_reject

# --- pure -------------------------------------------------------------------------------------

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
    proposal = make_pending()
    operator = make_user()
    with pytest.raises(PermissionDenied):
        proposal_approve(proposal=proposal, actor=make_user("viewer", role="viewer"))
    proposal_approve(proposal=proposal, actor=operator)
    with pytest.raises(TransitionError, match="is approved, not pending: cannot move it to rejected"):
        proposal_reject(proposal=proposal, actor=operator, comment="too late")
    with pytest.raises(TransitionError, match="cannot move it to rolling_back"):
        proposal_rollback(proposal=proposal, actor=operator)


@pytestmark_db
def test_a_person_rolls_back_a_succeeded_execution(enqueued, django_capture_on_commit_callbacks):
    proposal = make_pending(mode="auto", guard_max_change_factor=8)
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
def test_a_rollback_audits_the_suspension_of_auto_approval_once_with_its_cause(enqueued):
    """The suspension's audit event (the worker tests check it after an automatic rollback): by the system,
    between the proposal's ``rolling_back`` and the rollback's ``proposed``, its reason ``rollback_of`` with the
    proposal and the cause. Suspending again while suspended writes nothing; after a resume it is audited anew."""
    proposal = make_pending(mode="auto", guard_max_change_factor=8)
    Proposal.objects.filter(pk=proposal.pk).update(status="succeeded")
    rollback = proposal_rollback(proposal=Proposal.objects.get(pk=proposal.pk), actor=make_user(),
                                 reason="latency got worse")
    trail = list(AuditEvent.objects.filter(job=proposal.job).order_by("id").values_list("proposal_id", "action"))
    assert trail[-4:] == [(proposal.pk, "rolling_back"), (None, "auto_approve_suspended"), (rollback.pk, "proposed"),
                          (rollback.pk, "approved")]
    suspended = AuditEvent.objects.get(job=proposal.job, action=AuditAction.AUTO_APPROVE_SUSPENDED)
    assert (suspended.actor_name, suspended.before, suspended.after) == (
        Actor.SYSTEM, {"auto_approve_suspended": False}, {"auto_approve_suspended": True})
    assert suspended.reason == {"code": AuditReason.ROLLBACK_OF, "data": {
        "proposal": proposal.pk, "cause": {"code": AuditReason.COMMENT, "data": {"text": "latency got worse"}}}}
    again = Reason(AuditReason.ROLLBACK_OF, {"proposal": proposal.pk, "cause": None})
    suspend_auto_approve(job=proposal.job, reason=again, now=timezone.now())
    assert AuditEvent.objects.filter(job=proposal.job, action=AuditAction.AUTO_APPROVE_SUSPENDED).count() == 1
    auto_approve_resume(job=proposal.job, actor=make_user("olga"))
    suspend_auto_approve(job=proposal.job, reason=again, now=timezone.now())
    assert AuditEvent.objects.filter(job=proposal.job, action=AuditAction.AUTO_APPROVE_SUSPENDED).count() == 2
