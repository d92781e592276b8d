"""The lifecycle tables tested as tables (``webapp.proposals.lifecycle``): every move between two
proposal statuses, and between two attempt states, is made through the conditional UPDATE
(:func:`transition`, :func:`attempt_transition`); the moves listed below succeed and every other
one is refused, from every state, leaving the row and the audit trail unchanged.

The allowed moves are written out here, not read from the module: a table that let a withdrawn
proposal be approved, or a rolled-back one be rolled back again, fails these tests.
"""

from __future__ import annotations

import itertools

import pytest

from tests.webapp.factories import make_job
from webapp.proposals.lifecycle import (
    ATTEMPT_TRANSITIONS,
    TERMINAL,
    TRANSITIONS,
    AttemptState,
    ExecutionStatus,
    ProposalStatus,
    TransitionError,
    attempt_transition,
    transition,
)
from webapp.proposals.models import AuditEvent, Execution, Proposal

#: (from, to): the proposal moves the lifecycle allows (the module docstring's diagram).
PROPOSAL_MOVES = {
    ("pending", "approved"), ("pending", "rejected"), ("pending", "superseded"), ("pending", "expired"),
    ("pending", "withdrawn"), ("approved", "executing"), ("executing", "succeeded"), ("executing", "failed"),
    ("succeeded", "rolling_back"), ("failed", "rolling_back"), ("rolling_back", "rolled_back"),
    ("rolling_back", "failed"),
}

#: (from, to): the attempt moves (claim, fail with retries left, finish).
ATTEMPT_MOVES = {("pending", "sent"), ("waiting_retry", "sent"), ("sent", "waiting_retry"), ("sent", "done")}

STATUSES = [s.value for s in ProposalStatus]
STATES = [s.value for s in AttemptState]


def test_the_proposal_table_is_the_lifecycle() -> None:
    assert {(source, target) for target, sources in TRANSITIONS.items() for source in sources} == PROPOSAL_MOVES
    assert TERMINAL == {"rejected", "superseded", "expired", "withdrawn", "rolled_back"}


def test_the_attempt_table_is_the_lifecycle() -> None:
    assert {(source, target) for target, sources in ATTEMPT_TRANSITIONS.items() for source in sources} == ATTEMPT_MOVES


@pytest.mark.django_db
@pytest.mark.parametrize(("source", "target"), list(itertools.product(STATUSES, STATUSES)))
def test_every_proposal_move_through_the_conditional_update(source: str, target: str) -> None:
    proposal = Proposal.objects.create(job=make_job(), status=source)
    if (source, target) in PROPOSAL_MOVES:
        transition(proposal=proposal, target=target, actor="lifecycle-test")
        assert Proposal.objects.get(pk=proposal.pk).status == target
        assert AuditEvent.objects.filter(proposal=proposal).count() == 1
        return
    with pytest.raises(TransitionError, match=f"cannot move it to {target}"):
        transition(proposal=proposal, target=target, actor="lifecycle-test")
    assert Proposal.objects.get(pk=proposal.pk).status == source
    assert not AuditEvent.objects.filter(proposal=proposal).exists()


@pytest.mark.django_db
@pytest.mark.parametrize(("source", "target"), list(itertools.product(STATES, STATES)))
def test_every_attempt_move_through_the_conditional_update(source: str, target: str) -> None:
    proposal = Proposal.objects.create(job=make_job(), status="executing")
    execution = Execution.objects.create(proposal=proposal, attempts=2, attempt_state=source)
    moved = attempt_transition(execution_id=execution.pk, attempts=2, target=target)
    execution.refresh_from_db()
    assert moved is ((source, target) in ATTEMPT_MOVES)
    assert execution.attempt_state == (target if moved else source)
    assert execution.attempts == (3 if moved and target == "sent" else 2)


@pytest.mark.django_db
@pytest.mark.parametrize("outcome", [ExecutionStatus.SUCCEEDED, ExecutionStatus.FAILED])
def test_no_attempt_move_on_a_finished_execution(outcome: str) -> None:
    """An allowed move is refused once the execution has its outcome, and at a stale attempt number."""
    proposal = Proposal.objects.create(job=make_job(), status="executing")
    finished = Execution.objects.create(proposal=proposal, attempts=1, attempt_state="sent", status=outcome)
    assert not any(attempt_transition(execution_id=finished.pk, attempts=1, target=target)
                   for target in ("sent", "waiting_retry", "done"))
    Execution.objects.filter(pk=finished.pk).update(status=ExecutionStatus.RUNNING)
    assert not attempt_transition(execution_id=finished.pk, attempts=0, target="done")
    assert attempt_transition(execution_id=finished.pk, attempts=1, target="done")
