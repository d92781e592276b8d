"""Cross-job throttles (``webapp.loop.throttle``): at most N executions in flight per Spark cluster and
a cooldown between executions on it; a held proposal says why (``ThrottleCode``) on its page and in
the API, and is enqueued again when its slot frees. SQLite and the session's Redis (the control
channel); the worker tests are in ``test_workflow_throttle.py``."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from sparkclient.contract.messages import RescalePath, RescaleResult, ResultStatus, RunnerStatus
from tests.webapp.factories import make_job, make_snapshots, make_user
from webapp.jobs.models import Job, JobPolicy
from webapp.loop.collect import _sync_runner_state
from webapp.loop.evaluate import evaluation_run
from webapp.loop.execute import attempt_send, execution_record_result
from webapp.loop.reconcile import workflow_reconcile
from webapp.loop.throttle import SlotDecision, cluster_key, cluster_state, decide, slot_decision
from webapp.proposals.codes import Actor, AuditAction, AuditReason, Reason, ThrottleCode
from webapp.proposals.lifecycle import TransitionError
from webapp.proposals.models import AuditEvent, Execution, Proposal
from webapp.proposals.rollback import start_rollback
from webapp.proposals.services import proposal_approve

NOW = 1_000_000.0
BUSY, COOLING = ThrottleCode.CLUSTER_BUSY, ThrottleCode.CLUSTER_COOLDOWN


@pytest.mark.parametrize(("in_flight", "limit", "elapsed", "expected"), [
    (0, 1, True, SlotDecision(True)),
    (0, 1, False, SlotDecision(False, COOLING, NOW + 10)),
    (1, 1, True, SlotDecision(False, BUSY)),
    (1, 1, False, SlotDecision(False, BUSY)),
    (2, 1, True, SlotDecision(False, BUSY)),
    (2, 1, False, SlotDecision(False, BUSY)),
    (0, 2, True, SlotDecision(True)),
    (0, 2, False, SlotDecision(False, COOLING, NOW + 10)),
    (1, 2, True, SlotDecision(True)),
    (1, 2, False, SlotDecision(False, COOLING, NOW + 10)),
    (2, 2, True, SlotDecision(False, BUSY)),
    (2, 2, False, SlotDecision(False, BUSY)),
])
def test_the_slot_decision(in_flight, limit, elapsed, expected):
    """Cooldown 30 s; the last execution finished 40 s ago (elapsed) or 20 s ago (not: free 10 s from now)."""
    last = NOW - (40 if elapsed else 20)
    assert slot_decision(in_flight=in_flight, limit=limit, last_finished_at=last, cooldown_s=30, now=NOW) == expected


@pytest.mark.parametrize(("finished_s_ago", "free"), [(30.0, True), (29.5, False)])
def test_the_cooldown_ends_exactly_cooldown_s_after_the_last_execution(finished_s_ago, free):
    decision = slot_decision(in_flight=0, limit=1, last_finished_at=NOW - finished_s_ago, cooldown_s=30, now=NOW)
    assert decision == (SlotDecision(True) if free else SlotDecision(False, COOLING, NOW + 0.5))


@pytest.mark.parametrize(("in_flight", "ahead", "limit", "free"), [
    (0, 1, 1, False), (1, 1, 2, False), (0, 1, 2, True), (1, 0, 2, True)])
def test_proposals_that_waited_longer_take_the_free_slots_first(in_flight, ahead, limit, free):
    decision = slot_decision(in_flight=in_flight, ahead=ahead, limit=limit, last_finished_at=None, cooldown_s=0,
                             now=NOW)
    assert decision == (SlotDecision(True) if free else SlotDecision(False, BUSY))


def test_no_execution_finished_yet_means_no_cooldown_and_bad_settings_are_refused():
    assert slot_decision(in_flight=0, limit=1, last_finished_at=None, cooldown_s=30, now=NOW).free
    with pytest.raises(ValueError):
        slot_decision(in_flight=0, limit=0, last_finished_at=None, cooldown_s=30, now=NOW)
    with pytest.raises(ValueError):
        slot_decision(in_flight=0, limit=1, last_finished_at=None, cooldown_s=-1, now=NOW)


@pytest.mark.parametrize(("master", "ui_url", "key"), [
    ("spark://Master-1:7077/", "http://driver-a:4040", "spark://master-1:7077"),
    ("k8s://https://api.example:6443", "http://10.0.0.5:4040", "k8s://https://api.example:6443"),
    ("yarn", "http://node-3:4041", "yarn"),
    ("local[4]", "http://127.0.0.1:4041", "local@127.0.0.1"),
    ("local", "http://worker-7.example:4040", "local@worker-7.example"),
    ("", "", ""),
    ("local[2]", "not a url", ""),
])
def test_the_cluster_is_the_master_url_or_the_host_in_local_mode(master, ui_url, key):
    assert cluster_key(master, ui_url) == key


def _execution(name: str, *, started_s_ago: float, finished_s_ago: float | None,
               cluster: str = "spark://shared:7077") -> Execution:
    """An execution of job ``name`` on ``cluster``: running (``finished_s_ago`` None) or succeeded."""
    job = make_job(name=name)
    Job.objects.filter(pk=job.pk).update(cluster=cluster)
    now = timezone.now()
    running = finished_s_ago is None
    proposal = Proposal.objects.create(job=job, status="executing" if running else "succeeded", current_config={},
                                       proposed_config={})
    execution = Execution.objects.create(proposal=proposal, status="running" if running else "succeeded",
                                         finished_at=None if running else now - timedelta(seconds=finished_s_ago))
    Execution.objects.filter(pk=execution.pk).update(started_at=now - timedelta(seconds=started_s_ago))
    return Execution.objects.select_related("proposal__job").get(pk=execution.pk)


@pytest.mark.django_db
def test_the_cooldown_runs_from_the_newest_execution_on_the_cluster_and_the_oldest_in_flight_comes_first(
        settings):
    settings.SCALER_CLUSTER_MAX_IN_FLIGHT, settings.SCALER_CLUSTER_COOLDOWN_S = 3, 30
    _execution("older", started_s_ago=200, finished_s_ago=100)
    newer = _execution("newer", started_s_ago=60, finished_s_ago=10)
    _execution("elsewhere", started_s_ago=5, finished_s_ago=1, cluster="spark://other:7077")
    job = Job.objects.get(name="newer")
    assert cluster_state(job) == ([], newer.finished_at)
    decision, reason = decide(job, now=timezone.now())
    assert decision.code == COOLING and reason.data["last_finished_at"] == newer.finished_at.isoformat()
    assert decision.free_at == pytest.approx((newer.finished_at + timedelta(seconds=30)).timestamp())
    late = _execution("late", started_s_ago=5, finished_s_ago=None)
    early = _execution("early", started_s_ago=8, finished_s_ago=None)
    assert cluster_state(job) == ([early.proposal_id, late.proposal_id], newer.finished_at)
    assert cluster_state(job, exclude=early.proposal_id)[0] == [late.proposal_id]


@pytest.mark.django_db
def test_the_runner_reports_its_cluster_and_the_job_adopts_it():
    job = make_job()
    _sync_runner_state(job, RunnerStatus(state="running", master="local[2]", ui_url="http://127.0.0.1:4045"))
    assert Job.objects.get(pk=job.pk).cluster == "local@127.0.0.1"


def _approved(name: str, cluster: str = "spark://shared:7077") -> Proposal:
    job = make_job(name=name, metric_window_s=45)
    Job.objects.filter(pk=job.pk).update(cluster=cluster)
    make_snapshots(job)
    evaluation_run(job=job)
    proposal = job.proposals.get()
    proposal_approve(proposal=proposal, actor=make_user(username=f"op-{name}"))
    return Proposal.objects.select_related("job").get(pk=proposal.pk)


def _succeed(proposal: Proposal) -> Execution:
    execution = Execution.objects.get(proposal=proposal)
    return execution_record_result(execution_id=execution.pk, attempt=1, result=RescaleResult(
        id=execution.exec_id(1), status=ResultStatus.SUCCEEDED, path=RescalePath.IN_PROCESS, downtime_s=1.0,
        knobs=proposal.proposed_config))


@pytest.mark.django_db
def test_with_one_slot_the_second_job_waits_says_why_and_starts_when_the_first_finishes(
        workflow_redis, enqueued, settings, client, django_capture_on_commit_callbacks):
    settings.SCALER_CLUSTER_MAX_IN_FLIGHT, settings.SCALER_CLUSTER_COOLDOWN_S = 1, 0
    first, second = _approved("a"), _approved("b")
    assert attempt_send(proposal_id=first.pk).attempts == 1
    assert attempt_send(proposal_id=second.pk) is None  # held: nothing sent
    second.refresh_from_db()
    assert second.status == "approved" and not Execution.objects.filter(proposal=second).exists()
    assert second.waiting["code"] == BUSY
    assert second.waiting["data"]["cluster"] == "spark://shared:7077"
    assert second.waiting["data"]["in_flight"] == [first.pk] and second.waiting["data"]["limit"] == 1
    [event] = AuditEvent.objects.filter(proposal=second, action=AuditAction.EXECUTION_THROTTLED)
    assert event.reason["code"] == BUSY
    # Visible on the proposal's page and in the API.
    client.force_login(make_user(username="viewer", role="viewer"))
    page = client.get(f"/proposals/{second.pk}/").content.decode()
    assert f'data-code="{BUSY}"' in page and "waiting for a slot on cluster spark://shared:7077" in page
    api = client.get(f"/api/proposals/{second.pk}/").json()
    assert api["waiting"]["code"] == BUSY and api["waiting"]["data"]["in_flight"] == [first.pk]
    # A second try while the first still runs: still held, no second audit event.
    assert attempt_send(proposal_id=second.pk) is None
    assert AuditEvent.objects.filter(proposal=second, action=AuditAction.EXECUTION_THROTTLED).count() == 1
    enqueued.clear()
    with django_capture_on_commit_callbacks(execute=True):
        _succeed(first)
    assert enqueued == [(second.pk, 1, pytest.approx(0.05))]  # woken, after the cooldown (0 s here)
    execution = attempt_send(proposal_id=second.pk)
    second.refresh_from_db()
    assert execution.attempts == 1 and second.status == "executing" and second.waiting == {}


@pytest.mark.django_db
def test_two_slots_let_two_jobs_run_and_hold_the_third(workflow_redis, enqueued, settings):
    settings.SCALER_CLUSTER_MAX_IN_FLIGHT, settings.SCALER_CLUSTER_COOLDOWN_S = 2, 0
    proposals = [_approved(name) for name in ("a", "b", "c")]
    sent = [attempt_send(proposal_id=p.pk) for p in proposals]
    assert [s is not None for s in sent] == [True, True, False]
    proposals[2].refresh_from_db()
    assert proposals[2].waiting["data"]["in_flight"] == [proposals[0].pk, proposals[1].pk]


@pytest.mark.django_db
def test_the_cooldown_holds_the_next_execution_and_requeues_it_for_its_end(workflow_redis, enqueued, settings,
                                                                           django_capture_on_commit_callbacks):
    settings.SCALER_CLUSTER_MAX_IN_FLIGHT, settings.SCALER_CLUSTER_COOLDOWN_S = 1, 60
    first, second = _approved("a"), _approved("b")
    attempt_send(proposal_id=first.pk)
    _succeed(first)
    enqueued.clear()
    with django_capture_on_commit_callbacks(execute=True):
        assert attempt_send(proposal_id=second.pk) is None
    second.refresh_from_db()
    assert second.waiting["code"] == COOLING
    finished = Execution.objects.get(proposal=first).finished_at
    assert second.waiting["data"]["free_at"] == (finished + timedelta(seconds=60)).isoformat()
    [(pk, attempt, countdown)] = enqueued
    assert (pk, attempt) == (second.pk, 1) and 55 < countdown <= 60.1
    # Another job on another cluster is not held by this one's cooldown.
    other = _approved("c", cluster="spark://other:7077")
    assert attempt_send(proposal_id=other.pk) is not None


@pytest.mark.django_db
def test_the_reconcile_beat_enqueues_a_waiting_proposal_once_its_slot_is_free(workflow_redis, enqueued, settings,
                                                                              django_capture_on_commit_callbacks):
    """A lost wake-up (a worker restarted) only delays it: the beat enqueues it again."""
    settings.SCALER_CLUSTER_MAX_IN_FLIGHT, settings.SCALER_CLUSTER_COOLDOWN_S = 1, 0
    first, second = _approved("a"), _approved("b")
    attempt_send(proposal_id=first.pk)
    attempt_send(proposal_id=second.pk)
    with django_capture_on_commit_callbacks(execute=True):
        assert workflow_reconcile()["unthrottled"] == 0  # the first still runs
    Execution.objects.filter(proposal=first).update(status="succeeded", attempt_state="done",
                                                    finished_at=timezone.now())
    enqueued.clear()
    with django_capture_on_commit_callbacks(execute=True):
        assert workflow_reconcile()["unthrottled"] == 1
    assert (second.pk,) in enqueued


@pytest.mark.django_db
def test_a_rollback_is_never_held_and_a_job_without_a_cluster_is_not_throttled(workflow_redis, enqueued, settings):
    settings.SCALER_CLUSTER_MAX_IN_FLIGHT, settings.SCALER_CLUSTER_COOLDOWN_S = 1, 600
    first = _approved("a")
    attempt_send(proposal_id=first.pk)
    _succeed(first)
    first.refresh_from_db()
    rollback = start_rollback(proposal=first, config=first.current_config, actor=Actor.SYSTEM,
                              reason=Reason(AuditReason.ROLLED_BACK_BY, {"actor": "test"}))
    assert attempt_send(proposal_id=rollback.pk) is not None  # inside the cooldown, and sent
    # Two jobs whose runners never reported a cluster: each is its own.
    loose = [_approved(name, cluster="") for name in ("x", "y")]
    assert all(attempt_send(proposal_id=p.pk) is not None for p in loose)


@pytest.mark.django_db
def test_first_come_first_served_a_later_approval_does_not_jump_the_queue(workflow_redis, enqueued, settings):
    settings.SCALER_CLUSTER_MAX_IN_FLIGHT, settings.SCALER_CLUSTER_COOLDOWN_S = 1, 0
    first, second, third = _approved("a"), _approved("b"), _approved("c")
    attempt_send(proposal_id=first.pk)
    assert attempt_send(proposal_id=second.pk) is None and attempt_send(proposal_id=third.pk) is None
    _succeed(first)
    # The third's message comes first: the second waited longer, so the third waits on.
    assert attempt_send(proposal_id=third.pk) is None
    third.refresh_from_db()
    assert third.waiting["code"] == BUSY
    assert third.waiting["data"]["in_flight"] == [] and third.waiting["data"]["ahead"] == [second.pk]
    assert f"1 approved before it waiting (proposal #{second.pk})" in third.waiting_text
    assert attempt_send(proposal_id=second.pk) is not None


@pytest.mark.django_db
def test_a_waiter_that_can_never_run_holds_no_place_in_the_queue(workflow_redis, enqueued, settings):
    """Its job went to advisor mode while it waited: it is not executed, and the next one goes."""
    settings.SCALER_CLUSTER_MAX_IN_FLIGHT, settings.SCALER_CLUSTER_COOLDOWN_S = 1, 0
    first, second, third = _approved("a"), _approved("b"), _approved("c")
    attempt_send(proposal_id=first.pk)
    attempt_send(proposal_id=second.pk)
    _succeed(first)
    JobPolicy.objects.filter(job=second.job).update(mode=JobPolicy.Mode.ADVISOR)
    with pytest.raises(TransitionError, match="advisor mode"):
        attempt_send(proposal_id=second.pk)
    assert Proposal.objects.get(pk=second.pk).waiting == {}
    assert attempt_send(proposal_id=third.pk) is not None
