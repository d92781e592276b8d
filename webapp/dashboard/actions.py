"""Dashboard actions: the POST views (approve, reject, roll back, apply a held scale-down, propose a
recommended memory, clear a block or a suspension, set the demo load). Each checks the role, calls one
service and redirects."""

import logging

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from scaling.policy.numbers import is_finite_number
from sparkclient.contract.load import set_rate as generator_set_rate
from webapp.dashboard.views import DECIDE_ACTIONS, _proposal_context, _require_decider, can_decide
from webapp.jobs.models import Job
from webapp.jobs.redis import get_redis
from webapp.outage import REDIS_ERRORS, ServiceUnavailable, as_unavailable
from webapp.proposals.holds import scale_up_block_clear
from webapp.proposals.lifecycle import StaleRevisionError, TransitionError
from webapp.proposals.models import Proposal
from webapp.proposals.rollback import proposal_rollback as rollback_service
from webapp.proposals.services import (
    auto_approve_resume,
    proposal_approve,
    proposal_reject,
    scale_down_apply_now,
)
from webapp.proposals.services import (
    memory_propose as memory_propose_service,
)

logger = logging.getLogger(__name__)


#: What a decision raises when Redis is away (``webapp.outage``).
OUTAGE_ERRORS = (ServiceUnavailable, *REDIS_ERRORS)


def _unavailable(request: HttpRequest, exception: Exception, what: str, pk: int) -> HttpResponse:
    """Back to the proposal page with the outage message (no address or exception text); nothing changed."""
    unavailable = as_unavailable(exception, what)
    logger.warning("%s refused: %s (cause: %r)", what, unavailable, unavailable.cause)
    messages.error(request, str(unavailable))
    return _back(request, reverse("dashboard:proposal", args=[pk]))


def _back(request: HttpRequest, default: str) -> HttpResponse:
    target = request.POST.get("next", "")
    if target and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        return redirect(target)
    return redirect(default)


@login_required
@require_POST
def proposal_decide(request: HttpRequest, pk: int) -> HttpResponse:
    """Approve or reject a proposal (a comment is required to reject)."""
    _require_decider(request)
    proposal = get_object_or_404(Proposal.objects.select_related("job__policy"), pk=pk)
    action = request.POST.get("action")
    if action not in DECIDE_ACTIONS:
        return HttpResponseBadRequest(f"action must be exactly one of {', '.join(DECIDE_ACTIONS)}, "
                                      f"not {action!r}: nothing was changed",
                                      content_type="text/plain; charset=utf-8")
    try:
        if action == "approve":
            try:
                revision = int(request.POST["revision"]) if request.POST.get("revision") else None
            except ValueError:
                messages.error(request, "The revision to approve must be a whole number.")
                return _back(request, reverse("dashboard:proposal", args=[pk]))
            with_memory = request.POST.get("with_memory") == "on"
            proposal_approve(proposal=proposal, actor=request.user, revision=revision, with_memory=with_memory)
            messages.success(request, f"Proposal {pk} revision {revision or proposal.revision} approved"
                                      f"{' with the memory recommendation' if with_memory else ''}; executing.")
        else:
            proposal_reject(proposal=proposal, actor=request.user, comment=request.POST.get("comment", ""))
            messages.info(request, f"Proposal {pk} rejected.")
    except StaleRevisionError as exc:
        # 409 with the current revision: the page shows it, so the operator reviews what they approve.
        proposal.refresh_from_db()
        return render(request, "dashboard/proposal.html", _proposal_context(request, proposal, error=str(exc)),
                      status=409)
    except (TransitionError, ValueError) as exc:
        messages.error(request, str(exc))
    except OUTAGE_ERRORS as exc:
        return _unavailable(request, exc, f"the {'approval' if action == 'approve' else 'rejection'} of "
                                          f"proposal {pk}", pk)
    return _back(request, reverse("dashboard:proposal", args=[pk]))


@login_required
@require_POST
def proposal_rollback(request: HttpRequest, pk: int) -> HttpResponse:
    """Roll back a succeeded execution: restore the configuration it replaced (workflow service)."""
    _require_decider(request)
    proposal = get_object_or_404(Proposal.objects.select_related("job__policy"), pk=pk)
    try:
        result = rollback_service(proposal=proposal, actor=request.user, reason=request.POST.get("reason", ""))
        messages.success(request, f"Rolling back proposal {pk} (rollback #{result.pk}).")
    except (TransitionError, ValueError) as exc:
        messages.error(request, str(exc))
    except OUTAGE_ERRORS as exc:
        return _unavailable(request, exc, f"the rollback of proposal {pk}", pk)
    return _back(request, reverse("dashboard:history", args=[proposal.job_id]))


