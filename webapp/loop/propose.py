"""Propose: an evaluation becomes the job's one pending proposal. Created, revised in place, kept,
or withdrawn when the evaluations stop supporting it; in ``auto`` mode approved on the policy's
behalf when the guardrails hold. Every status change goes through ``webapp.proposals.lifecycle``; a
proposal is created by ``webapp.proposals.services.proposal_open``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from scaling.values.plan import JobPlan
from webapp.jobs.bindings import pinned_knobs
from webapp.jobs.models import Evaluation, Job, JobPolicy
from webapp.jobs.plans import plan_fields
from webapp.jobs.selectors import policy_band
from webapp.loop.standby import standby_gate
from webapp.proposals import dispatch
from webapp.proposals.codes import AuditAction, AuditReason, HoldCode, Reason
from webapp.proposals.guardrails import violated_guardrail
from webapp.proposals.holds import blocked_knobs, config_direction, job_guardrails
from webapp.proposals.lifecycle import Status, TransitionError, audit, transition
from webapp.proposals.memory import memory_only
from webapp.proposals.models import Proposal
from webapp.proposals.predictions import demand_cores, plan_cores
from webapp.proposals.reasons import WithdrawReason
from webapp.proposals.services import freeze_prediction, policy_actor, proposal_open


def material_change(pending: Proposal, evaluation: Evaluation, plan: JobPlan, *, threshold: float,
                    band: tuple[float, float]) -> bool:
    """Whether ``evaluation`` (its ``plan``) changes the recommendation of the ``pending`` proposal materially:

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
    new = demand_cores(plan)
    old = (pending.prediction.get("inputs") or {}).get("demand_cores")
    if not isinstance(old, (int, float)) or old <= 0:
        old = demand_cores(pending.job_plan)
    if old > 0 and abs(new - old) > threshold * old:
        return True
    _, cores = plan_cores(pending.job_plan)
    return cores > 0 and new / cores > band[1] and evaluation.proposed_config != pending.proposed_config


def _withdraw(*, proposal: Proposal, reason: WithdrawReason, actor: str, **data) -> Proposal | None:
    """pending → withdrawn (terminal), with the structured reason; None when it was no longer pending."""
    withdrawal = {"reason": str(reason), **data}
    try:
        return transition(proposal=proposal, target=Status.WITHDRAWN, actor=actor, reason=Reason(reason, data),
                          withdrawal=withdrawal, audit_after={"withdrawal": withdrawal})
    except TransitionError:
        return None


def _revise(*, proposal: Proposal, evaluation: Evaluation, plan: JobPlan, actor: str, policy: JobPolicy,
            now: datetime) -> Proposal | None:
    """Revise a pending proposal in place (one conditional UPDATE on its status and revision); the
    revision it replaces goes to ``revisions``. None when it was decided meanwhile."""
    earlier = {"revision": proposal.revision, "evaluation": proposal.evaluation_id,
               "proposed_config": proposal.proposed_config, "reasons": proposal.reasons,
               "prediction": proposal.prediction, "at": now.isoformat()}
    updated = Proposal.objects.filter(pk=proposal.pk, status=Status.PENDING, revision=proposal.revision).update(
        revision=proposal.revision + 1, revisions=[*proposal.revisions, earlier], evaluation=evaluation,
        proposed_config=evaluation.proposed_config, **plan_fields(plan),
        prediction=freeze_prediction(job=proposal.job, plan=plan), unsupported_by=[], hold_reason={},
        expires_at=now + timedelta(seconds=policy.proposal_ttl_s))
    if not updated:
        return None
    proposal.refresh_from_db()
    audit(job=proposal.job, proposal=proposal, actor=actor, action=AuditAction.REVISED,
          before={**earlier["proposed_config"], "revision": earlier["revision"]},
          after={**proposal.proposed_config, "revision": proposal.revision},
          reason=Reason(AuditReason.RECOMMENDATION_CHANGED, {"revision": proposal.revision, "evaluation": evaluation.pk,
                                                             "min_change": policy.revision_min_change}))
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


