"""Verification (``webapp.loop.verify``): an execution's realized rates and backlog against its
frozen prediction, recorded once by the reconcile beat."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.webapp.factories import make_pending, make_snapshots
from webapp.loop.reconcile import workflow_reconcile
from webapp.loop.verify import proposal_verify
from webapp.proposals.models import AuditEvent, Execution, Proposal

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
