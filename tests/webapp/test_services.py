"""Services: evaluation -> proposal, the proposal transitions and the audit trail."""

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.webapp.factories import make_job, make_snapshots, make_user
from webapp.jobs.services import evaluation_run
from webapp.proposals.models import AuditEvent, Proposal
from webapp.proposals.services import TransitionError, proposal_approve, proposal_reject

pytestmark = pytest.mark.django_db


@pytest.fixture
def no_enqueue(monkeypatch):
    """Record enqueued executions instead of sending them to a broker."""
    sent = []
    monkeypatch.setattr("webapp.proposals.tasks.proposal_execute.delay", lambda pk: sent.append(pk))
    return sent


def test_under_provisioned_window_creates_a_scale_up_proposal():
    job = make_job(metric_window_s=45)
    make_snapshots(job, count=4)
    evaluation = evaluation_run(job=job)
    assert evaluation.decision == "scale"
    proposal = job.proposals.get()
    assert proposal.status == Proposal.Status.PENDING
    assert proposal.current_config["cores"] == 1
    # The enrich stage is busy 15 s per 15 s window on one core at 450 rec/s: it needs more cores.
    assert proposal.proposed_config["cores"] > 1
    assert proposal.proposed_config["enrich_partitions"] == proposal.proposed_config["cores"]
    assert proposal.proposed_config["state_partitions"] == 2  # pinned by the checkpoint
    assert "above the utilization band" in proposal.reasons[0]
    assert AuditEvent.objects.filter(proposal=proposal, action="proposed", actor="policy:ds2").exists()


def test_window_not_full_gives_no_evaluation():
    job = make_job(metric_window_s=120)
    make_snapshots(job, count=2)
    assert evaluation_run(job=job) is None
    assert not job.proposals.exists()


def test_same_plan_keeps_the_pending_proposal_and_a_different_one_supersedes_it():
    job = make_job(metric_window_s=45)
    make_snapshots(job, count=4)
    first = evaluation_run(job=job)
    evaluation_run(job=job)
    assert job.proposals.count() == 1
    later = timezone.now() + timedelta(seconds=60)
    make_snapshots(job, count=4, backlog_step=50_000, end=later)  # a large backlog to catch up on
    evaluation_run(job=job, now=later)
    statuses = sorted(job.proposals.values_list("status", flat=True))
    assert statuses == ["pending", "superseded"]
    assert job.proposals.get(status="superseded").evaluation == first


def test_approve_once_then_refused(no_enqueue, django_capture_on_commit_callbacks):
    job = make_job(metric_window_s=45)
    make_snapshots(job)
    evaluation_run(job=job)
    proposal = job.proposals.get()
    user = make_user()
    with django_capture_on_commit_callbacks(execute=True):
        proposal_approve(proposal=proposal, actor=user)
    assert no_enqueue == [proposal.pk]
    with pytest.raises(TransitionError, match="is approved, not pending"):
        proposal_approve(proposal=Proposal.objects.get(pk=proposal.pk), actor=user)
    assert no_enqueue == [proposal.pk]
    assert list(AuditEvent.objects.filter(proposal=proposal).order_by("id").values_list("action", "actor")) == [
        ("proposed", "policy:ds2"), ("approved", "operator")]


def test_reject_needs_a_comment_and_advisor_mode_never_approves(no_enqueue):
    job = make_job(metric_window_s=45, mode="advisor")
    make_snapshots(job)
    evaluation_run(job=job)
    proposal = job.proposals.get()
    user = make_user()
    with pytest.raises(TransitionError, match="advisor mode"):
        proposal_approve(proposal=proposal, actor=user)
    with pytest.raises(ValueError, match="comment is required"):
        proposal_reject(proposal=proposal, actor=user, comment="  ")
    proposal = proposal_reject(proposal=proposal, actor=user, comment="peak is over")
    assert proposal.status == "rejected" and proposal.comment == "peak is over"
    assert no_enqueue == []


def test_metrics_right_after_a_restart_are_not_evaluated(settings):
    """FLIP-271 stabilization: the first SCALER_STABILIZATION_S seconds of a run are ignored."""
    settings.SCALER_STABILIZATION_S = 30
    job = make_job(metric_window_s=45)
    make_snapshots(job, count=4)  # one run, 60 s of snapshots: only the last 30 s are stable
    assert evaluation_run(job=job) is None
    make_snapshots(job, count=2, end=timezone.now() + timedelta(seconds=30))  # same run, 30 s later
    evaluation = evaluation_run(job=job, now=timezone.now() + timedelta(seconds=30))
    assert evaluation is not None and evaluation.window_s == pytest.approx(45.0)
