"""Writes for proposals: create, auto-approve, approve, reject, expire, execute (with retries),
roll back, reconcile and verify.

Each status change is one conditional UPDATE (ARCHITECTURE.md "Proposal lifecycle"); zero updated
rows means the transition is refused with a :class:`TransitionError`. Every transition and every
configuration change appends an :class:`AuditEvent` (actor, before, after, reason).

Execution runs in attempts. An attempt is claimed with a conditional UPDATE on the execution row
(``attempts``, ``attempt_state``) right before the configuration goes to the runner, so a second
delivery of the same task, or a racing reconcile, never sends it twice. While an attempt is in
flight the row holds a lease; the reconcile beat takes over executions whose lease expired (the
worker died): it reads the runner's answer if there is one, otherwise it counts the attempt as
failed. Failed attempts are retried under the job's restart strategy (``backoff``); when the
retries are spent the job rolls back to its last configuration that succeeded, through the same
execution path, and auto-approval for the job is suspended until a person turns it back on.
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from scaling.state import applied_records, state_from_dict, state_to_dict
from sparkclient import control
from webapp.jobs.models import Evaluation, Job, JobPolicy
from webapp.jobs.redis import get_redis
from webapp.outage import REDIS_ERRORS, broker_check
from webapp.proposals.backoff import RestartStrategy, next_retry
from webapp.proposals.guardrails import Guardrails, violated_guardrail
from webapp.proposals.models import AuditEvent, Execution, Proposal
from webapp.proposals.permissions import can_approve
from webapp.proposals.reasons import WithdrawReason, withdrawal_text
from webapp.proposals.rescale_cost import record_open_costs

logger = logging.getLogger(__name__)
Status = Proposal.Status
Attempt = Execution.AttemptState

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


def audit(*, job: Job, actor: str, action: str, proposal: Proposal | None = None,
          before: dict | None = None, after: dict | None = None, reason: str = "") -> AuditEvent:
    """Append one audit event (never updated or deleted)."""
    return AuditEvent.objects.create(job=job, proposal=proposal, actor=actor, action=action,
                                     before=before or {}, after=after or {}, reason=reason)


def _actor_name(actor) -> str:
    return actor if isinstance(actor, str) else actor.get_username()


def _policy_actor(policy: JobPolicy) -> str:
    return f"policy:{policy.algorithm or 'ds2'}"


def _transition(*, proposal: Proposal, target: str, actor: str, reason: str = "",
                source: tuple[str, ...] | None = None, match: dict | None = None, audit_after: dict | None = None,
                **fields) -> Proposal:
    """Move ``proposal`` to ``target`` with one conditional UPDATE, and audit it. ``match`` adds
    conditions to the UPDATE (e.g. the revision approved); ``audit_after`` adds data to the event.

    Raises:
        TransitionError: the proposal is not in a status ``target`` may be reached from (someone
            else moved it first, or the transition is not in the lifecycle).
    """
    allowed = TRANSITIONS[target]
    source = tuple(s for s in (source or allowed) if s in allowed)
    try:
        with transaction.atomic():  # a savepoint: a refused UPDATE leaves the caller's transaction usable
            updated = Proposal.objects.filter(pk=proposal.pk, status__in=source, **(match or {})).update(
                status=target, **fields)
    except IntegrityError as exc:
        if target not in Proposal.IN_FLIGHT:
            raise
        busy = (Proposal.objects.filter(job_id=proposal.job_id, status__in=Proposal.IN_FLIGHT)
                .exclude(pk=proposal.pk).values_list("pk", "status").first())
        raise TransitionError(f"proposal {proposal.pk} cannot be {target}: proposal {busy[0] if busy else '?'} of "
                              f"the same job is {busy[1] if busy else 'in flight'}, and a job runs one execution "
                              f"at a time; wait until it finishes") from exc
    if updated == 0:
        current = Proposal.objects.filter(pk=proposal.pk).values_list("status", flat=True).first()
        raise TransitionError(f"proposal {proposal.pk} is {current}, not {' or '.join(source)}: "
                              f"cannot move it to {target}")
    before = proposal.status if proposal.status in source else source[0]
    proposal.refresh_from_db()
    audit(job=proposal.job, proposal=proposal, actor=actor, action=target,
          before={"status": before}, after={"status": target, **(audit_after or {})}, reason=reason)
    return proposal


def _enqueue_attempt(proposal_id: int, attempt: int, countdown_s: float = 0.0) -> None:
    """Enqueue an execution attempt once the current transaction commits."""
    from webapp.proposals.tasks import proposal_execute  # noqa: PLC0415 - tasks import services

    def send() -> None:
        try:
            if attempt == 1 and countdown_s <= 0:
                proposal_execute.delay(proposal_id)
            else:
                proposal_execute.apply_async((proposal_id, attempt), countdown=max(0.0, countdown_s))
        except REDIS_ERRORS as exc:
            # Committed already: the reconcile beat enqueues it again once Redis is back.
            logger.warning("proposal %s attempt %s: not enqueued (%s); the reconcile beat will retry it",
                           proposal_id, attempt, exc)

    transaction.on_commit(send)


# --- creation, decisions ---------------------------------------------------------------------

def job_guardrails(*, job: Job, policy: JobPolicy) -> Guardrails:
    """The guardrails of ``job``: its policy's ``guard_*`` options with its knobs (the executors knob,
    and every knob that sets executors or parallelism)."""
    specs = job.knob_specs()
    return Guardrails(max_change_factor=policy.guard_max_change_factor,
                      max_executors=policy.guard_max_executors, directions=policy.guard_directions,
                      excluded_periods=tuple(policy.guard_excluded_periods or ()),
                      scaled_knobs=frozenset(k.name for k in specs if k.sets != "other"),
                      executors_knob=next((k.name for k in specs if k.sets == "executors"), None))


def config_direction(*, job: Job, current: dict, proposed: dict) -> str:
    """``up``, ``down`` or ``none`` for a change of ``job``'s knobs (``guardrails.direction``: by the
    executors first, else by the total partitions)."""
    from webapp.proposals.guardrails import direction  # noqa: PLC0415

    return direction(job_guardrails(job=job, policy=job.policy), current, proposed)


def _changed_knobs(job: Job, current: dict, proposed: dict) -> dict[str, tuple[int, int]]:
    """The executors and parallelism knobs of ``job`` that differ: ``{name: (old, new)}``."""
    scaled = job_guardrails(job=job, policy=job.policy).scaled_knobs
    return {key: (old, new) for key, new in proposed.items()
            if key in scaled and isinstance(new, int) and not isinstance(new, bool)
            and isinstance(old := current.get(key), int) and not isinstance(old, bool) and old != new}


def material_change(pending: Proposal, evaluation: Evaluation, *, threshold: float, band: tuple[float, float]) -> bool:
    """Whether ``evaluation`` changes the recommendation of the ``pending`` proposal materially:

    - the demand it answers, the busy cores at the target rate ``Σ_v λ_v / TPR_v``
      (``predictions.demand_cores``), moved by more than ``threshold`` of the demand the pending
      revision was sized for; or
    - the pending configuration would no longer carry that demand: its utilization at the target
      rate would be above the ``band``.

    A recommendation that grows only because the backlog grows while the proposal waits (the
    catch-up rate) is not a material change: the pending configuration still drains it.
    """
    from webapp.proposals.predictions import demand_cores, plan_cores  # noqa: PLC0415

    new = demand_cores(evaluation.plan)
    old = (pending.prediction.get("inputs") or {}).get("demand_cores")
    if not isinstance(old, (int, float)) or old <= 0:
        old = demand_cores(pending.plan)
    if old > 0 and abs(new - old) > threshold * old:
        return True
    _, cores = plan_cores(pending.plan)
    return cores > 0 and new / cores > band[1]


def _freeze_prediction(*, job: Job, plan: dict) -> dict:
    """The prediction the approver is shown, computed once from the plan and the newest snapshot."""
    from webapp.jobs.selectors import latest_snapshot  # noqa: PLC0415
    from webapp.proposals.predictions import measured_downtimes_s, plan_cores, predict  # noqa: PLC0415

    cores_now, cores_new = plan_cores(plan)
    return predict(plan=plan, snapshot=latest_snapshot(job=job),
                   downtimes_s=measured_downtimes_s(job=job, restart=cores_now != cores_new),
                   configured_restart_s=job.policy.restart_time_s)


def _withdraw(*, proposal: Proposal, reason: WithdrawReason, actor: str, **data) -> Proposal | None:
    """pending → withdrawn (terminal), with the structured reason; None when it was no longer pending."""
    withdrawal = {"reason": str(reason), **data}
    try:
        return _transition(proposal=proposal, target=Status.WITHDRAWN, actor=actor, reason=withdrawal_text(withdrawal),
                           withdrawal=withdrawal, audit_after={"withdrawal": withdrawal})
    except TransitionError:
        return None


def _create(*, job: Job, evaluation: Evaluation | None, proposed_config: dict, plan: dict, reasons: list,
            actor: str, policy: JobPolicy, now: datetime) -> Proposal:
    proposal = Proposal.objects.create(
        job=job, evaluation=evaluation, current_config=job.config, proposed_config=proposed_config,
        reasons=reasons, plan=plan, prediction=_freeze_prediction(job=job, plan=plan),
        expires_at=now + timedelta(seconds=policy.proposal_ttl_s))
    audit(job=job, proposal=proposal, actor=actor, action="proposed", before=job.config,
          after={**proposed_config, "revision": 1}, reason="; ".join(str(r) for r in reasons))
    return proposal


def _revise(*, proposal: Proposal, evaluation: Evaluation, actor: str, policy: JobPolicy, now: datetime
            ) -> Proposal | None:
    """Revise a pending proposal in place (one conditional UPDATE on its status and revision); the
    revision it replaces goes to ``revisions``. None when it was decided meanwhile."""
    earlier = {"revision": proposal.revision, "evaluation": proposal.evaluation_id,
               "proposed_config": proposal.proposed_config, "reasons": proposal.reasons,
               "prediction": proposal.prediction, "at": now.isoformat()}
    plan = evaluation.plan
    updated = Proposal.objects.filter(pk=proposal.pk, status=Status.PENDING, revision=proposal.revision).update(
        revision=proposal.revision + 1, revisions=[*proposal.revisions, earlier], evaluation=evaluation,
        proposed_config=evaluation.proposed_config, reasons=evaluation.reasons, plan=plan,
        prediction=_freeze_prediction(job=proposal.job, plan=plan), unsupported_by=[], hold_reason="",
        expires_at=now + timedelta(seconds=policy.proposal_ttl_s))
    if not updated:
        return None
    proposal.refresh_from_db()
    audit(job=proposal.job, proposal=proposal, actor=actor, action="revised",
          before={**earlier["proposed_config"], "revision": earlier["revision"]},
          after={**proposal.proposed_config, "revision": proposal.revision},
          reason=f"revision {proposal.revision}: the recommendation changed by more than "
                 f"{policy.revision_min_change:.0%} (evaluation {evaluation.pk})")
    return proposal


def _observe(*, proposal: Proposal, evaluation: Evaluation, actor: str, policy: JobPolicy) -> Proposal | None:
    """Count an evaluation against or for the pending ``proposal``; withdraw it after
    ``withdraw_after_evaluations`` in a row that do not support it. Returns the proposal while it
    stays pending, None once withdrawn."""
    wanted = config_direction(job=proposal.job, current=proposal.current_config, proposed=proposal.proposed_config)
    if evaluation.direction == wanted:
        if proposal.unsupported_by:
            Proposal.objects.filter(pk=proposal.pk, status=Status.PENDING).update(unsupported_by=[])
            proposal.unsupported_by = []
        return proposal
    unsupported = [*proposal.unsupported_by, {"evaluation": evaluation.pk, "direction": evaluation.direction}]
    if len(unsupported) < policy.withdraw_after_evaluations:
        Proposal.objects.filter(pk=proposal.pk, status=Status.PENDING).update(unsupported_by=unsupported)
        proposal.unsupported_by = unsupported
        return proposal
    directions = {u["direction"] for u in unsupported}
    reason = (WithdrawReason.INSIDE_BAND if directions == {Evaluation.Direction.NONE}
              else WithdrawReason.OPPOSITE if Evaluation.Direction.NONE not in directions
              else WithdrawReason.NOT_SUPPORTED)
    _withdraw(proposal=proposal, reason=reason, actor=actor, evaluations=[u["evaluation"] for u in unsupported],
              directions=[u["direction"] for u in unsupported], direction=evaluation.direction)
    return None


def proposal_create(*, evaluation: Evaluation, now: datetime | None = None) -> Proposal | None:
    """Turn an evaluation into the job's one pending proposal (issue 13 "stable proposals").

    - A pending proposal made for another running configuration is withdrawn (``config_changed``).
    - An evaluation that does not support the pending proposal (load inside the band, or pointing
      the other way) counts against it; ``withdraw_after_evaluations`` in a row withdraw it.
    - A ``scale`` evaluation in the pending proposal's direction revises it in place only when its
      configuration differs materially (``JobPolicy.revision_min_change``); otherwise it is kept.
    - A ``scale`` evaluation with no pending proposal left creates one (frozen prediction), and in
      ``auto`` mode approves it when the guardrails hold and no ineffective-scale-up block applies.

    Returns the proposal created or revised, else None.
    """
    job = evaluation.job
    policy = JobPolicy.objects.get(job=job)
    actor = _policy_actor(policy)
    now = now or timezone.now()
    with transaction.atomic():
        running = Job.objects.filter(pk=job.pk).values_list("config", flat=True).first()
        pending = None
        for old in job.proposals.select_for_update().filter(status=Status.PENDING, kind=Proposal.Kind.SCALE):
            if old.current_config != running:
                _withdraw(proposal=old, reason=WithdrawReason.CONFIG_CHANGED, actor=actor,
                          proposed_for=old.current_config, running=running)
            elif pending is None:
                pending = _observe(proposal=old, evaluation=evaluation, actor=actor, policy=policy)
            else:  # more than one pending (older versions): keep the newest
                _transition(proposal=old, target=Status.SUPERSEDED, actor=actor,
                            reason=f"superseded by proposal {pending.pk}")
        wants = evaluation.decision == "scale" and not evaluation.hold and evaluation.proposed_config != running
        if not wants:
            return None
        if pending is not None:
            if config_direction(job=job, current=pending.current_config,
                                proposed=pending.proposed_config) != evaluation.direction:
                return None  # counted against it above
            from webapp.jobs.selectors import policy_band  # noqa: PLC0415

            if not material_change(pending, evaluation, threshold=policy.revision_min_change,
                                   band=policy_band(policy)):
                return None
            revised = _revise(proposal=pending, evaluation=evaluation, actor=actor, policy=policy, now=now)
            if revised is not None and policy.mode == JobPolicy.Mode.AUTO:
                revised = _auto_approve(proposal=revised, policy=policy, now=now)
            return revised
        proposal = _create(job=job, evaluation=evaluation, proposed_config=evaluation.proposed_config,
                           plan=evaluation.plan, reasons=evaluation.reasons, actor=actor, policy=policy, now=now)
        if policy.mode == JobPolicy.Mode.AUTO:
            proposal = _auto_approve(proposal=proposal, policy=policy, now=now)
    return proposal


def _auto_approve(*, proposal: Proposal, policy: JobPolicy, now: datetime) -> Proposal:
    """Approve ``proposal`` on behalf of the policy when the guardrails hold; else record why not."""
    blocked = blocked_knobs(job=proposal.job, current=proposal.current_config, proposed=proposal.proposed_config)
    if blocked:
        hold = (f"ineffective-scale-up block: {', '.join(blocked)} scaled up without effect (proposal "
                f"#{proposal.job.scale_up_block.get('proposal')}); a person clears the block on the job page")
    elif policy.auto_approve_suspended:
        hold = (f"auto-approval is suspended for this job ({policy.auto_approve_suspended_reason}); "
                f"a person must approve, or re-enable auto-approval")
    else:
        hold = violated_guardrail(job_guardrails(job=proposal.job, policy=policy), proposal.current_config,
                                  proposal.proposed_config, now.timestamp())
    if not hold:
        try:
            proposal = _transition(proposal=proposal, target=Status.APPROVED, actor=_policy_actor(policy),
                                   reason="auto mode: inside every guardrail", decided_at=now)
        except TransitionError as exc:  # another execution of the job is in flight
            hold = str(exc)
        else:
            _enqueue_attempt(proposal.pk, 1)
            return proposal
    Proposal.objects.filter(pk=proposal.pk).update(hold_reason=hold)
    proposal.hold_reason = hold
    audit(job=proposal.job, proposal=proposal, actor=_policy_actor(policy), action="auto_approve_held",
          reason=hold)
    return proposal


def _require_operator(actor) -> None:
    if not can_approve(actor):
        raise PermissionDenied(f"{_actor_name(actor)} may read but not decide proposals "
                               f"(approve, reject and roll back need the operator role)")


def proposal_approve(*, proposal: Proposal, actor, revision: int | None = None) -> Proposal:
    """Approve revision ``revision`` of a pending proposal and enqueue its execution after commit.
    The approval names the revision it approves (the page always sends it; without one, the API
    approves the current revision and the audit event names it).

    Raises:
        PermissionDenied: ``actor`` is not an operator.
        StaleRevisionError: ``revision`` is not the proposal's current revision (a 409 with it).
        TransitionError: the proposal is no longer pending (approved twice, rejected, superseded,
            withdrawn), the job's policy is ``advisor`` (proposals are never executed), or another
            proposal of the job is approved or executing (one execution per job, a database constraint).
        ServiceUnavailable: Redis, the task broker, does not answer; nothing was changed.
    """
    _require_operator(actor)
    if JobPolicy.objects.filter(job_id=proposal.job_id).values_list("mode", flat=True).first() == "advisor":
        raise TransitionError("the job is in advisor mode: proposals are shown but never executed; "
                              "switch its policy to manual or auto to approve")
    broker_check(f"the approval of proposal {proposal.pk}")
    if revision is None:
        revision = Proposal.objects.filter(pk=proposal.pk).values_list("revision", flat=True).first()
    with transaction.atomic():
        try:
            proposal = _transition(proposal=proposal, target=Status.APPROVED, source=(Status.PENDING,),
                                   actor=_actor_name(actor), decided_at=timezone.now(), decided_by=actor,
                                   match={"revision": revision}, audit_after={"revision": revision})
        except TransitionError:
            current = Proposal.objects.filter(pk=proposal.pk).values_list("status", "revision").first()
            if current and current[0] == Status.PENDING and current[1] != revision:
                raise StaleRevisionError(proposal.pk, revision, current[1]) from None
            raise
        _enqueue_attempt(proposal.pk, 1)
    return proposal


def proposal_reject(*, proposal: Proposal, actor, comment: str) -> Proposal:
    """Reject a pending proposal. ``comment`` is required.

    Raises:
        PermissionDenied: ``actor`` is not an operator.
        ValueError: the comment is empty.
        TransitionError: the proposal is no longer pending.
    """
    _require_operator(actor)
    if not comment.strip():
        raise ValueError("a comment is required to reject a proposal: say why")
    with transaction.atomic():
        return _transition(proposal=proposal, target=Status.REJECTED, source=(Status.PENDING,),
                           actor=_actor_name(actor), reason=comment, decided_at=timezone.now(),
                           decided_by=actor, comment=comment)


def proposals_expire(*, now: datetime | None = None) -> int:
    """Expire pending proposals past their ``expires_at``; returns how many."""
    now = now or timezone.now()
    expired = 0
    for proposal in Proposal.objects.select_related("job").filter(status=Status.PENDING, expires_at__lt=now):
        try:
            with transaction.atomic():
                _transition(proposal=proposal, target=Status.EXPIRED, actor="system",
                            reason=f"no decision before {proposal.expires_at:%Y-%m-%d %H:%M:%S} UTC "
                                   f"(proposal_ttl_s)")
            expired += 1
        except TransitionError:
            pass  # decided meanwhile
    return expired


def auto_approve_resume(*, job: Job, actor) -> JobPolicy:
    """A person turns auto-approval back on after a rollback suspended it.

    Raises:
        PermissionDenied: ``actor`` is not an operator.
    """
    _require_operator(actor)
    with transaction.atomic():
        policy = JobPolicy.objects.select_for_update().get(job=job)
        before = {"auto_approve_suspended": policy.auto_approve_suspended,
                  "reason": policy.auto_approve_suspended_reason}
        JobPolicy.objects.filter(pk=policy.pk).update(auto_approve_suspended=False, auto_approve_suspended_reason="",
                                                      auto_approve_suspended_at=None)
        audit(job=job, actor=_actor_name(actor), action="auto_approve_resumed", before=before,
              after={"auto_approve_suspended": False}, reason="re-enabled by a person")
        policy.refresh_from_db()
    return policy


# --- ineffective-scale-up guard, held scale-downs ------------------------------------------------

def blocked_knobs(*, job: Job, current: dict, proposed: dict) -> list[str]:
    """The knobs a change ``current → proposed`` scales up although the job's ineffective-scale-up
    block names them (empty when no block applies)."""
    block = Job.objects.filter(pk=job.pk).values_list("scale_up_block", flat=True).first() or {}
    knobs = set(block.get("knobs") or ())
    return sorted(key for key, (old, new) in _changed_knobs(job, current, proposed).items()
                  if key in knobs and new > old)


def scale_up_block_set(*, proposal: Proposal, reason: str, now: datetime | None = None) -> dict:
    """After ``proposal`` was verified ineffective: block further scale-ups of the knobs it raised
    (FLIP-271's ineffective scale-up detection, ``ScalingEffectivenessDetection``, in the live loop).
    Returns the block; a scale-down or a change that raised nothing sets none."""
    now = now or timezone.now()
    raised = sorted(key for key, (old, new) in _changed_knobs(proposal.job, proposal.current_config,
                                                              proposal.proposed_config).items() if new > old)
    if not raised:
        return {}
    block = {"proposal": proposal.pk, "knobs": raised, "since": now.isoformat(), "reason": reason}
    with transaction.atomic():
        before = Job.objects.filter(pk=proposal.job_id).values_list("scale_up_block", flat=True).first()
        Job.objects.filter(pk=proposal.job_id).update(scale_up_block=block)
        audit(job=proposal.job, proposal=proposal, actor="system:verification", action="scale_up_blocked",
              before=before or {}, after=block,
              reason=f"proposal {proposal.pk} was verified ineffective ({reason}): scale-ups of "
                     f"{', '.join(raised)} wait until a person clears the block")
    return block


def scale_up_block_clear(*, job: Job, actor, comment: str = "") -> Job:
    """A person clears the ineffective-scale-up block of ``job`` (audited).

    Raises:
        PermissionDenied: ``actor`` is not an operator.
        TransitionError: the job has no block to clear.
    """
    _require_operator(actor)
    with transaction.atomic():
        locked = Job.objects.select_for_update().get(pk=job.pk)
        if not locked.scale_up_block:
            raise TransitionError(f"job {job.name} has no ineffective-scale-up block to clear")
        Job.objects.filter(pk=job.pk).update(scale_up_block={})
        audit(job=job, actor=_actor_name(actor), action="scale_up_block_cleared", before=locked.scale_up_block,
              after={}, reason=comment.strip() or f"cleared by {_actor_name(actor)}")
    job.refresh_from_db()
    return job


def held_scale_down(*, job: Job, now: datetime | None = None) -> dict | None:
    """The delayed scale-down (FLINK-36018 ``DelayedScaleDown``) the job holds now, or None:
    ``{cores, executors, due_at (datetime), in_s, interval_s, first_at, evaluation, config, plan}``.
    From the job's scaler state (the pending executor scale-down) and the newest evaluation that
    recorded the held configuration."""
    from scaling.planner import EXECUTORS_KEY  # noqa: PLC0415
    from scaling.state import state_from_dict  # noqa: PLC0415

    now = now or timezone.now()
    pending = state_from_dict(job.scaler_state).pending(EXECUTORS_KEY)
    if pending is None:
        return None
    evaluation = job.evaluations.exclude(held_scale_down={}).order_by("-created_at", "-id").first()
    if evaluation is None:
        return None
    held = evaluation.held_scale_down
    interval_s = job.policy.scale_down_interval_s
    due_s = pending.first_at_s + interval_s
    due_at = datetime.fromtimestamp(due_s, tz=now.tzinfo or timezone.get_current_timezone())
    return {"cores": held.get("cores"), "executors": held.get("executors"), "due_at": due_at,
            "in_s": max(0.0, due_s - now.timestamp()), "interval_s": interval_s,
            "first_at": datetime.fromtimestamp(pending.first_at_s, tz=due_at.tzinfo), "evaluation": evaluation,
            "config": held.get("config") or {}, "plan": held.get("plan") or {}}


def scale_down_apply_now(*, job: Job, actor, now: datetime | None = None) -> Proposal:
    """An operator applies a held scale-down now instead of waiting for the scale-down interval:
    creates a pending proposal for the held configuration (the usual approval follows).

    Raises:
        PermissionDenied: ``actor`` is not an operator.
        TransitionError: no scale-down is held, or a proposal is approved or executing.
    """
    _require_operator(actor)
    now = now or timezone.now()
    policy = JobPolicy.objects.get(job=job)
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job.pk)
        held = held_scale_down(job=job, now=now)
        if held is None or not held["config"] or held["config"] == job.config:
            raise TransitionError(f"job {job.name} holds no scale-down to apply")
        if job.proposals.filter(status__in=[Status.APPROVED, Status.EXECUTING, Status.ROLLING_BACK]).exists():
            raise TransitionError(f"job {job.name} has a proposal being executed: apply the scale-down after it")
        for old in job.proposals.select_for_update().filter(status=Status.PENDING, kind=Proposal.Kind.SCALE):
            _transition(proposal=old, target=Status.SUPERSEDED, actor=_actor_name(actor),
                        reason="superseded by a held scale-down applied now")
        reason = (f"scale-down to {held['cores']} cores applied now by {_actor_name(actor)}; it was held until "
                  f"{held['due_at']:%H:%M} (scale-down interval {held['interval_s'] / 60:.0f} min)")
        return _create(job=job, evaluation=held["evaluation"], proposed_config=held["config"], plan=held["plan"],
                       reasons=[reason], actor=_actor_name(actor), policy=policy, now=now)


def _suspend_auto_approve(*, job: Job, reason: str, now: datetime) -> None:
    updated = JobPolicy.objects.filter(job=job, auto_approve_suspended=False).update(
        auto_approve_suspended=True, auto_approve_suspended_reason=reason, auto_approve_suspended_at=now)
    if updated:
        audit(job=job, actor="system", action="auto_approve_suspended", before={"auto_approve_suspended": False},
              after={"auto_approve_suspended": True}, reason=reason)


# --- rollback ----------------------------------------------------------------------------------

def last_good_config(*, job: Job, before: Proposal) -> dict:
    """The configuration that last ran successfully before ``before`` was executed: the applied
    configuration of the newest succeeded execution of the job older than it, else the
    configuration ``before`` replaced."""
    previous = (Execution.objects.filter(proposal__job=job, status=Execution.Status.SUCCEEDED,
                                         proposal__created_at__lt=before.created_at)
                .exclude(proposal=before).order_by("-finished_at").first())
    if previous is not None:
        return previous.result.get("config") or previous.proposal.proposed_config
    return before.current_config


def _start_rollback(*, proposal: Proposal, config: dict, actor: str, reason: str) -> Proposal:
    """In a transaction: ``proposal`` → rolling back, suspend auto-approval, and create the
    rollback proposal (already approved) whose execution restores ``config``."""
    now = timezone.now()
    _transition(proposal=proposal, target=Status.ROLLING_BACK, actor=actor, reason=reason)
    _suspend_auto_approve(job=proposal.job, reason=f"rollback of proposal {proposal.pk}: {reason}", now=now)
    job = Job.objects.get(pk=proposal.job_id)
    rollback = Proposal.objects.create(
        job=job, kind=Proposal.Kind.ROLLBACK, rollback_of=proposal, status=Status.PENDING,
        current_config=job.config, proposed_config=config, reasons=[reason])
    audit(job=job, proposal=rollback, actor=actor, action="proposed", before=job.config, after=config,
          reason=f"rollback of proposal {proposal.pk}: {reason}")
    rollback = _transition(proposal=rollback, target=Status.APPROVED, actor=actor, decided_at=now,
                           reason=f"rollback of proposal {proposal.pk}")
    _enqueue_attempt(rollback.pk, 1)
    return rollback


def proposal_rollback(*, proposal: Proposal, actor, reason: str = "") -> Proposal:
    """Roll back a succeeded execution: restore the configuration it replaced, through the same
    execution path. Returns the rollback proposal.

    Raises:
        PermissionDenied: ``actor`` is not an operator.
        TransitionError: the proposal has not succeeded (or is already rolling back), or another
            proposal of the job is approved or executing (one execution per job).
        ServiceUnavailable: Redis, the task broker, does not answer; nothing was changed.
    """
    _require_operator(actor)
    broker_check(f"the rollback of proposal {proposal.pk}")
    with transaction.atomic():
        return _start_rollback(proposal=proposal, config=proposal.current_config, actor=_actor_name(actor),
                               reason=reason.strip() or f"rolled back by {_actor_name(actor)}")


# --- execution ---------------------------------------------------------------------------------

def _lease_s() -> float:
    return settings.SCALER_EXECUTION_TIMEOUT_S + settings.SCALER_EXECUTION_LEASE_MARGIN_S


def _restart_strategy(policy: JobPolicy) -> RestartStrategy:
    return RestartStrategy(kind=policy.restart_strategy, attempts=policy.restart_attempts,
                           delay_s=policy.restart_delay_s, max_delay_s=policy.restart_max_delay_s,
                           multiplier=policy.restart_backoff_multiplier,
                           max_failures_per_interval=policy.failure_rate_max_failures,
                           interval_s=policy.failure_rate_interval_s)


def result_as_dict(result: control.RescaleResult) -> dict:
    """A runner's :class:`~sparkclient.control.RescaleResult` as the JSON stored on the execution
    (``config`` = the knob values running after it)."""
    return {"id": result.id, "status": result.status.value, "path": result.path.value,
            "downtime_s": result.downtime_s, "pause_s": result.pause_s, "error": result.error,
            "code": result.code.value if result.code else None,
            "config": result.knobs, "completed_at": result.completed_at,
            "executor_change_s": result.executor_change_s}


def _runner_result(redis, job_name: str, command_id: str) -> dict | None:
    """The runner's stored answer to ``command_id`` as a dict, None when there is none; a malformed one
    counts as a failure naming the field."""
    try:
        result = control.get_result(redis, job_name, command_id)
    except control.ProtocolError as exc:
        return {"status": "failed", "path": "none", "error": f"malformed runner result: {exc}"}
    return result_as_dict(result) if result is not None else None


def proposal_execute(*, proposal_id: int, attempt: int = 1) -> Execution | None:
    """Run attempt ``attempt`` of an approved proposal's execution: claim it, send the configuration
    to the runner over the Redis control channel and wait for its answer
    (``SCALER_EXECUTION_TIMEOUT_S``), then record the outcome (see :func:`execution_record_result`).

    Idempotent: the first attempt moves the proposal approved → executing and creates its one
    execution row; every attempt is claimed by a conditional UPDATE, re-checked just before Spark
    is touched. An attempt that is already claimed, or a proposal that is not executing, returns
    the execution (or None) without sending anything.

    Raises:
        TransitionError: attempt 1 of a proposal that is neither approved nor executed, or of an
            advisor-mode job's scale proposal.
    """
    proposal = Proposal.objects.select_related("job", "job__policy").get(pk=proposal_id)
    if proposal.status == Status.APPROVED:
        if proposal.kind == Proposal.Kind.SCALE and proposal.job.policy.mode == JobPolicy.Mode.ADVISOR:
            raise TransitionError(f"proposal {proposal_id}: the job is in advisor mode, nothing is executed")
        with transaction.atomic():
            try:
                proposal = _transition(proposal=proposal, target=Status.EXECUTING, actor="system",
                                       reason=f"execution of {proposal.kind} proposal")
                Execution.objects.create(proposal=proposal, lease_expires_at=timezone.now() + timedelta(
                    seconds=_lease_s()))
            except TransitionError:
                pass  # another delivery started it; the claim below decides
    execution = Execution.objects.filter(proposal_id=proposal_id).first()
    if execution is None:
        raise TransitionError(f"proposal {proposal_id} is {proposal.status}, not approved: nothing to execute")
    now = timezone.now()
    claimed = (Execution.objects
               .filter(pk=execution.pk, status=Execution.Status.RUNNING, attempts=attempt - 1,
                       attempt_state__in=[Attempt.PENDING, Attempt.WAITING_RETRY],
                       proposal__status=Status.EXECUTING)
               .update(attempts=attempt, attempt_state=Attempt.SENT, next_attempt_at=None,
                       lease_expires_at=now + timedelta(seconds=_lease_s())))
    if not claimed:
        logger.info("proposal %s attempt %s: already claimed or finished; nothing to do", proposal_id, attempt)
        execution.refresh_from_db()
        return execution
    execution.refresh_from_db()
    job = proposal.job
    redis = get_redis()
    if attempt > 1:
        # The previous attempt may have timed out here while the runner went on and applied it:
        # its late answer is the outcome (with the real path and downtime); send nothing again.
        late = _runner_result(redis, job.name, execution.exec_id(attempt - 1))
        if late is not None and late.get("status") == "succeeded":
            audit(job=job, proposal=proposal, actor="system", action="late_answer",
                  after={"attempt": attempt - 1, "path": late.get("path")},
                  reason=f"attempt {attempt - 1} succeeded after it had timed out: not sending attempt {attempt}")
            return execution_record_result(execution_id=execution.pk, attempt=attempt, result=late)
    exec_id = execution.exec_id(attempt)
    audit(job=job, proposal=proposal, actor="system", action="attempt_started",
          after={"attempt": attempt, "exec_id": exec_id, "config": proposal.proposed_config},
          reason=f"attempt {attempt}: sent to the runner of {job.name}")
    try:
        control.send_command(redis, job.name, control.RescaleCommand(id=exec_id, knobs=proposal.proposed_config))
        result = result_as_dict(control.wait_result(redis, job.name, exec_id,
                                                    timeout_s=settings.SCALER_EXECUTION_TIMEOUT_S))
    except (TimeoutError, OSError, ValueError) as exc:
        result = {"status": "failed", "error": str(exc), "path": "none"}
    return execution_record_result(execution_id=execution.pk, attempt=attempt, result=result)


def execution_record_result(*, execution_id: int, attempt: int, result: dict,
                            now: datetime | None = None) -> Execution | None:
    """Record the runner's answer to attempt ``attempt``: success finishes the proposal and updates
    the job's configuration; a failure schedules a retry under the restart strategy, or, with the
    retries spent, fails the proposal and rolls the job back to its last good configuration.

    Idempotent: the outcome is recorded only while that attempt is the one in flight (conditional
    UPDATE); otherwise returns the execution unchanged.
    """
    now = now or timezone.now()
    execution = Execution.objects.select_related("proposal", "proposal__job", "proposal__job__policy").get(
        pk=execution_id)
    proposal, job = execution.proposal, execution.proposal.job
    ok = result.get("status") == "succeeded"
    entry = {"attempt": attempt, "exec_id": execution.exec_id(attempt), "finished_at": now.isoformat(),
             "status": "succeeded" if ok else "failed", "error": result.get("error") or "",
             "path": result.get("path") or ""}
    in_flight = Execution.objects.filter(pk=execution.pk, attempts=attempt, attempt_state=Attempt.SENT,
                                         status=Execution.Status.RUNNING)
    with transaction.atomic():
        if ok:
            if not in_flight.update(status=Execution.Status.SUCCEEDED, attempt_state=Attempt.DONE,
                                    path=result.get("path") or "", downtime_s=result.get("downtime_s"),
                                    pause_s=result.get("pause_s"), finished_at=now, error="", result=result, lease_expires_at=None,
                                    attempt_log=[*execution.attempt_log, entry]):
                execution.refresh_from_db()
                return execution
            applied = result.get("config") or proposal.proposed_config
            before = Job.objects.filter(pk=job.pk).values_list("config", flat=True).first()
            # The job's memory (FLIP-271 state store): the applied scalings, for ineffective scale-up
            # detection, and the measured downtime, for restart-time tracking; pending scale-downs clear.
            state = state_from_dict(Job.objects.filter(pk=job.pk).values_list("scaler_state", flat=True).first())
            state = state.with_records(applied_records(proposal.plan.get("vertices", []), now.timestamp()))
            if isinstance(result.get("downtime_s"), (int, float)):
                state = state.with_restart_time(result["downtime_s"])
            Job.objects.filter(pk=job.pk).update(config=applied, config_changed_at=now,
                                                 scaler_state=state_to_dict(state))
            audit(job=job, proposal=proposal, actor="system", action="config_changed", before=before,
                  after=applied, reason=f"attempt {attempt}: {result.get('path')} restart, downtime "
                                        f"{result.get('downtime_s')} s")
            _transition(proposal=proposal, target=Status.SUCCEEDED, actor="system",
                        reason=f"attempt {attempt} succeeded")
            if proposal.kind == Proposal.Kind.ROLLBACK and proposal.rollback_of_id:
                _transition(proposal=Proposal.objects.get(pk=proposal.rollback_of_id), target=Status.ROLLED_BACK,
                            actor="system", reason=f"configuration restored by proposal {proposal.pk}")
        else:
            failures = [e for e in execution.attempt_log if e.get("status") == "failed"] + [entry]
            failure_times = [datetime.fromisoformat(e["finished_at"]).timestamp() for e in failures]
            decision = next_retry(_restart_strategy(job.policy), failure_times, now.timestamp())
            entry["retry"] = asdict(decision)
            if decision.retry:
                next_at = now + timedelta(seconds=decision.delay_s)
                if not in_flight.update(attempt_state=Attempt.WAITING_RETRY, next_attempt_at=next_at, error=entry["error"],
                                        lease_expires_at=next_at + timedelta(seconds=_lease_s()),
                                        attempt_log=[*execution.attempt_log, entry]):
                    execution.refresh_from_db()
                    return execution
                audit(job=job, proposal=proposal, actor="system", action="attempt_failed",
                      after={"attempt": attempt, "retry_in_s": decision.delay_s},
                      reason=f"{entry['error'] or 'failed'}; {decision.reason}")
                _enqueue_attempt(proposal.pk, attempt + 1, countdown_s=decision.delay_s)
            else:
                if not in_flight.update(status=Execution.Status.FAILED, attempt_state=Attempt.DONE,
                                        path=result.get("path") or "", finished_at=now, error=entry["error"],
                                        result=result, lease_expires_at=None,
                                        attempt_log=[*execution.attempt_log, entry]):
                    execution.refresh_from_db()
                    return execution
                audit(job=job, proposal=proposal, actor="system", action="attempt_failed",
                      after={"attempt": attempt, "retry_in_s": None},
                      reason=f"{entry['error'] or 'failed'}; {decision.reason}")
                _transition(proposal=proposal, target=Status.FAILED, actor="system",
                            reason=f"{attempt} attempt(s) failed, last: {entry['error']}")
                proposal.refresh_from_db()
                if proposal.kind == Proposal.Kind.SCALE:
                    _start_rollback(proposal=proposal, config=last_good_config(job=job, before=proposal),
                                    actor="system", reason=f"execution failed after {attempt} attempt(s): "
                                                           f"{entry['error']}")
                elif proposal.rollback_of_id:
                    original = Proposal.objects.get(pk=proposal.rollback_of_id)
                    _transition(proposal=original, target=Status.FAILED, source=(Status.ROLLING_BACK,),
                                actor="system", reason=f"rollback proposal {proposal.pk} failed: {entry['error']}")
                    Job.objects.filter(pk=job.pk).update(
                        health=Job.Health.DOWN, last_error=f"rollback failed: {entry['error']}; needs a person")
    execution.refresh_from_db()
    return execution


# --- reconcile beat ------------------------------------------------------------------------------

def execution_reconcile(*, execution: Execution, now: datetime | None = None) -> str:
    """Take over an execution whose lease expired (its worker died or its message was lost).

    - attempt in flight: the runner's answer, if any, is recorded; otherwise the attempt counts as
      failed ("no result before the lease expired") and the restart strategy decides;
    - attempt never claimed, or a retry whose back-off passed: the attempt is enqueued again.

    Returns what was done, in words (also in the audit trail).
    """
    now = now or timezone.now()
    proposal = execution.proposal
    if execution.attempt_state == Attempt.SENT:
        result = _runner_result(get_redis(), proposal.job.name, execution.exec_id())
        if result is not None:
            what = (f"lease expired during attempt {execution.attempts}; the runner had answered "
                    f"{result.get('status')}: recording it")
        else:
            what = (f"lease expired during attempt {execution.attempts} without an answer from the runner "
                    f"(worker lost): counting the attempt as failed")
            result = {"status": "failed", "path": "none",
                      "error": f"worker lost: no result for {execution.exec_id()} before the lease expired"}
        audit(job=proposal.job, proposal=proposal, actor="system:reconcile", action="reconciled",
              before={"attempt": execution.attempts, "attempt_state": execution.attempt_state}, reason=what)
        execution_record_result(execution_id=execution.pk, attempt=execution.attempts, result=result, now=now)
        return what
    # pending or waiting_retry: the next attempt's message never ran; enqueue it again (the claim
    # makes a late duplicate a no-op). Push the lease so the next beat does not enqueue it twice.
    updated = Execution.objects.filter(pk=execution.pk, attempts=execution.attempts,
                                       attempt_state=execution.attempt_state,
                                       lease_expires_at=execution.lease_expires_at).update(
        lease_expires_at=now + timedelta(seconds=_lease_s()))
    if not updated:
        return "changed meanwhile"
    what = f"lease expired before attempt {execution.attempts + 1} started: enqueued it again"
    with transaction.atomic():
        audit(job=proposal.job, proposal=proposal, actor="system:reconcile", action="reconciled",
              before={"attempt": execution.attempts, "attempt_state": execution.attempt_state}, reason=what)
        _enqueue_attempt(proposal.pk, execution.attempts + 1)
    return what


def workflow_reconcile(*, now: datetime | None = None) -> dict:
    """The reconcile beat: expire pending proposals, take over executions past their lease, start
    approved proposals whose message was lost, and verify executions that ran long enough.
    Returns counts per kind of work."""
    from webapp.proposals.verification import proposal_verify, verification_due  # noqa: PLC0415

    now = now or timezone.now()
    counts = {"expired": proposals_expire(now=now), "reconciled": 0, "restarted": 0, "verified": 0}
    for execution in Execution.objects.select_related("proposal__job").filter(
            status=Execution.Status.RUNNING, lease_expires_at__lt=now):
        execution_reconcile(execution=execution, now=now)
        counts["reconciled"] += 1
    stale = now - timedelta(seconds=_lease_s())
    for proposal in Proposal.objects.select_related("job").filter(
            status=Status.APPROVED, execution__isnull=True).filter(Q(decided_at__lt=stale) | Q(decided_at__isnull=True,
                                                                                              created_at__lt=stale)):
        with transaction.atomic():
            updated = Proposal.objects.filter(pk=proposal.pk, status=Status.APPROVED).update(decided_at=now)
            if updated:
                audit(job=proposal.job, proposal=proposal, actor="system:reconcile", action="reconciled",
                      reason="approved but not started within the lease: enqueued its execution again")
                _enqueue_attempt(proposal.pk, 1)
                counts["restarted"] += 1
    for proposal in verification_due(now=now):
        if proposal_verify(proposal=proposal, now=now) is not None:
            counts["verified"] += 1
    counts["costed"] = record_open_costs(now=now)
    return counts
