"""The role check of every decision service, called directly (not through a view or the API):
approve, reject, roll back, resume auto-approval, apply a held scale-down now and clear a
scale-up block each refuse a user without the operator role (``PermissionDenied``) and change
nothing: no status, no policy, no job field, no audit event, nothing enqueued. Operators and
admins get past the check (the positive control: a check that refused everyone would fail here).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import PermissionDenied

from tests.webapp.factories import make_pending, make_user
from webapp.jobs.models import Job, JobPolicy
from webapp.proposals.holds import scale_up_block_clear
from webapp.proposals.lifecycle import TransitionError
from webapp.proposals.models import AuditEvent, Proposal
from webapp.proposals.rollback import proposal_rollback
from webapp.proposals.services import auto_approve_resume, proposal_approve, proposal_reject, scale_down_apply_now

pytestmark = pytest.mark.django_db


def _succeeded() -> Proposal:
    proposal = make_pending()
    Proposal.objects.filter(pk=proposal.pk).update(status=Proposal.Status.SUCCEEDED)
    proposal.refresh_from_db()
    return proposal


def _suspended() -> Proposal:
    proposal = make_pending()
    JobPolicy.objects.filter(job=proposal.job).update(auto_approve_suspended=True,
                                                      auto_approve_suspended_reason="rolled back")
    return proposal


def _blocked() -> Proposal:
    proposal = make_pending()
    Job.objects.filter(pk=proposal.job_id).update(scale_up_block={"knobs": ["cores"]})
    return proposal


#: service -> (the state it acts on, the call). Each call is the service function itself.
SERVICES: dict[str, tuple[Callable[[], Proposal], Callable]] = {
    "approve": (make_pending, lambda p, actor: proposal_approve(proposal=p, actor=actor)),
    "reject": (make_pending, lambda p, actor: proposal_reject(proposal=p, actor=actor, comment="no")),
    "rollback": (_succeeded, lambda p, actor: proposal_rollback(proposal=p, actor=actor)),
    "resume auto-approve": (_suspended, lambda p, actor: auto_approve_resume(job=p.job, actor=actor)),
    "apply scale-down now": (make_pending, lambda p, actor: scale_down_apply_now(job=p.job, actor=actor)),
    "clear scale-up block": (_blocked, lambda p, actor: scale_up_block_clear(job=p.job, actor=actor)),
}

NOT_OPERATORS: dict[str, Callable] = {
    "viewer": lambda: make_user("vera", role="viewer"),
    "no role": lambda: make_user("nora", role=None),
    "inactive operator": lambda: make_user("ida", role="operator", is_active=False),
    "anonymous": AnonymousUser,
}


def _state(proposal: Proposal) -> tuple:
    policy = JobPolicy.objects.get(job_id=proposal.job_id)
    return (sorted(Proposal.objects.filter(job_id=proposal.job_id).values_list("pk", "status")),
            policy.auto_approve_suspended, Job.objects.get(pk=proposal.job_id).scale_up_block,
            AuditEvent.objects.filter(job_id=proposal.job_id).count())


@pytest.mark.parametrize("who", sorted(NOT_OPERATORS))
@pytest.mark.parametrize("service", sorted(SERVICES))
def test_a_user_without_the_operator_role_is_refused_by_the_service(service: str, who: str, enqueued) -> None:
    make_state, call = SERVICES[service]
    proposal = make_state()
    before = _state(proposal)
    with pytest.raises(PermissionDenied, match="operator role"):
        call(proposal, NOT_OPERATORS[who]())
    assert _state(proposal) == before
    assert enqueued == []


@pytest.mark.parametrize("role", ["operator", "admin"])
@pytest.mark.parametrize("service", sorted(SERVICES))
def test_operators_and_admins_get_past_the_check(service: str, role: str, enqueued) -> None:
    make_state, call = SERVICES[service]
    proposal = make_state()
    before = _state(proposal)
    try:
        call(proposal, make_user("otto", role=role))
    except TransitionError as exc:  # past the role check: the job holds no scale-down to apply
        assert service == "apply scale-down now", exc
        return
    assert _state(proposal) != before