def proposal_create(*, evaluation: Evaluation, plan: JobPlan, now: datetime | None = None,
                    pinned: Sequence[str] | None = None) -> Proposal | None:
    """Turn an evaluation (and its ``plan``) into the job's one pending proposal.

    - A pending proposal made for another running configuration is withdrawn (``config_changed``),
      and so is one that changes a knob the checkpoint pins (``knob_pinned``: the runner publishes
      the plan's state store after the proposal was made, e.g. at its first batch).
    - An evaluation that does not support the pending proposal (load inside the band, or pointing
      the other way) counts against it; ``withdraw_after_evaluations`` in a row withdraw it.
    - A ``scale`` evaluation in the pending proposal's direction revises it in place only when its
      configuration differs materially (``JobPolicy.revision_min_change``); otherwise it is kept.
    - A person's proposal of the heap alone (``webapp.proposals.services.memory_propose``) is neither
      counted against nor revised: it waits for its decision, and no other proposal is made meanwhile.
    - A ``scale`` evaluation with no pending proposal left creates one (frozen prediction), and in
      ``auto`` mode approves it when the guardrails hold and no ineffective-scale-up block applies.

    ``pinned``: the knobs the checkpoint pins (``webapp.jobs.bindings.pinned_knobs`` when not given).
    Returns the proposal created or revised, else None.
    """
    job = evaluation.job
    policy = JobPolicy.objects.get(job=job)
    actor = policy_actor(policy)
    now = now or timezone.now()
    with transaction.atomic():
        running = Job.objects.filter(pk=job.pk).values_list("config", flat=True).first()
        pending = None
        pinned = pinned_knobs(job=job) if pinned is None else pinned
        for old in job.proposals.select_for_update().filter(status=Status.PENDING, kind=Proposal.Kind.SCALE):
            if old.current_config != running:
                _withdraw(proposal=old, reason=WithdrawReason.CONFIG_CHANGED, actor=actor,
                          proposed_for=old.current_config, running=running)
            elif changed := [k for k in pinned if old.proposed_config.get(k) != old.current_config.get(k)]:
                _withdraw(proposal=old, reason=WithdrawReason.KNOB_PINNED, actor=actor, knobs=changed)
            elif pending is None:  # a person's heap proposal is theirs to decide: the load does not judge it
                pending = old if _asked_for_memory(old) else _observe(proposal=old, evaluation=evaluation,
                                                                        actor=actor, policy=policy)
            else:  # more than one pending (older versions): keep the newest
                transition(proposal=old, target=Status.SUPERSEDED, actor=actor,
                           reason=Reason(AuditReason.SUPERSEDED_BY, {"proposal": pending.pk}))
        wants = evaluation.decision == "scale" and not evaluation.hold and evaluation.proposed_config != running
        if not wants:
            return None
        if pending is not None:
            if _asked_for_memory(pending):
                return None  # the heap proposal waits for its decision, and this evaluation with it
            if config_direction(job=job, current=pending.current_config,
                                proposed=pending.proposed_config) != evaluation.direction:
                return None  # counted against it above
            if not material_change(pending, evaluation, plan, threshold=policy.revision_min_change,
                                   band=policy_band(policy)):
                return None
            revised = _revise(proposal=pending, evaluation=evaluation, plan=plan, actor=actor, policy=policy, now=now)
            if revised is not None and policy.mode == JobPolicy.Mode.AUTO:
                revised = _auto_approve(proposal=revised, policy=policy, now=now)
            return revised
        proposal = proposal_open(job=job, evaluation=evaluation, proposed_config=evaluation.proposed_config,
                                 plan=plan, actor=actor, policy=policy, now=now)
        if policy.mode == JobPolicy.Mode.AUTO:
            proposal = _auto_approve(proposal=proposal, policy=policy, now=now)
    return proposal


