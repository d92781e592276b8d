"""Start the standby driver while the proposal is pending, so that its approval hands over at once.

A proposal whose change needs a new driver (:func:`needs_new_driver`: a memory knob, or the
executors knob of a job in local mode, where the cores are ``local[N]``) costs the start of that
driver: about 20 to 30 s of SparkSession, JVM warm-up and query preparation. While such a proposal
is pending, approved or executing, the runner is asked to keep a standby with its knob values
ready (:class:`sparkclient.contract.standby.StandbyRequest`, ``prepare``); when it is withdrawn,
rejected, expired, superseded or done, the request is cancelled (``cancel``). :func:`standby_sync`
sends what the job's proposals call for; it runs after every status move of a proposal (the audit
trail's post_save, after commit) and on each reconcile beat, which renews the request's TTL
(:data:`STANDBY_TTL_S`): a request the web app stops renewing expires and the standby exits.

What it costs: a second driver JVM for as long as the proposal waits, its resident memory and CPU
as it reports them (:func:`standby_status`, shown on the proposal page).
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import transaction
from django.db.models.signals import post_save
from django.dispatch import receiver

from sparkclient.contract.messages import ProtocolError
from sparkclient.contract.spec import KnobTarget
from sparkclient.contract.standby import (DEFAULT_TTL_S, StandbyAction, StandbyRequest, StandbyStatus,
                                          read_standby_request, read_standby_status, send_standby_request)
from webapp.jobs.models import Job, JobPolicy
from webapp.jobs.redis import get_redis
from webapp.outage import REDIS_ERRORS
from webapp.proposals.codes import AuditAction
from webapp.proposals.lifecycle import Status
from webapp.proposals.models import AuditEvent, Proposal

logger = logging.getLogger(__name__)

__all__ = ["ACTIVE", "STANDBY_TTL_S", "needs_new_driver", "standby_refresh", "standby_status", "standby_sync",
           "standby_wanted"]

#: The statuses of a proposal whose standby is kept: it may still run.
ACTIVE = (Status.PENDING, Status.APPROVED, Status.EXECUTING)
#: How long a request lives unless renewed, seconds: several reconcile beats.
STANDBY_TTL_S = max(DEFAULT_TTL_S, 4 * settings.SCALER_RECONCILE_INTERVAL_S)
#: The audit actions after which the job's standby request is looked at again.
SYNC_ACTIONS = frozenset({AuditAction.PROPOSED, AuditAction.REVISED, AuditAction.APPROVED, AuditAction.REJECTED,
                          AuditAction.SUPERSEDED, AuditAction.EXPIRED, AuditAction.WITHDRAWN, AuditAction.EXECUTING,
                          AuditAction.SUCCEEDED, AuditAction.FAILED, AuditAction.ROLLING_BACK,
                          AuditAction.ROLLED_BACK})


def needs_new_driver(job: Job, current: dict, proposed: dict) -> bool:
    """Whether going from ``current`` to ``proposed`` (knob values) starts a new driver: a changed
    memory knob (a JVM setting), or a changed executors knob in local mode (``job.cluster``
    ``local@<host>``, the runner's ``local[N]``); on a cluster manager the executors change in place."""
    changed = {k for k, v in (proposed or {}).items() if (current or {}).get(k) != v}
    local = job.cluster.startswith("local")
    return any(k.name in changed and (k.sets == KnobTarget.MEMORY or (local and k.sets == KnobTarget.EXECUTORS))
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
    try:
        status = read_standby_status(get_redis(), proposal.job.name)
    except (ProtocolError, *REDIS_ERRORS):
        return None
    return status if status.state is not None and status.proposal == str(proposal.pk) else None


def _after_move(proposal_id: int) -> None:
    proposal = Proposal.objects.select_related("job").filter(pk=proposal_id).first()
    if proposal is not None and needs_new_driver(proposal.job, proposal.current_config, proposal.proposed_config):
        standby_sync(proposal.job)


@receiver(post_save, sender=AuditEvent, dispatch_uid="sparkscaler-standby-on-proposal-moves")
def standby_on_move(sender, instance: AuditEvent, created: bool, raw: bool = False, **kwargs) -> None:
    """After the status move of a proposal whose change needs a new driver commits, send its job's
    standby request (:func:`standby_sync`)."""
    if not created or raw or instance.proposal_id is None or instance.action not in SYNC_ACTIONS:
        return
    proposal_id = instance.proposal_id
    transaction.on_commit(lambda: _after_move(proposal_id))
