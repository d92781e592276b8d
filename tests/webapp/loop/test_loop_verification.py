"""Honest verification on the loop harness (``tests/webapp/loop/harness.py``): a rescale's added lag and
catch-up are measured over its own window, so a later overload is never charged to it, and the
verdict is the capacity error the proposal page shows."""

from __future__ import annotations

from datetime import timedelta

import pytest

from scaling.forecast.prediction import VerdictReason
from scaling.forecast.rescale_cost import LagSample, WindowEnd, lag_s
from tests.webapp.factories import make_user
from tests.webapp.loop.harness import EPOCH, LoopHarness, make_harness, steps
from tests.webapp.loop.test_loop_acceptance import approve_when_pending
from webapp.jobs.models import MetricSnapshot
from webapp.loop.rescale_cost import execution_record_cost
from webapp.proposals.models import Proposal

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("real_stabilization")]

STEP_AT_S = 600.0
OVERLOAD_PER_S = 3000.0


def scale_up_then(monkeypatch, *levels: tuple[float, float]) -> LoopHarness:
    """100 → 600 events/s at 10 min on 1 core; a person approves the scale-up; then ``levels``."""
    h = make_harness(monkeypatch, trace=steps((STEP_AT_S, 100), *levels))
    h.actions.append(approve_when_pending(make_user()))
    return h.run()


def max_lag_s(h: LoopHarness, *, until_s: float = float("inf")) -> float:
    """The largest lag the job showed until ``until_s`` (seconds of input; windows with a batch)."""
    until = EPOCH + timedelta(seconds=min(until_s, h.now_s))
    return max(lag_s(LagSample(0.0, float(s.backlog), s.arrival_rate_per_s))
               for s in MetricSnapshot.objects.filter(job=h.job, batches__gt=0, collected_at__lte=until))


def test_an_overload_after_the_rescale_returned_to_steady_is_not_charged_to_it(monkeypatch):
    """The rescale's backlog is back within a minute; 25 minutes later the load quintuples. Recomputed
    after the overload, the rescale's added lag is what the verification stored right after it."""
    h = scale_up_then(monkeypatch, (STEP_AT_S + 1500, 600), (STEP_AT_S + 2100, OVERLOAD_PER_S))
    (proposal,) = h.executed()
    execution = proposal.execution
    execution_record_cost(execution, now=h.now)  # recomputed after the overload
    assert max_lag_s(h) > 10 * execution.added_lag_s > 0
    assert execution.catch_up_s is not None and execution.catch_up_s < 120
    assert proposal.verification == Proposal.Verification.VERIFIED, proposal.verification_detail
    assert proposal.verification_detail["realized"]["added_lag_s"] == execution.added_lag_s
    assert proposal.verified_at < EPOCH + timedelta(seconds=STEP_AT_S + 1500)


def test_a_load_change_before_the_return_ends_the_rescale_window(monkeypatch):
    """The overload begins while the restart's backlog still drains: the rescale's window ends at the
    load change; its added lag is at most the lag it showed until then, and it never caught up."""
    overload_at_s = STEP_AT_S + 75
    h = scale_up_then(monkeypatch, (overload_at_s, 600), (STEP_AT_S + 675, OVERLOAD_PER_S))
    (proposal,) = h.executed()
    assert proposal.execution.started_at < EPOCH + timedelta(seconds=overload_at_s)
    execution = proposal.execution
    cost = execution_record_cost(execution, now=h.now)
    assert cost.ended_by == WindowEnd.LOAD_CHANGE
    assert 0 < execution.added_lag_s <= max_lag_s(h, until_s=overload_at_s)
    assert execution.catch_up_s is None
    assert max_lag_s(h) > 10 * execution.added_lag_s
    # Its verification cannot judge a prediction made for another load.
    assert proposal.verification == Proposal.Verification.INCONCLUSIVE
    assert proposal.verification_detail["reason"] == VerdictReason.LOAD_CHANGE
