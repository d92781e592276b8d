"""Every move of the proposal lifecycle (``webapp.proposals.lifecycle.TRANSITIONS``) made through
``transition`` writes one audit event with the old and the new status; a refused move writes none."""

from __future__ import annotations

import pytest

from tests.webapp.factories import make_job, make_user
from webapp.proposals.codes import Actor, AuditAction, AuditReason, Reason
from webapp.proposals.lifecycle import TRANSITIONS, Status, TransitionError, transition
from webapp.proposals.models import AuditEvent, Proposal

pytestmark = pytest.mark.django_db

MOVES = [(source, target) for target, sources in TRANSITIONS.items() for source in sources]
#: For every target, one status it may not be reached from.
REFUSED = [(next(s for s in Status if s not in sources and s != target), target)
           for target, sources in TRANSITIONS.items()]


def _proposal(status: str) -> Proposal:
    job = make_job(name="audited")
    return Proposal.objects.create(job=job, status=status, current_config=job.config,
                                   proposed_config={**job.config, "cores": 2})


@pytest.mark.parametrize("person", [True, False], ids=["person", "system"])
@pytest.mark.parametrize(("source", "target"), MOVES, ids=[f"{s}->{t}" for s, t in MOVES])
def test_a_transition_audits_its_old_and_new_status_and_actor(source, target, person):
    proposal = _proposal(source)
    actor = make_user() if person else Actor.SYSTEM
    reason = Reason(AuditReason.COMMENT, {"text": "t"})
    before = set(AuditEvent.objects.values_list("pk", flat=True))

    moved = transition(proposal=proposal, target=target, actor=actor, reason=reason, audit_after={"extra": 7})

    assert moved.status == target == Proposal.objects.get(pk=proposal.pk).status
    events = list(AuditEvent.objects.exclude(pk__in=before))
    assert len(events) == 1
    event = events[0]
    assert event.action == AuditAction(target)
    assert (event.proposal_id, event.job_id) == (proposal.pk, proposal.job_id)
    assert event.before == {"status": source}
    assert event.after == {"status": target, "extra": 7}
    assert event.reason == reason.as_json()
    if person:
        assert (event.actor_user, event.actor_name) == (actor, actor.get_username())
    else:
        assert (event.actor_user, event.actor_name) == (None, Actor.SYSTEM)


@pytest.mark.parametrize(("source", "target"), REFUSED, ids=[f"{s}->{t}" for s, t in REFUSED])
def test_a_refused_transition_changes_and_audits_nothing(source, target):
    proposal = _proposal(source)
    before = AuditEvent.objects.count()
    with pytest.raises(TransitionError):
        transition(proposal=proposal, target=target, actor=Actor.SYSTEM)
    assert Proposal.objects.get(pk=proposal.pk).status == source
    assert AuditEvent.objects.count() == before
