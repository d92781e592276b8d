"""The standby prepared while a proposal is pending (``webapp.loop.standby``): which changes need a
new driver, the request sent at each move of the proposal and renewed by the reconcile beat, and
the lost approval's requeue that keeps the decision's time (``webapp.loop.reconcile``)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from sparkclient.contract import keys
from sparkclient.contract.standby import (
    HandoverState,
    StandbyAction,
    StandbyRequest,
    read_standby_request,
    send_standby_request,
)
from tests.webapp.factories import HEAP_KNOB, KNOBS, make_job, make_pending, make_user
from webapp.jobs.models import Job, JobPolicy
from webapp.loop.execute import lease_s
from webapp.loop.reconcile import workflow_reconcile
from webapp.loop.standby import STANDBY_TTL_S, needs_new_driver, standby_status, standby_sync
from webapp.proposals.codes import AuditReason
from webapp.proposals.lifecycle import Status, transition
from webapp.proposals.models import AuditEvent, Proposal
from webapp.proposals.services import proposal_approve, proposal_reject

pytestmark = pytest.mark.django_db

LOCAL = "local@127.0.0.1"


def _local_pending(django_capture_on_commit_callbacks, **policy) -> Proposal:
    """A pending proposal of a job in local mode whose change includes its cores (executors knob)."""
    proposal = make_pending(cluster=LOCAL, commits=django_capture_on_commit_callbacks, **policy)
    assert proposal.proposed_config["cores"] != proposal.current_config["cores"]
    return proposal


def test_a_new_driver_is_needed_for_cores_in_local_mode_or_any_memory_knob():
    job = make_job()
    cores, partitions = {"cores": 2}, {"enrich_partitions": 3}
    Job.objects.filter(pk=job.pk).update(cluster=LOCAL)
    job.refresh_from_db()
    assert needs_new_driver(job, {"cores": 1}, cores)
    assert not needs_new_driver(job, {"enrich_partitions": 1}, partitions)
    Job.objects.filter(pk=job.pk).update(cluster="spark://10.0.0.1:7077",
                                         knobs=[*KNOBS, HEAP_KNOB])
    job.refresh_from_db()
    assert not needs_new_driver(job, {"cores": 1}, cores)  # executors change in place on a cluster
    assert needs_new_driver(job, {"heap_mb": 1024}, {"heap_mb": 2048})


def test_a_pending_proposal_asks_for_a_standby_with_its_knobs(workflow_redis, enqueued,
                                                              django_capture_on_commit_callbacks):
    proposal = _local_pending(django_capture_on_commit_callbacks)
    request = read_standby_request(workflow_redis, proposal.job.name)
    assert request == StandbyRequest(StandbyAction.PREPARE, str(proposal.pk), proposal.proposed_config,
                                     sent_at=request.sent_at, ttl_s=STANDBY_TTL_S)
    assert 0 < workflow_redis.ttl(keys.standby_request(proposal.job.name)) <= STANDBY_TTL_S


@pytest.mark.parametrize("move", ["reject", "withdraw", "expire"])
def test_a_proposal_that_will_not_run_cancels_its_standby(move, workflow_redis, enqueued,
                                                          django_capture_on_commit_callbacks):
    proposal = _local_pending(django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        if move == "reject":
            proposal_reject(proposal=proposal, actor=make_user(), comment="not now")
        elif move == "withdraw":
            transition(proposal=proposal, target=Status.WITHDRAWN, actor="system")
        else:
            workflow_reconcile(now=timezone.now() + timedelta(seconds=proposal.job.policy.proposal_ttl_s + 1))
    request = read_standby_request(workflow_redis, proposal.job.name)
    assert (request.action, request.proposal) == (StandbyAction.CANCEL, str(proposal.pk))


def test_an_approved_proposal_keeps_its_standby_and_the_beat_renews_it(workflow_redis, enqueued,
                                                                       django_capture_on_commit_callbacks):
    proposal = _local_pending(django_capture_on_commit_callbacks)
    name = proposal.job.name
    with django_capture_on_commit_callbacks(execute=True):
        proposal_approve(proposal=proposal, actor=make_user())
    assert read_standby_request(workflow_redis, name).action is StandbyAction.PREPARE
    workflow_redis.expire(keys.standby_request(name), 5)
    assert workflow_reconcile()["standby"] == 1
    assert workflow_redis.ttl(keys.standby_request(name)) > 5


def test_advisor_mode_and_changes_without_a_new_driver_ask_for_nothing(workflow_redis, enqueued,
                                                                       django_capture_on_commit_callbacks):
    proposal = _local_pending(django_capture_on_commit_callbacks, mode=JobPolicy.Mode.ADVISOR)
    assert read_standby_request(workflow_redis, proposal.job.name) is None
    assert standby_sync(proposal.job) is None
    Proposal.objects.filter(pk=proposal.pk).update(proposed_config={**proposal.current_config,
                                                                    "enrich_partitions": 4})
    JobPolicy.objects.filter(job=proposal.job).update(mode=JobPolicy.Mode.MANUAL)
    assert standby_sync(Job.objects.get(pk=proposal.job_id)) is None


def test_the_proposal_page_reads_its_standby_and_its_cost(workflow_redis, enqueued,
                                                           django_capture_on_commit_callbacks):
    proposal = _local_pending(django_capture_on_commit_callbacks)
    assert standby_status(proposal) is None
    workflow_redis.hset(keys.handover(proposal.job.name), mapping={
        "id": "prepared-x", "state": "ready", "proposal": str(proposal.pk), "knobs": '{"cores": 2}',
        "rss_mb": "1490", "cpu_pct": "2.5", "ready_at": "1.5"})
    status = standby_status(proposal)
    assert (status.state, status.rss_mb, status.cpu_pct) == (HandoverState.READY, 1490.0, 2.5)
    workflow_redis.hset(keys.handover(proposal.job.name), "proposal", "999")
    assert standby_status(proposal) is None  # prepared for another proposal


def test_a_requeued_approval_keeps_its_decision_time_and_is_requeued_once_per_lease(enqueued,
                                                                                     django_capture_on_commit_callbacks):
    proposal = make_pending()
    decided = timezone.now()
    Proposal.objects.filter(pk=proposal.pk).update(status=Status.APPROVED, decided_at=decided)
    later = decided + timedelta(seconds=lease_s() + 1)
    with django_capture_on_commit_callbacks(execute=True):
        assert workflow_reconcile(now=later)["restarted"] == 1
        assert workflow_reconcile(now=later + timedelta(seconds=1))["restarted"] == 0  # within the lease
        assert workflow_reconcile(now=later + timedelta(seconds=lease_s() + 2))["restarted"] == 1
    assert Proposal.objects.get(pk=proposal.pk).decided_at == decided
    assert enqueued == [(proposal.pk,), (proposal.pk,)]
    assert AuditEvent.objects.filter(proposal=proposal, reason__code=AuditReason.APPROVAL_REQUEUED).count() == 2


def test_a_malformed_request_left_in_redis_is_cancelled(workflow_redis, enqueued, django_capture_on_commit_callbacks):
    job = make_job()
    workflow_redis.set(keys.standby_request(job.name), "[1, 2")
    assert standby_sync(job) is StandbyAction.CANCEL
    send_standby_request(workflow_redis, job.name, StandbyRequest(StandbyAction.CANCEL, "7"))
    assert standby_sync(job) is None  # cancelled already


def test_the_proposal_page_shows_the_standby_and_what_it_costs(client, workflow_redis, enqueued,
                                                                django_capture_on_commit_callbacks):
    proposal = _local_pending(django_capture_on_commit_callbacks)
    client.force_login(make_user(role="viewer"))
    url = reverse("dashboard:proposal", args=[proposal.pk])
    assert 'id="standby"' not in client.get(url).content.decode()
    workflow_redis.hset(keys.handover(proposal.job.name), mapping={
        "id": "prepared-x", "state": "starting", "proposal": str(proposal.pk), "knobs": '{"cores": 2}'})
    assert "Standby driver (started while the proposal waits, so the approval hands over at once): starting" \
        in client.get(url).content.decode()
    workflow_redis.hset(keys.handover(proposal.job.name),
                        mapping={"state": "ready", "rss_mb": "1490", "cpu_pct": "2.5"})
    assert "ready: 1,490 MB resident, 2.5 % of one core while it waits" in client.get(url).content.decode()