def _asked_for_memory(proposal: Proposal) -> bool:
    """Whether a person proposed ``proposal`` for the heap alone (no evaluation made it)."""
    return proposal.evaluation_id is None and memory_only(proposal)


def _auto_approve(*, proposal: Proposal, policy: JobPolicy, now: datetime) -> Proposal:
    """Approve ``proposal`` on behalf of the policy when the guardrails hold; else record why not."""
    blocked = blocked_knobs(job=proposal.job, current=proposal.current_config, proposed=proposal.proposed_config)
    if blocked:
        hold = Reason(HoldCode.SCALE_UP_BLOCK, {"knobs": blocked,
                                                "proposal": proposal.job.scale_up_block.get("proposal")})
    elif policy.auto_approve_suspended:
        hold = Reason(HoldCode.AUTO_APPROVE_SUSPENDED, {"reason": policy.auto_approve_suspended_reason})
    else:
        hold = violated_guardrail(job_guardrails(job=proposal.job, policy=policy), proposal.current_config,
                                  proposal.proposed_config, now.timestamp())
    approval = None
    if not hold:
        hold, approval = standby_gate(proposal=proposal, bound_s=policy.auto_approve_standby_wait_s, now=now)
    if not hold:
        try:
            proposal = transition(proposal=proposal, target=Status.APPROVED, actor=policy_actor(policy),
                                  reason=approval or Reason(AuditReason.INSIDE_GUARDRAILS), decided_at=now,
                                  hold_reason={})
        except TransitionError as exc:  # another execution of the job is in flight
            hold = Reason(HoldCode.EXECUTION_IN_FLIGHT, {"error": str(exc)})
        else:
            dispatch.enqueue_attempt(proposal.pk, 1)
            return proposal
    Proposal.objects.filter(pk=proposal.pk).update(hold_reason=hold.as_json())
    proposal.hold_reason = hold.as_json()
    if hold.code != HoldCode.STANDBY_WAIT:  # the policy's own wait: the approval's audit records it
        audit(job=proposal.job, proposal=proposal, actor=policy_actor(policy), action=AuditAction.AUTO_APPROVE_HELD,
              reason=hold)
    return proposal


#: The holds the reconcile beat looks at again: the standby wait, and a suspension a person lifted.
RETRIED_HOLDS = (HoldCode.STANDBY_WAIT.value, HoldCode.AUTO_APPROVE_SUSPENDED.value)


def auto_approve_waiting(*, now: datetime | None = None) -> int:
    """Reconcile step: try again the auto-approval of each pending proposal whose approval waits for
    its standby driver (``standby_wait``, :func:`webapp.loop.standby.standby_gate`) or was held while
    auto-approval was suspended and is no longer (a person resumed it); a job no longer in auto mode
    drops the hold (a person decides). Returns how many were approved."""
    now = now or timezone.now()
    approved = 0
    waiting = Proposal.objects.filter(status=Status.PENDING, hold_reason__code__in=RETRIED_HOLDS)
    for proposal_id in waiting.values_list("pk", flat=True):
        with transaction.atomic():
            proposal = Proposal.objects.select_for_update().select_related("job").filter(
                pk=proposal_id, status=Status.PENDING, hold_reason__code__in=RETRIED_HOLDS).first()
            if proposal is None:
                continue
            policy = JobPolicy.objects.get(job=proposal.job)
            if policy.mode != JobPolicy.Mode.AUTO:
                Proposal.objects.filter(pk=proposal.pk).update(hold_reason={})
                continue
            if policy.auto_approve_suspended and proposal.hold_reason.get("code") == HoldCode.AUTO_APPROVE_SUSPENDED:
                continue
            approved += _auto_approve(proposal=proposal, policy=policy, now=now).status == Status.APPROVED
    return approved
