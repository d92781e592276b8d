"""The reconcile beat (``webapp.loop.reconcile``): expiry, answers a dead worker never read, lost
retries enqueued again once."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from sparkclient.contract import keys
from sparkclient.contract.messages import RescalePath, RescaleResult, ResultStatus
from tests.webapp.factories import make_pending
from webapp.jobs.models import Job
from webapp.loop.reconcile import workflow_reconcile
from webapp.proposals.codes import AuditReason
from webapp.proposals.models import AuditEvent, Execution, Proposal

pytestmark = pytest.mark.django_db


def test_pending_proposals_expire(enqueued):
    proposal = make_pending(proposal_ttl_s=60)
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


def test_reconcile_records_the_answer_a_dead_worker_never_read(workflow_redis, enqueued):
    proposal = make_pending()
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


def test_reconcile_restarts_a_lost_retry_once(enqueued, django_capture_on_commit_callbacks):
    proposal = make_pending()
    execution = _executing(proposal, attempt_state="waiting_retry", lease_in_s=-1)
    with django_capture_on_commit_callbacks(execute=True):
        workflow_reconcile()
        workflow_reconcile()  # the lease was pushed: not enqueued twice
    assert enqueued == [(proposal.pk, 2, 0.0)]
    assert Execution.objects.get(pk=execution.pk).lease_expires_at > timezone.now()
