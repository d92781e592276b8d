"""The role check of every decision service, called directly (not through a view or the API):
approve, reject, roll back, resume auto-approval, apply a held scale-down now, propose the memory
recommendation and clear a scale-up block each refuse a user without the operator role
(``PermissionDenied``) and change nothing: no status, no policy, no job field, no audit event, nothing
enqueued. Operators and admins get past the check (the positive control: a check that refused everyone
would fail here). The table is checked against the code: every function of ``webapp/`` that calls
``require_operator`` has its row, so a new service without one fails.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

import pytest
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import PermissionDenied

from tests.repo import ROOT
from tests.webapp.factories import make_pending, make_user
from webapp.jobs.models import Job, JobPolicy
from webapp.proposals.holds import scale_up_block_clear
from webapp.proposals.lifecycle import TransitionError
from webapp.proposals.models import AuditEvent, Proposal
from webapp.proposals.rollback import proposal_rollback
from webapp.proposals.services import (
    auto_approve_resume,
    memory_propose,
    proposal_approve,
    proposal_reject,
    scale_down_apply_now,
)

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
SERVICES: dict[Callable, tuple[Callable[[], Proposal], Callable]] = {
    proposal_approve: (make_pending, lambda p, actor: proposal_approve(proposal=p, actor=actor)),
    proposal_reject: (make_pending, lambda p, actor: proposal_reject(proposal=p, actor=actor, comment="no")),
    proposal_rollback: (_succeeded, lambda p, actor: proposal_rollback(proposal=p, actor=actor)),
    auto_approve_resume: (_suspended, lambda p, actor: auto_approve_resume(job=p.job, actor=actor)),
    scale_down_apply_now: (make_pending, lambda p, actor: scale_down_apply_now(job=p.job, actor=actor)),
    memory_propose: (make_pending, lambda p, actor: memory_propose(job=p.job, actor=actor)),
    scale_up_block_clear: (_blocked, lambda p, actor: scale_up_block_clear(job=p.job, actor=actor)),
}
NAMES = {service.__name__: service for service in SERVICES}
#: The services whose positive control stops past the role check at a ``TransitionError``: a pending
#: proposal holds no scale-down to apply and no memory recommendation.
PAST_THE_CHECK = {"scale_down_apply_now", "memory_propose"}
#: The role check the services call.
ROLE_CHECK = "require_operator"


def role_checked_services(root: Path) -> set[str]:
    """``module.function`` of every function under ``root/webapp`` whose body calls :data:`ROLE_CHECK`."""
    found = set()
    for path in sorted((root / "webapp").rglob("*.py")):
        module = ".".join(path.relative_to(root).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name != ROLE_CHECK and any(
                    isinstance(call, ast.Call) and getattr(call.func, "id", getattr(call.func, "attr", None))
                    == ROLE_CHECK for call in ast.walk(node)):
                found.add(f"{module}.{node.name}")
    return found


def test_every_service_that_checks_the_role_has_a_row():
    assert role_checked_services(ROOT) == {f"{s.__module__}.{s.__name__}" for s in SERVICES}

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
@pytest.mark.parametrize("service", sorted(NAMES))
def test_a_user_without_the_operator_role_is_refused_by_the_service(service: str, who: str, enqueued) -> None:
    make_state, call = SERVICES[NAMES[service]]
    proposal = make_state()
    before = _state(proposal)
    with pytest.raises(PermissionDenied, match="operator role"):
        call(proposal, NOT_OPERATORS[who]())
    assert _state(proposal) == before
    assert enqueued == []


@pytest.mark.parametrize("role", ["operator", "admin"])
@pytest.mark.parametrize("service", sorted(NAMES))
def test_operators_and_admins_get_past_the_check(service: str, role: str, enqueued) -> None:
    make_state, call = SERVICES[NAMES[service]]
    proposal = make_state()
    before = _state(proposal)
    try:
        call(proposal, make_user("otto", role=role))
    except TransitionError as exc:  # past the role check: nothing to apply or to propose
        assert service in PAST_THE_CHECK, exc
        return
    assert _state(proposal) != before
