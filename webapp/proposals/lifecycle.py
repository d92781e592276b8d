"""The proposal lifecycle: every status a proposal or an execution attempt can have, which moves are
allowed, and the one function that makes each move (a conditional UPDATE plus its audit event).

A proposal (NetBox ``ChoiceSet`` style: value, label, colour)::

    pending ─┬─ approved ── executing ─┬─ succeeded ─┐
             ├─ rejected               └─ failed ────┴─ rolling_back ─┬─ rolled_back
             ├─ superseded                                            └─ failed
             ├─ expired
             └─ withdrawn

An execution runs in attempts (``Execution.attempt_state``)::

    pending ── sent ─┬─ done                   (the runner answered: succeeded, or failed for good)
    waiting_retry ───┘  └─ waiting_retry ── sent  (failed; retried after the back-off)

Nothing else writes ``Proposal.status`` or ``Execution.attempt_state``: :func:`transition` and
:func:`attempt_transition` are the only writers (and :func:`expire_pending` for re-registration).
Every audit event of a proposal, written by :func:`audit` (which :func:`transition` calls), is sent as
the signal ``webapp.proposals.signals.proposal_moved``: how the live loop's standby and the inbox's
notices hear of the moves without the proposals app importing them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.apps import apps
from django.db import IntegrityError, models, transaction

from webapp.proposals.codes import Actor, AuditAction, AuditReason, Reason
from webapp.proposals.signals import proposal_moved

if TYPE_CHECKING:
    from webapp.jobs.models import Job
    from webapp.proposals.models import AuditEvent, Proposal


class ProposalStatus(models.TextChoices):
    """A proposal's status (``Proposal.status``)."""

    PENDING = "pending", "pending"
    APPROVED = "approved", "approved"
    REJECTED = "rejected", "rejected"
    SUPERSEDED = "superseded", "superseded"
    EXPIRED = "expired", "expired"
    EXECUTING = "executing", "executing"
    SUCCEEDED = "succeeded", "succeeded"
    FAILED = "failed", "failed"
    ROLLING_BACK = "rolling_back", "rolling back"
    ROLLED_BACK = "rolled_back", "rolled back"
    WITHDRAWN = "withdrawn", "withdrawn"


Status = ProposalStatus

#: Display colour per status: templates never hard-code one.
COLOURS: dict[str, str] = {
    Status.PENDING: "#d97706", Status.APPROVED: "#2563eb", Status.REJECTED: "#6b7280",
    Status.SUPERSEDED: "#9ca3af", Status.EXPIRED: "#9ca3af", Status.EXECUTING: "#7c3aed",
    Status.SUCCEEDED: "#059669", Status.FAILED: "#dc2626", Status.ROLLING_BACK: "#7c3aed",
    Status.ROLLED_BACK: "#6b7280", Status.WITHDRAWN: "#9ca3af",
}

#: The lifecycle: target status -> the statuses it may be reached from.
TRANSITIONS: dict[str, tuple[str, ...]] = {
    Status.APPROVED: (Status.PENDING,),
    Status.REJECTED: (Status.PENDING,),
    Status.SUPERSEDED: (Status.PENDING,),
    Status.EXPIRED: (Status.PENDING,),
    Status.WITHDRAWN: (Status.PENDING,),
    Status.EXECUTING: (Status.APPROVED,),
    Status.SUCCEEDED: (Status.EXECUTING,),
    Status.FAILED: (Status.EXECUTING, Status.ROLLING_BACK),
    Status.ROLLING_BACK: (Status.SUCCEEDED, Status.FAILED),
    Status.ROLLED_BACK: (Status.ROLLING_BACK,),
}

#: Statuses no transition leaves.
TERMINAL: frozenset[str] = frozenset(
    s for s in Status if not any(s in sources for sources in TRANSITIONS.values()))

#: The statuses of a proposal whose execution is queued or running: at most one per job, enforced
#: by the database (constraint ``one_execution_in_flight_per_job``), so two decisions racing
#: (a rollback and an approval) never send two rescales.
IN_FLIGHT: tuple[str, ...] = (Status.APPROVED, Status.EXECUTING)

