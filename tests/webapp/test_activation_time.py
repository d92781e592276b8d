"""DS2's activation time in the live loop (``JobPolicy.activation_evaluations``, issue 14's bench
setting made available to operators): the streak is kept in the job's scaler state between
evaluations, so a scale-up is proposed only when that many evaluations in a row recommend it."""

from __future__ import annotations

import pytest

from tests.webapp.loop import make_harness, steps
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
    assert len(waiting) == required - 1
    for i, evaluation in enumerate(waiting, start=1):
        assert evaluation.decision == "blocked"
        assert any(f"recommended by {i} of {required} consecutive evaluations" in r for r in evaluation.reasons)
    assert h.job.scaler_state.get("activation_streak", 0) == 0  # reset once the rescale was proposed
