"""Start the standby driver while the proposal is pending, so that its approval hands over at once.

A proposal whose change needs a new driver (:func:`needs_new_driver`: a memory knob, or the
executors knob of a job in local mode, where the cores are ``local[N]``) costs the start of that
driver: about 20 to 30 s of SparkSession, JVM warm-up and query preparation. While such a proposal
is pending, approved or executing, the runner is asked to keep a standby with its knob values
ready (:class:`sparkclient.contract.standby.StandbyRequest`, ``prepare``); when it is withdrawn,
rejected, expired, superseded or done, the request is cancelled (``cancel``). :func:`standby_sync`
sends what the job's proposals call for; it runs after every move of a proposal that may change it
(the lifecycle's signal ``webapp.proposals.signals.proposal_moved``, after commit) and on each
reconcile beat, which renews the request's TTL (:data:`STANDBY_TTL_S`): a request the web app stops
renewing expires and the standby exits.

What it costs: a second driver JVM for as long as the proposal waits, its resident memory and CPU
as it reports them (:func:`standby_status`, shown on the proposal page).

In auto mode the approval of such a proposal waits for that standby (:func:`standby_gate`): until it
is ready, or failed, or for at most ``auto_approve_standby_wait_s``; approved at once, the command would
wait for a standby still starting (40 to 60 s to effect instead of about 4 s).
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.dispatch import receiver

from sparkclient.contract.messages import ProtocolError
from sparkclient.contract.spec import KnobTarget
from sparkclient.contract.standby import (
    DEFAULT_TTL_S,
    HandoverState,
    StandbyAction,
    StandbyRequest,
    StandbyStatus,
    read_standby_request,
    read_standby_status,
    send_standby_request,
)
from webapp.jobs.models import Job, JobPolicy
from webapp.jobs.redis import get_redis
from webapp.outage import REDIS_ERRORS
from webapp.proposals.codes import AuditAction, AuditReason, HoldCode, Reason, StandbySeen, StandbyWaitEnd
from webapp.proposals.lifecycle import Status
from webapp.proposals.models import Proposal
from webapp.proposals.signals import proposal_moved

logger = logging.getLogger(__name__)

__all__ = ["ACTIVE", "STANDBY_TTL_S", "needs_new_driver", "prepared_for", "standby_gate", "standby_refresh",
           "standby_read", "standby_seen", "standby_status", "standby_sync", "standby_wanted", "standby_wait_end"]

#: The statuses of a proposal whose standby is kept: it may still run.
ACTIVE = (Status.PENDING, Status.APPROVED, Status.EXECUTING)
#: How long a request lives unless renewed, seconds: several reconcile beats.
STANDBY_TTL_S = max(DEFAULT_TTL_S, 4 * settings.SCALER_RECONCILE_INTERVAL_S)
#: The moves (``proposal_moved``'s actions) after which the job's standby request is looked at again.
SYNC_ACTIONS = frozenset({AuditAction.PROPOSED, AuditAction.REVISED, AuditAction.APPROVED, AuditAction.REJECTED,
                          AuditAction.SUPERSEDED, AuditAction.EXPIRED, AuditAction.WITHDRAWN, AuditAction.EXECUTING,
                          AuditAction.SUCCEEDED, AuditAction.FAILED, AuditAction.ROLLING_BACK,
                          AuditAction.ROLLED_BACK})


def needs_new_driver(job: Job, current: dict, proposed: dict) -> bool:
    """Whether going from ``current`` to ``proposed`` (knob values) starts a new driver: a changed
    memory knob that sets anything in the job's mode (``KnobTarget.needs_new_jvm``), or a changed
    executors knob in local mode (``job.cluster``
    ``local@<host>``, the runner's ``local[N]``); on a cluster manager the executors change in place."""
    changed = {k for k, v in (proposed or {}).items() if (current or {}).get(k) != v}
    local = job.local_mode
    return any(k.name in changed and (k.sets.needs_new_jvm(local=local) or (local and k.sets == KnobTarget.EXECUTORS))
               for k in job.knob_specs())


def standby_wanted(job: Job) -> Proposal | None:
    """The proposal the job's standby is for: its newest approved or executing proposal, else its
    newest pending one (not in advisor mode, where nothing runs), when its change needs a new
    driver; None otherwise."""
    active = list(job.proposals.filter(status__in=ACTIVE).order_by("-created_at")[:5])
    active.sort(key=lambda p: p.status == Status.PENDING)  # one in flight first (the sort keeps the order)
    advisor = JobPolicy.objects.filter(job=job, mode=JobPolicy.Mode.ADVISOR).exists()
    for proposal in active:
        if advisor and proposal.status == Status.PENDING:
            continue
        return proposal if needs_new_driver(job, proposal.current_config, proposal.proposed_config) else None
    return None


def _send(job: Job, request: StandbyRequest) -> bool:
    try:
        send_standby_request(get_redis(), job.name, request)
    except REDIS_ERRORS as exc:
        logger.warning("job %s: standby request not sent (%s); the reconcile beat sends it again", job.name, exc)
        return False
    return True


def _prepare(job: Job, proposal: Proposal) -> bool:
    return _send(job, StandbyRequest(StandbyAction.PREPARE, str(proposal.pk), dict(proposal.proposed_config),
                                     ttl_s=STANDBY_TTL_S))


def standby_sync(job: Job) -> StandbyAction | None:
    """Send the job's runner the standby request its proposals call for: ``prepare`` (renewed) for
    :func:`standby_wanted`'s proposal, else ``cancel`` of a standby still requested. Returns the
    action sent (None: nothing to send, or Redis did not answer: logged; a prepare is sent again by
    the next beat, a lost cancel ends with the request's TTL)."""
    proposal = standby_wanted(job)
    if proposal is not None:
        return StandbyAction.PREPARE if _prepare(job, proposal) else None
    try:
        current = read_standby_request(get_redis(), job.name)
    except ProtocolError:
        current = StandbyRequest(StandbyAction.PREPARE, "unreadable", {"?": 0})
    except REDIS_ERRORS:
        return None
    if current is None or current.action is StandbyAction.CANCEL:
        return None
    cancel = StandbyRequest(StandbyAction.CANCEL, current.proposal, ttl_s=STANDBY_TTL_S)
    return StandbyAction.CANCEL if _send(job, cancel) else None


def standby_refresh() -> int:
    """Reconcile step: renew the ``prepare`` request of every job whose proposal wants a standby
    (:func:`standby_wanted`; a cancel is sent at the proposal's move, :func:`standby_on_move`).
    Returns how many requests were renewed."""
    renewed = 0
    for job in Job.objects.filter(proposals__status__in=ACTIVE).distinct():
        proposal = standby_wanted(job)
        renewed += proposal is not None and _prepare(job, proposal)
    return renewed


def standby_status(proposal: Proposal) -> StandbyStatus | None:
    """The standby prepared for ``proposal`` as its runner reports it (starting or ready, and its
    cost), None when there is none for it or Redis does not answer."""
    return standby_read(proposal)[0]


def standby_read(proposal: Proposal) -> tuple[StandbyStatus | None, StandbySeen]:
    """One read of the runner's report (the handover hash in Redis) for ``proposal``: its standby as
    :func:`standby_status` gives it, and as :func:`standby_seen` sees it."""
    try:
        status = read_standby_status(get_redis(), proposal.job.name)
    except (ProtocolError, *REDIS_ERRORS):
        return None, StandbySeen.UNREACHABLE
    mine = status if status.state is not None and status.proposal == str(proposal.pk) else None
    return mine, SEEN[status.state] if prepared_for(status, proposal) else StandbySeen.ABSENT


#: The handover hash's states as the approval's wait sees them.
SEEN = {HandoverState.READY: StandbySeen.READY, HandoverState.RELEASED: StandbySeen.READY,
        HandoverState.REQUESTED: StandbySeen.STARTING, HandoverState.STARTING: StandbySeen.STARTING,
        HandoverState.FAILED: StandbySeen.FAILED, HandoverState.CANCELLED: StandbySeen.ABSENT}


def standby_seen(proposal: Proposal) -> StandbySeen:
    """The standby prepared for ``proposal`` with its proposed knobs, as its runner reports it
    (``unreachable``: Redis did not answer or its report is malformed; ``absent``: none for this
    proposal and these knobs, e.g. not picked up yet, prepared for an earlier revision, or a runner
    that prepares none)."""
    return standby_read(proposal)[1]


def prepared_for(status: StandbyStatus | None, proposal: Proposal) -> bool:
    """Whether ``status`` reports a standby prepared for ``proposal`` with its proposed knob values
    (not an earlier revision's)."""
    proposed = proposal.proposed_config or {}
    return (status is not None and status.state is not None and status.proposal == str(proposal.pk)
            and (not status.knobs or {k: status.knobs.get(k) for k in proposed} == proposed))


def standby_wait_end(seen: StandbySeen, waited_s: float, bound_s: float) -> StandbyWaitEnd | None:
    """Whether auto-approval stops waiting for the standby, and why: ready, failed (waiting gains
    nothing: its runner does not try the same proposal again, the command starts its own) or
    ``waited_s`` reached ``bound_s`` (seconds; whatever the runner or Redis says, so it never hangs).
    None: wait on (starting, absent, unreachable, within the bound)."""
    if seen is StandbySeen.READY:
        return StandbyWaitEnd.READY
    if seen is StandbySeen.FAILED:
        return StandbyWaitEnd.FAILED
    return StandbyWaitEnd.BOUND if waited_s >= bound_s else None


def standby_gate(*, proposal: Proposal, bound_s: float, now: datetime) -> tuple[Reason | None, Reason | None]:
    """Auto mode's wait for the standby of ``proposal`` at ``now``: ``(hold, approval)``.

    - ``(None, None)``: no wait applies (its change needs no new driver, or ``bound_s`` is 0).
    - ``(hold, None)``: wait; ``hold`` is ``standby_wait`` with since (the first wait's time, kept in
      the proposal's hold), waited_s, bound_s and the standby as seen.
    - ``(None, approval)``: approve; ``approval`` is ``standby_wait_over`` with the same data and its end.
    """
    if bound_s <= 0 or not needs_new_driver(proposal.job, proposal.current_config, proposal.proposed_config):
        return None, None
    since = _wait_since(proposal) or now
    waited_s = max(0.0, (now - since).total_seconds())
    seen = standby_seen(proposal)
    data = {"since": since.isoformat(), "waited_s": round(waited_s, 1), "bound_s": bound_s, "standby": seen.value}
    end = standby_wait_end(seen, waited_s, bound_s)
    if end is None:
        return Reason(HoldCode.STANDBY_WAIT, data), None
    return None, Reason(AuditReason.STANDBY_WAIT_OVER, {**data, "end": end.value})


def _wait_since(proposal: Proposal) -> datetime | None:
    held = Reason.from_json(proposal.hold_reason)
    if held is None or held.code != HoldCode.STANDBY_WAIT:
        return None
    try:
        since = datetime.fromisoformat(str(held.data.get("since")))
    except ValueError:
        return None
    return since if since.tzinfo is not None else None


def _after_move(proposal_id: int) -> None:
    proposal = Proposal.objects.select_related("job").filter(pk=proposal_id).first()
    if proposal is not None and needs_new_driver(proposal.job, proposal.current_config, proposal.proposed_config):
        standby_sync(proposal.job)


@receiver(proposal_moved, dispatch_uid="sparkscaler-standby-on-proposal-moves")
def standby_on_move(sender, *, proposal: Proposal, action: AuditAction, **kwargs) -> None:
    """After a move of :data:`SYNC_ACTIONS` of a proposal whose change needs a new driver commits, send
    its job's standby request (:func:`standby_sync`)."""
    if action not in SYNC_ACTIONS:
        return
    proposal_id = proposal.pk
    transaction.on_commit(lambda: _after_move(proposal_id))
