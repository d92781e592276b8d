"""DS2's activation time in the live loop (``JobPolicy.activation_evaluations``, the bench's
setting made available to operators): the streak is kept in the job's scaler state between
evaluations, so a scale-up is proposed only when that many evaluations in a row recommend it."""

from __future__ import annotations

import pytest

from scaling.values.reasons import PlanReason
from tests.webapp.loop.harness import make_harness, steps
from webapp.jobs.models import Evaluation
from webapp.proposals.models import Proposal

pytestmark = [pytest.mark.django_db]


def first_proposal_at(h) -> tuple[float, list[Evaluation]]:
    first = h.job.proposals.filter(kind=Proposal.Kind.SCALE).order_by("created_at").first()
    assert first is not None, "no proposal"
    before = list(h.job.evaluations.filter(created_at__lt=first.created_at, direction=Evaluation.Direction.UP)
                  .order_by("created_at"))
    return first.created_at.timestamp(), before


@pytest.mark.parametrize("required", [1, 3])
def test_a_step_up_is_proposed_after_the_required_evaluations_in_a_row(monkeypatch, required):
    trace = steps((600.0, 100), (1200.0, 600))
    h = make_harness(monkeypatch, trace=trace, policy={"activation_evaluations": required}).run()
    _, waiting = first_proposal_at(h)
    first = h.job.proposals.filter(kind=Proposal.Kind.SCALE).order_by("created_at").first()
    assert len(waiting) == required - 1
    for i, evaluation in enumerate(waiting, start=1):
        assert evaluation.decision == "blocked"
        activation = [r for r in evaluation.reason_values if r.code == PlanReason.ACTIVATION_PENDING]
        assert [(r.data["direction"], r.data["count"], r.data["required"]) for r in activation] == [("up", i, required)]
    # While the proposal waits for a decision, the evaluations that go on recommending the same
    # scale-up stay activated: none of them starts the activation time over.
    after = list(h.job.evaluations.filter(created_at__gt=first.created_at).order_by("created_at"))
    assert after and all(e.direction == Evaluation.Direction.UP for e in after)
    assert [e for e in after if PlanReason.ACTIVATION_PENDING in {r.code for r in e.reason_values}] == []
    assert h.job.scaler_state.get("activation_streak", 0) == (required if required > 1 else 0)
    assert h.job.proposals.filter(kind=Proposal.Kind.SCALE).count() == 1


def test_an_executed_rescale_starts_the_activation_time_over():
    """``ScalerState.with_records`` (the execution's record of the applied scaling) resets the streak."""
    from scaling.policy.policy import Policy
    from scaling.values.state import ScalerState, ScalingRecord, activated_streak

    state = ScalerState(activation_streak=activated_streak(Policy(activation_evaluations=3), 1))
    assert state.activation_streak == 3
    assert state.with_records((ScalingRecord(0.0, "executors", 1, 2, 10.0, 10.0),)).activation_streak == 0
    assert activated_streak(Policy(activation_evaluations=1), 1) == 0
    assert activated_streak(Policy(activation_evaluations=2), -1) == -2
