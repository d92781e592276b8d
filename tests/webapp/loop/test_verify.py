"""Verification (``webapp.loop.verify``): an execution's realized rates and backlog against its
frozen prediction, recorded once by the reconcile beat."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from scaling.forecast.prediction import VerdictReason
from scaling.values.readiness import NotReady, SampleIssue
from tests.webapp.factories import make_pending, make_snapshots, make_user
from webapp.jobs.models import JobPolicy, MetricSnapshot, VertexSnapshot
from webapp.loop.reconcile import workflow_reconcile
from webapp.loop.verify import proposal_verify
from webapp.proposals.codes import Actor, AuditAction, AuditReason
from webapp.proposals.models import AuditEvent, Execution, Proposal
from webapp.proposals.predictions import realized

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("enrich_busy_s, backlog_step, arrival, expected, enrich_busy_max_s", [
    (15.0, 0, 900.0, "verified", None),        # same per-core rate, backlog flat
    (15.0, 5000, 900.0, "ineffective", None),  # backlog keeps growing
    (60.0, 0, 900.0, "ineffective", None),     # enrich got 4x slower per core than predicted
    (15.0, 0, 3000.0, "inconclusive", None),   # the load changed: the prediction does not apply
    (15.0, 0, 900.0, "ineffective", 60.0),     # same mean, but its slowest task sets a 4x slower pace
])
def test_verification_compares_realized_rates_and_backlog_with_the_prediction(
        enqueued, enrich_busy_s, backlog_step, arrival, expected, enrich_busy_max_s):
    proposal = make_pending(verification_windows=2)
    done_at = timezone.now()
    Proposal.objects.filter(pk=proposal.pk).update(status="succeeded")
    Execution.objects.create(proposal=proposal, status="succeeded", attempts=1, attempt_state="done",
                             finished_at=done_at)
    later = done_at + timedelta(seconds=100)
    make_snapshots(proposal.job, count=6, end=later, enrich_busy_s=enrich_busy_s, backlog_step=backlog_step,
                   arrival=arrival, enrich_busy_max_s=enrich_busy_max_s, cores=proposal.prediction["cores_new"])
    assert workflow_reconcile(now=later)["verified"] == 1
    proposal.refresh_from_db()
    assert proposal.verification == expected, proposal.verification_detail
    assert AuditEvent.objects.filter(proposal=proposal, action=f"verification_{expected}").exists()
    assert proposal_verify(proposal=proposal, now=later) is None  # recorded once


def _succeeded(proposal: Proposal, *, capacity_error: float | None = None, **snapshots) -> datetime:
    """Mark ``proposal`` executed now and give the new configuration 100 s of snapshots (its cores);
    with ``capacity_error``, the frozen predicted capacity is set so that the realized one misses it
    by that share. Returns when to verify."""
    done_at = timezone.now()
    Proposal.objects.filter(pk=proposal.pk).update(status="succeeded")
    Execution.objects.create(proposal=proposal, status="succeeded", attempts=1, attempt_state="done",
                             finished_at=done_at)
    later = done_at + timedelta(seconds=100)
    rows = make_snapshots(proposal.job, count=6, end=later, cores=proposal.prediction["cores_new"], **snapshots)
    if capacity_error is not None:
        measured = realized(plan=proposal.job_plan, after=rows, finished_at=done_at, downtime_s=None,
                            vertices=list(VertexSnapshot.objects.filter(snapshot__in=rows)))["capacity_per_s"]
        Proposal.objects.filter(pk=proposal.pk).update(
            prediction={**proposal.prediction, "capacity_per_s": round(measured / (1 + capacity_error), 3)})
    return later


@pytest.mark.parametrize("error, expected", [
    (-0.167, "ineffective"),   # proposal #1: 817 predicted, 681 realized
    (-0.11, "ineffective"),
    (-0.05, "verified"),
    (0.0, "verified"),
    (0.05, "verified"),
    (0.11, "inconclusive"),    # better than predicted: the prediction does not describe the job
    (0.167, "inconclusive"),
])
def test_the_verdict_is_the_error_of_the_capacities_the_page_shows(enqueued, client, error, expected):
    proposal = make_pending(verification_windows=2)
    later = _succeeded(proposal, capacity_error=error, backlog_step=0)
    proposal_verify(proposal=Proposal.objects.get(pk=proposal.pk), now=later)
    proposal.refresh_from_db()
    assert proposal.verification == expected, proposal.verification_detail
    detail = proposal.verification_detail
    predicted, measured = proposal.prediction["capacity_per_s"], detail["realized"]["capacity_per_s"]
    assert detail["error"] == pytest.approx(measured / predicted - 1, abs=1e-4)
    assert detail["error"] == pytest.approx(error, abs=1e-3)
    assert detail["tolerance"] == 0.1
    client.force_login(make_user("viewer", role="viewer"))
    html = client.get(f"/proposals/{proposal.pk}/").content.decode()
    where = "within" if abs(error) <= 0.1 else "outside"
    sign = "−" if error < 0 else "+"
    stated = (f"capacity {measured:,.0f} rec/s realized vs {predicted:,.0f} predicted: {sign}{abs(error) * 100:.1f} %, "
              f"{where} ±10 %")
    assert stated in html
    assert f'id="realized-capacity" class="realized">{measured:,.0f} rec/s' in html


def test_an_inconclusive_verdict_in_auto_mode_suspends_auto_approval_until_a_person_resumes_it(enqueued, client):
    proposal = make_pending(verification_windows=2, mode="auto")
    later = _succeeded(proposal, arrival=3000.0, backlog_step=0)  # the load changed: the prediction does not apply
    proposal_verify(proposal=Proposal.objects.get(pk=proposal.pk), now=later)
    proposal.refresh_from_db()
    assert proposal.verification == Proposal.Verification.INCONCLUSIVE
    policy = JobPolicy.objects.get(job=proposal.job)
    assert policy.auto_approve_suspended and policy.auto_approve_suspended_at == later
    event = AuditEvent.objects.get(job=proposal.job, action=AuditAction.AUTO_APPROVE_SUSPENDED)
    assert (event.actor_name, event.reason["code"], event.reason["data"]["proposal"]) == (
        Actor.VERIFICATION, AuditReason.INCONCLUSIVE_VERIFICATION, proposal.pk)
    assert event.reason["data"]["verdict"]["code"] == VerdictReason.ARRIVAL_SHIFT
    operator = make_user("op")
    client.force_login(operator)
    html = client.get(f"/proposals/{proposal.pk}/").content.decode()
    assert 'id="auto-approval-suspended"' in html and f"proposal #{proposal.pk} could not be verified" in html
    assert 'id="clear-suspension"' in client.get(f"/jobs/{proposal.job.pk}/").content.decode()
    assert client.post(f"/jobs/{proposal.job.pk}/suspension/clear/").status_code == 302
    assert not JobPolicy.objects.get(job=proposal.job).auto_approve_suspended
    assert AuditEvent.objects.filter(job=proposal.job, action=AuditAction.AUTO_APPROVE_RESUMED).exists()


def test_an_inconclusive_verdict_in_manual_mode_suspends_nothing(enqueued):
    proposal = make_pending(verification_windows=2)
    later = _succeeded(proposal, arrival=3000.0, backlog_step=0)
    proposal_verify(proposal=Proposal.objects.get(pk=proposal.pk), now=later)
    assert Proposal.objects.get(pk=proposal.pk).verification == Proposal.Verification.INCONCLUSIVE
    assert not JobPolicy.objects.get(job=proposal.job).auto_approve_suspended


def test_a_sample_not_ready_in_the_judged_window_makes_the_verdict_inconclusive(enqueued):
    """Capacity as predicted, but the SQL plan of the newest sample was unusable: nothing is verified
    on incomplete metrics."""
    proposal = make_pending(verification_windows=2)
    later = _succeeded(proposal, capacity_error=0.0, backlog_step=0)
    issue = SampleIssue(NotReady.SQL_PLAN_UNUSABLE, {"sources": 2, "source_stages": 1})
    MetricSnapshot.objects.filter(job=proposal.job, collected_at=later).update(not_ready=[issue.to_json()])
    proposal_verify(proposal=Proposal.objects.get(pk=proposal.pk), now=later)
    proposal.refresh_from_db()
    assert proposal.verification == Proposal.Verification.INCONCLUSIVE
    verdict = proposal.verification_detail["verdict"]
    assert (verdict["code"], verdict["data"]["samples"], verdict["data"]["issues"]) == (
        VerdictReason.NOT_READY, 1, [issue.to_json()])
    assert verdict["data"]["error"] == pytest.approx(0.0, abs=1e-3)


def test_an_inconclusive_verdict_on_no_batch_states_the_batches_of_the_window_it_judged(enqueued):
    """Batches right after the change, then a metric window with none: the verdict is "no batch", and
    the realized figures beside it count the batches and seconds of that same window, not of the whole
    time since the change."""
    proposal = make_pending(verification_windows=2)
    later = _succeeded(proposal, backlog_step=0)
    policy = JobPolicy.objects.get(job=proposal.job)
    quiet = [later + timedelta(seconds=15 * (i + 1)) for i in range(int(policy.metric_window_s // 15) + 2)]
    for at in quiet:
        MetricSnapshot.objects.create(job=proposal.job, collected_at=at, run_id="run-1", config=proposal.job.config,
                                      window_s=15.0, batches=0)
    proposal_verify(proposal=Proposal.objects.get(pk=proposal.pk), now=quiet[-1])
    proposal.refresh_from_db()
    assert proposal.verification == Proposal.Verification.INCONCLUSIVE
    assert proposal.verification_detail["reason"] == VerdictReason.NO_BATCHES
    assert proposal.verification_detail["realized"]["batches"] == 0