@login_required
@require_POST
def scale_down_apply(request: HttpRequest, pk: int) -> HttpResponse:
    """Apply a held scale-down now: creates a pending proposal for it (the operator approves it next)."""
    _require_decider(request)
    job = get_object_or_404(Job.objects.select_related("policy"), pk=pk)
    try:
        proposal = scale_down_apply_now(job=job, actor=request.user)
    except TransitionError as exc:
        messages.error(request, str(exc))
        return redirect("dashboard:job", pk=pk)
    messages.success(request, f"Proposal {proposal.pk} created for the held scale-down; review and approve it.")
    return redirect("dashboard:proposal", pk=proposal.pk)


@login_required
@require_POST
def memory_propose(request: HttpRequest, pk: int) -> HttpResponse:
    """Propose the job's heap recommendation: creates a pending proposal of the memory knob alone (the
    operator approves it next)."""
    _require_decider(request)
    job = get_object_or_404(Job.objects.select_related("policy"), pk=pk)
    try:
        proposal = memory_propose_service(job=job, actor=request.user)
    except TransitionError as exc:
        messages.error(request, str(exc))
        return redirect("dashboard:job", pk=pk)
    messages.success(request, f"Proposal {proposal.pk} created for the recommended memory; review and approve it.")
    return redirect("dashboard:proposal", pk=proposal.pk)


@login_required
@require_POST
def scale_up_block_release(request: HttpRequest, pk: int) -> HttpResponse:
    """Clear the ineffective-scale-up block of a job (audited)."""
    _require_decider(request)
    job = get_object_or_404(Job, pk=pk)
    try:
        scale_up_block_clear(job=job, actor=request.user, comment=request.POST.get("comment", ""))
        messages.success(request, "Scale-up block cleared: scale-ups may be proposed again.")
    except TransitionError as exc:
        messages.error(request, str(exc))
    return redirect("dashboard:job", pk=pk)


# --- history page -------------------------------------------------------------------------------


@login_required
@require_POST
def suspension_clear(request: HttpRequest, pk: int) -> HttpResponse:
    """Turn auto-approval back on after a rollback or an inconclusive verification suspended it (operators; audited as
    ``auto_approve_resumed`` by ``webapp.proposals.services.auto_approve_resume``)."""
    _require_decider(request)
    job = get_object_or_404(Job.objects.select_related("policy"), pk=pk)
    if not job.policy.auto_approve_suspended:
        messages.info(request, "Auto-approval is not suspended for this job: nothing to clear.")
    else:
        auto_approve_resume(job=job, actor=request.user)
        messages.success(request, "Auto-approval is on again for this job.")
    return redirect("dashboard:job", pk=pk)


# --- demo control -------------------------------------------------------------------------------

@login_required
@require_POST
def set_rate(request: HttpRequest, pk: int) -> HttpResponse:
    """Demo control: set the event generator's rate (events/s) for the job's topic. Operators and
    admins only; the rate must be a finite number from 0 to ``settings.DEMO_MAX_RATE`` (else 400); a
    job without a topic has no generator to set (409)."""
    if not can_decide(request.user):
        raise PermissionDenied("Your role may read but not change the demo load: that needs an operator.")
    job = get_object_or_404(Job, pk=pk)
    if not job.topic:
        return HttpResponse(f"job {job.name} reads no topic, so no demo event generator feeds it: its load comes "
                            "from its own source; nothing was changed", status=409,
                            content_type="text/plain; charset=utf-8")
    try:
        rate = parse_rate(request.POST.get("rate", ""), maximum=settings.DEMO_MAX_RATE)
    except ValueError as exc:
        return HttpResponseBadRequest(f"{exc}; nothing was changed", content_type="text/plain; charset=utf-8")
    generator_set_rate(get_redis(), job.topic, rate)
    messages.success(request, f"Generator rate for {job.topic} set to {rate:g} events/s.")
    return redirect("dashboard:job", pk=pk)


def parse_rate(text: str, *, maximum: float) -> float:
    """The demo generator rate typed in the form, events/s.

    Raises:
        ValueError: not a number, not finite (nan, inf), negative, or above ``maximum``.
    """
    try:
        rate = float(text)
    except (TypeError, ValueError):
        raise ValueError(f"the rate must be a number of events per second, not {text[:40]!r}") from None
    if not is_finite_number(rate) or not 0 <= rate <= maximum:
        raise ValueError(f"the rate must be a finite number of events per second from 0 to {maximum:g}, "
                         f"not {text[:40]!r}")
    return rate
