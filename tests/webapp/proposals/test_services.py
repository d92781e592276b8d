"""Decisions (``webapp.proposals.services``): approve and reject, and their audit trail."""

import pytest

from tests.webapp.factories import make_job, make_snapshots, make_user
from webapp.loop.evaluate import evaluation_run
from webapp.proposals.lifecycle import TransitionError
from webapp.proposals.models import AuditEvent, Proposal
from webapp.proposals.services import proposal_approve, proposal_reject

pytestmark = pytest.mark.django_db


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
    assert list(AuditEvent.objects.filter(proposal=proposal).order_by("id").values_list(
        "action", "actor_name", "actor_user")) == [("proposed", "policy:ds2", None), ("approved", "operator", user.pk)]


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
    assert AuditEvent.objects.get(proposal=proposal, action="rejected").reason == {
        "code": "comment", "data": {"text": "peak is over"}}
    assert no_enqueue == []