#: Statuses a job's execution machinery is busy with (evaluations pause, no new execution starts).
BUSY: tuple[str, ...] = (Status.APPROVED, Status.EXECUTING, Status.ROLLING_BACK)


class AttemptState(models.TextChoices):
    """Where an execution's current attempt is (``Execution.attempt_state``)."""

    PENDING = "pending", "no attempt claimed yet"
    SENT = "sent", "attempt claimed and sent to the runner"
    WAITING_RETRY = "waiting_retry", "attempt failed, waiting for the back-off"
    DONE = "done", "finished"


class AttemptOutcome(models.TextChoices):
    """How one attempt ended (``webapp.proposals.attempts.AttemptEntry.status``)."""

    SUCCEEDED = "succeeded", "succeeded"  # the runner applied this attempt's command
    FAILED = "failed", "failed"  # the runner answered that it failed (or the command could not be sent)
    UNANSWERED = "unanswered", "no answer before the lease"  # outcome unknown: retried under the same key
    REPLAYED = "replayed", "answered with an earlier attempt's apply"  # the runner did not apply it again
    NOT_SENT = "not_sent", "not sent: an earlier attempt's late answer came first"


#: Attempt states: target -> the states it may be reached from.
ATTEMPT_TRANSITIONS: dict[str, tuple[str, ...]] = {
    AttemptState.SENT: (AttemptState.PENDING, AttemptState.WAITING_RETRY),  # an attempt is claimed
    AttemptState.WAITING_RETRY: (AttemptState.SENT,),  # it failed; the back-off allows another
    AttemptState.DONE: (AttemptState.SENT,),  # it succeeded, or failed with the retries spent
}


class ExecutionStatus(models.TextChoices):
    """The outcome of an execution (``Execution.status``); set with the attempt's ``done``."""

    RUNNING = "running", "running"
    SUCCEEDED = "succeeded", "succeeded"
    FAILED = "failed", "failed"


class TransitionError(RuntimeError):
    """A proposal is not in the state the requested transition starts from."""


class StaleRevisionError(TransitionError):
    """An approval named a revision of a pending proposal that is no longer its current one.

    Attributes:
        proposal_id: the proposal.
        revision: the revision the approval named.
        current_revision: the proposal's current revision (what to look at, then approve).
    """

    def __init__(self, proposal_id: int, revision: int, current_revision: int) -> None:
        super().__init__(f"proposal {proposal_id}: revision {revision} is outdated, the current revision is "
                         f"{current_revision}; review revision {current_revision} and approve it")
        self.proposal_id, self.revision, self.current_revision = proposal_id, revision, current_revision


def _model(name: str):
    # The models import the choices above, so the models are looked up when a move is made.
    return apps.get_model("proposals", name)


def actor_fields(actor) -> dict:
    """``actor_user`` and ``actor_name`` of an audit event: a user, or the name of a non-human actor
    (``webapp.proposals.codes.Actor``)."""
    if isinstance(actor, str):
        return {"actor_user": None, "actor_name": actor}
    return {"actor_user": actor, "actor_name": actor.get_username()}


def audit(*, job: Job, actor, action: str, proposal: Proposal | None = None,
          before: dict | None = None, after: dict | None = None, reason: Reason | None = None) -> AuditEvent:
    """Append one audit event (never updated or deleted; NetBox ``ObjectChange``). ``actor`` is a user
    or a non-human actor's name; ``action`` an ``AuditAction``; ``reason`` a coded :class:`Reason`.
    An event of a proposal is a move the apps above hear of: it sends
    :data:`webapp.proposals.signals.proposal_moved` (``proposal``, ``action``, ``reason``).

    Raises:
        ValueError: ``action`` is not an ``AuditAction``.
    """
    action = AuditAction(action)
    event = _model("AuditEvent").objects.create(job=job, proposal=proposal, action=action, before=before or {},
                                                after=after or {}, reason=reason.as_json() if reason else {},
                                                **actor_fields(actor))
    if proposal is not None:
        proposal_moved.send(sender=type(proposal), proposal=proposal, action=action, reason=reason)
    return event


