"""Writes for proposals: create, revise, withdraw, auto-approve, approve, reject, expire, and apply a
held scale-down now. Every status change goes through ``webapp.proposals.lifecycle``; execution,
its retries and the reconcile beat are in ``webapp.loop.execute``, rollback in
``webapp.proposals.rollback``, the guardrails and blocks in ``webapp.proposals.holds``.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from webapp.loop.evaluate import pinned_knobs
from webapp.jobs.models import Evaluation, Job, JobPolicy
from webapp.jobs.selectors import latest_snapshot, policy_band
from webapp.outage import broker_check
from webapp.proposals import dispatch
from webapp.proposals.guardrails import violated_guardrail
from webapp.proposals.holds import blocked_knobs, config_direction, held_scale_down, job_guardrails
from webapp.proposals.lifecycle import BUSY, StaleRevisionError, Status, TransitionError, audit, transition
from webapp.proposals.models import Proposal
from webapp.proposals.permissions import actor_name, require_operator
from webapp.proposals.predictions import demand_cores, measured_downtimes_s, plan_cores, predict
from webapp.proposals.reasons import WithdrawReason, withdrawal_text

__all__ = ["StaleRevisionError", "TransitionError", "auto_approve_resume", "material_change", "proposal_approve",
           "proposal_create", "proposal_reject", "proposals_expire", "scale_down_apply_now"]


def _policy_actor(policy: JobPolicy) -> str:
    return f"policy:{policy.algorithm or 'ds2'}"


def material_change(pending: Proposal, evaluation: Evaluation, *, threshold: float, band: tuple[float, float]) -> bool:
    """Whether ``evaluation`` changes the recommendation of the ``pending`` proposal materially:

    - the demand it answers, the busy cores at the target rate ``Σ_v λ_v / TPR_v``
      (``predictions.demand_cores``), moved by more than ``threshold`` of the demand the pending
      revision was sized for; or
    - the pending configuration would no longer carry that demand (its utilization at the target
      rate would be above the ``band``) and the evaluation proposes another one.

    A recommendation that grows only because the backlog grows while the proposal waits (the
    catch-up rate) is not a material change: the pending configuration still drains it. Nor is a
    demand the pending configuration cannot carry when the evaluation proposes that same
    configuration again (a plan capped at ``max_cores`` or a knob's maximum): a revision would
    change nothing the operator approves, and would refuse their approval as outdated.
    """
    new = demand_cores(evaluation.plan)
    old = (pending.prediction.get("inputs") or {}).get("demand_cores")
    if not isinstance(old, (int, float)) or old <= 0:
        old = demand_cores(pending.plan)
    if old > 0 and abs(new - old) > threshold * old:
        return True
    _, cores = plan_cores(pending.plan)
    return cores > 0 and new / cores > band[1] and evaluation.proposed_config != pending.proposed_config


def _freeze_prediction(*, job: Job, plan: dict) -> dict:
    """The prediction the approver is shown, computed once from the plan and the newest snapshot."""
    cores_now, cores_new = plan_cores(plan)
    return predict(plan=plan, snapshot=latest_snapshot(job=job),
                   downtimes_s=measured_downtimes_s(job=job, restart=cores_now != cores_new),
                   configured_restart_s=job.policy.restart_time_s)


def _withdraw(*, proposal: Proposal, reason: WithdrawReason, actor: str, **data) -> Proposal | None:
    """pending → withdrawn (terminal), with the structured reason; None when it was no longer pending."""
    withdrawal = {"reason": str(reason), **data}
    try:
        return transition(proposal=proposal, target=Status.WITHDRAWN, actor=actor, reason=withdrawal_text(withdrawal),
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

    - A pending proposal made for another running configuration is withdrawn (``config_changed``),
      and so is one that changes a knob the checkpoint pins (``knob_pinned``: the runner publishes
      the plan's state store after the proposal was made, e.g. at its first batch).
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
        pinned = pinned_knobs(job=job)
        for old in job.proposals.select_for_update().filter(status=Status.PENDING, kind=Proposal.Kind.SCALE):
            if old.current_config != running:
                _withdraw(proposal=old, reason=WithdrawReason.CONFIG_CHANGED, actor=actor,
                          proposed_for=old.current_config, running=running)
            elif changed := [k for k in pinned if old.proposed_config.get(k) != old.current_config.get(k)]:
                _withdraw(proposal=old, reason=WithdrawReason.KNOB_PINNED, actor=actor, knobs=changed)
            elif pending is None:
                pending = _observe(proposal=old, evaluation=evaluation, actor=actor, policy=policy)
            else:  # more than one pending (older versions): keep the newest
                transition(proposal=old, target=Status.SUPERSEDED, actor=actor,
                            reason=f"superseded by proposal {pending.pk}")
        wants = evaluation.decision == "scale" and not evaluation.hold and evaluation.proposed_config != running
        if not wants:
            return None
        if pending is not None:
            if config_direction(job=job, current=pending.current_config,
                                proposed=pending.proposed_config) != evaluation.direction:
                return None  # counted against it above
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
            proposal = transition(proposal=proposal, target=Status.APPROVED, actor=_policy_actor(policy),
                                   reason="auto mode: inside every guardrail", decided_at=now)
        except TransitionError as exc:  # another execution of the job is in flight
            hold = str(exc)
        else:
            dispatch.enqueue_attempt(proposal.pk, 1)
            return proposal
    Proposal.objects.filter(pk=proposal.pk).update(hold_reason=hold)
    proposal.hold_reason = hold
    audit(job=proposal.job, proposal=proposal, actor=_policy_actor(policy), action="auto_approve_held",
          reason=hold)
    return proposal


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
    require_operator(actor)
    if JobPolicy.objects.filter(job_id=proposal.job_id).values_list("mode", flat=True).first() == "advisor":
        raise TransitionError("the job is in advisor mode: proposals are shown but never executed; "
                              "switch its policy to manual or auto to approve")
    broker_check(f"the approval of proposal {proposal.pk}")
    if revision is None:
        revision = Proposal.objects.filter(pk=proposal.pk).values_list("revision", flat=True).first()
    with transaction.atomic():
        try:
            proposal = transition(proposal=proposal, target=Status.APPROVED, source=(Status.PENDING,),
                                   actor=actor_name(actor), decided_at=timezone.now(), decided_by=actor,
                                   match={"revision": revision}, audit_after={"revision": revision})
        except TransitionError:
            current = Proposal.objects.filter(pk=proposal.pk).values_list("status", "revision").first()
            if current and current[0] == Status.PENDING and current[1] != revision:
                raise StaleRevisionError(proposal.pk, revision, current[1]) from None
            raise
        dispatch.enqueue_attempt(proposal.pk, 1)
    return proposal


def proposal_reject(*, proposal: Proposal, actor, comment: str) -> Proposal:
    """Reject a pending proposal. ``comment`` is required.

    Raises:
        PermissionDenied: ``actor`` is not an operator.
        ValueError: the comment is empty.
        TransitionError: the proposal is no longer pending.
    """
    require_operator(actor)
    if not comment.strip():
        raise ValueError("a comment is required to reject a proposal: say why")
    with transaction.atomic():
        return transition(proposal=proposal, target=Status.REJECTED, source=(Status.PENDING,),
                           actor=actor_name(actor), reason=comment, decided_at=timezone.now(),
                           decided_by=actor, comment=comment)


def proposals_expire(*, now: datetime | None = None) -> int:
    """Expire pending proposals past their ``expires_at``; returns how many."""
    now = now or timezone.now()
    expired = 0
    for proposal in Proposal.objects.select_related("job").filter(status=Status.PENDING, expires_at__lt=now):
        try:
            with transaction.atomic():
                transition(proposal=proposal, target=Status.EXPIRED, actor="system",
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
    require_operator(actor)
    with transaction.atomic():
        policy = JobPolicy.objects.select_for_update().get(job=job)
        before = {"auto_approve_suspended": policy.auto_approve_suspended,
                  "reason": policy.auto_approve_suspended_reason}
        JobPolicy.objects.filter(pk=policy.pk).update(auto_approve_suspended=False, auto_approve_suspended_reason="",
                                                      auto_approve_suspended_at=None)
        audit(job=job, actor=actor_name(actor), action="auto_approve_resumed", before=before,
              after={"auto_approve_suspended": False}, reason="re-enabled by a person")
        policy.refresh_from_db()
    return policy

def scale_down_apply_now(*, job: Job, actor, now: datetime | None = None) -> Proposal:
    """An operator applies a held scale-down now instead of waiting for the scale-down interval:
    creates a pending proposal for the held configuration (the usual approval follows).

    Raises:
        PermissionDenied: ``actor`` is not an operator.
        TransitionError: no scale-down is held, or a proposal is approved or executing.
    """
    require_operator(actor)
    now = now or timezone.now()
    policy = JobPolicy.objects.get(job=job)
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job.pk)
        held = held_scale_down(job=job, now=now)
        if held is None or not held["config"] or held["config"] == job.config:
            raise TransitionError(f"job {job.name} holds no scale-down to apply")
        if job.proposals.filter(status__in=BUSY).exists():
            raise TransitionError(f"job {job.name} has a proposal being executed: apply the scale-down after it")
        for old in job.proposals.select_for_update().filter(status=Status.PENDING, kind=Proposal.Kind.SCALE):
            transition(proposal=old, target=Status.SUPERSEDED, actor=actor_name(actor),
                        reason="superseded by a held scale-down applied now")
        reason = (f"scale-down to {held['cores']} cores applied now by {actor_name(actor)}; it was held until "
                  f"{held['due_at']:%H:%M} (scale-down interval {held['interval_s'] / 60:.0f} min)")
        return _create(job=job, evaluation=held["evaluation"], proposed_config=held["config"], plan=held["plan"],
                       reasons=[reason], actor=actor_name(actor), policy=policy, now=now)