def transition(*, proposal: Proposal, target: str, actor, reason: Reason | None = None,
               source: tuple[str, ...] | None = None, match: dict | None = None, audit_after: dict | None = None,
               **fields) -> Proposal:
    """Move ``proposal`` to ``target`` with one conditional UPDATE (``fields`` are set with it), and
    audit it (:func:`audit`, which sends ``proposal_moved``: how the standby and the notices hear of
    it). ``match`` adds conditions to the UPDATE (e.g. the revision approved); ``audit_after`` adds
    data to the event; ``source`` narrows the statuses it may start from. A ``decided_at`` before the
    proposal's ``created_at`` (a "now" taken before the row was made) is set to ``created_at``.

    Raises:
        TransitionError: the proposal is not in a status ``target`` may be reached from (someone
            else moved it first, or the transition is not in the lifecycle), or ``target`` is in
            flight while another proposal of the job is.
    """
    proposal_model = _model("Proposal")
    if fields.get("decided_at") is not None and proposal.created_at and fields["decided_at"] < proposal.created_at:
        fields["decided_at"] = proposal.created_at  # a decision taken at "now" read before the row was created
    allowed = TRANSITIONS.get(target, ())  # a status no move reaches (pending): nothing to start from
    source = tuple(s for s in (source or allowed) if s in allowed)
    try:
        with transaction.atomic():  # a savepoint: a refused UPDATE leaves the caller's transaction usable
            updated = proposal_model.objects.filter(pk=proposal.pk, status__in=source, **(match or {})).update(
                status=target, **fields)
    except IntegrityError as exc:
        if target not in IN_FLIGHT:
            raise
        busy = (proposal_model.objects.filter(job_id=proposal.job_id, status__in=IN_FLIGHT)
                .exclude(pk=proposal.pk).values_list("pk", "status").first())
        raise TransitionError(f"proposal {proposal.pk} cannot be {target}: proposal {busy[0] if busy else '?'} of "
                              f"the same job is {busy[1] if busy else 'in flight'}, and a job runs one execution "
                              f"at a time; wait until it finishes") from exc
    if updated == 0:
        current = proposal_model.objects.filter(pk=proposal.pk).values_list("status", flat=True).first()
        raise TransitionError(f"proposal {proposal.pk} is {current}, not {' or '.join(source) or 'a status'}: "
                              f"cannot move it to {target}")
    before = proposal.status if proposal.status in source else source[0]
    proposal.refresh_from_db()
    audit(job=proposal.job, proposal=proposal, actor=actor, action=target,
          before={"status": before}, after={"status": target, **(audit_after or {})}, reason=reason)
    return proposal


def expire_pending(*, job: Job, now) -> int:
    """pending → expired for every pending proposal of ``job`` because it was re-registered (by the
    system); returns how many moved. A proposal decided meanwhile is left alone."""
    moved = 0
    for proposal in _model("Proposal").objects.filter(job=job, status=Status.PENDING):
        try:
            transition(proposal=proposal, target=Status.EXPIRED, actor=Actor.SYSTEM,
                       reason=Reason(AuditReason.REREGISTERED), decided_at=now)
        except TransitionError:
            continue
        moved += 1
    return moved


def attempt_transition(*, execution_id: int, attempts: int, target: str, match: dict | None = None,
                       **fields) -> bool:
    """Move the attempt ``attempts`` of a running execution to attempt state ``target`` with one
    conditional UPDATE (``fields`` are set with it). Moving to ``sent`` claims the next attempt:
    ``attempts`` becomes ``attempts + 1``.
    Returns False, changing nothing, when the execution is not in a state ``target`` may be reached
    from, or is no longer at attempt ``attempts`` (another delivery or the reconcile beat moved it)."""
    if target == AttemptState.SENT:
        fields["attempts"] = attempts + 1
    return bool(_model("Execution").objects.filter(
        pk=execution_id, status=ExecutionStatus.RUNNING, attempts=attempts,
        attempt_state__in=ATTEMPT_TRANSITIONS.get(target, ()), **(match or {})).update(attempt_state=target, **fields))
