"""What holds a change back, outside the lifecycle: the job's guardrails and the direction of a
change, the ineffective-scale-up block (FLIP-271 ``ScalingEffectivenessDetection`` in the live loop)
and the delayed scale-down a job holds (FLINK-36018)."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from scaling.planner.sizing import EXECUTORS_KEY
from scaling.values.state import state_from_dict
from webapp.jobs.models import Job, JobPolicy
from webapp.jobs.plans import stored_plan
from webapp.proposals.codes import Actor, AuditAction, AuditReason, Reason
from webapp.proposals.guardrails import Guardrails, direction
from webapp.proposals.lifecycle import TransitionError, audit
from webapp.proposals.models import Proposal
from webapp.proposals.permissions import actor_name, require_operator


def job_guardrails(*, job: Job, policy: JobPolicy) -> Guardrails:
    """The guardrails of ``job``: its policy's ``guard_*`` options with its knobs (the executors knob,
    the memory knob, and every knob that sets executors, parallelism or memory)."""
    specs = job.knob_specs()
    return Guardrails(max_change_factor=policy.guard_max_change_factor,
                      max_executors=policy.guard_max_executors, directions=policy.guard_directions,
                      excluded_periods=tuple(policy.guard_excluded_periods or ()),
                      scaled_knobs=frozenset(k.name for k in specs if k.sets != "other"),
                      executors_knob=next((k.name for k in specs if k.sets == "executors"), None),
                      memory_knob=next((k.name for k in specs if k.sets == "memory"), None))




def config_direction(*, job: Job, current: dict, proposed: dict) -> str:
    """``up``, ``down`` or ``none`` for a change of ``job``'s knobs (``guardrails.direction``: by the
    executors first, else by the total partitions)."""
    return direction(job_guardrails(job=job, policy=job.policy), current, proposed)


def changed_knobs(job: Job, current: dict, proposed: dict) -> dict[str, tuple[int, int]]:
    """The executors and parallelism knobs of ``job`` that differ: ``{name: (old, new)}``."""
    scaled = job_guardrails(job=job, policy=job.policy).scaled_knobs
    return {key: (old, new) for key, new in proposed.items()
            if key in scaled and isinstance(new, int) and not isinstance(new, bool)
            and isinstance(old := current.get(key), int) and not isinstance(old, bool) and old != new}


def blocked_knobs(*, job: Job, current: dict, proposed: dict) -> list[str]:
    """The knobs a change ``current → proposed`` scales up although the job's ineffective-scale-up
    block names them (empty when no block applies)."""
    block = Job.objects.filter(pk=job.pk).values_list("scale_up_block", flat=True).first() or {}
    knobs = set(block.get("knobs") or ())
    return sorted(key for key, (old, new) in changed_knobs(job, current, proposed).items()
                  if key in knobs and new > old)


def scale_up_block_set(*, proposal: Proposal, verdict: Reason, now: datetime | None = None) -> dict:
    """After ``proposal`` was verified ineffective (``verdict``: the verification's reason): block
    further scale-ups of the knobs it raised (FLIP-271's ineffective scale-up detection,
    ``ScalingEffectivenessDetection``, in the live loop). Returns the block ``{proposal, knobs, since,
    reason}`` (``reason``: the verdict as stored); a scale-down or a change that raised nothing sets none."""
    now = now or timezone.now()
    raised = sorted(key for key, (old, new) in changed_knobs(proposal.job, proposal.current_config,
                                                              proposal.proposed_config).items() if new > old)
    if not raised:
        return {}
    block = {"proposal": proposal.pk, "knobs": raised, "since": now.isoformat(), "reason": verdict.as_json()}
    with transaction.atomic():
        before = Job.objects.filter(pk=proposal.job_id).values_list("scale_up_block", flat=True).first()
        Job.objects.filter(pk=proposal.job_id).update(scale_up_block=block)
        audit(job=proposal.job, proposal=proposal, actor=Actor.VERIFICATION, action=AuditAction.SCALE_UP_BLOCKED,
              before=before or {}, after=block,
              reason=Reason(AuditReason.INEFFECTIVE_SCALE_UP, {"proposal": proposal.pk, "knobs": raised,
                                                               "verdict": verdict.as_json()}))
    return block


def scale_up_block_clear(*, job: Job, actor, comment: str = "") -> Job:
    """A person clears the ineffective-scale-up block of ``job`` (audited).

    Raises:
        PermissionDenied: ``actor`` is not an operator.
        TransitionError: the job has no block to clear.
    """
    require_operator(actor)
    with transaction.atomic():
        locked = Job.objects.select_for_update().get(pk=job.pk)
        if not locked.scale_up_block:
            raise TransitionError(f"job {job.name} has no ineffective-scale-up block to clear")
        Job.objects.filter(pk=job.pk).update(scale_up_block={})
        reason = (Reason(AuditReason.COMMENT, {"text": comment.strip()}) if comment.strip()
                  else Reason(AuditReason.CLEARED_BY, {"actor": actor_name(actor)}))
        audit(job=job, actor=actor, action=AuditAction.SCALE_UP_BLOCK_CLEARED, before=locked.scale_up_block,
              after={}, reason=reason)
    job.refresh_from_db()
    return job


def held_scale_down(*, job: Job, now: datetime | None = None) -> dict | None:
    """The delayed scale-down (FLINK-36018 ``DelayedScaleDown``) the job holds now, or None:
    ``{cores, executors, due_at (datetime), in_s, interval_s, first_at, evaluation, config, plan}``
    (``plan``: the ``JobPlan`` as it would run, None when the stored one is not readable).
    From the job's scaler state (the pending executor scale-down) and the newest evaluation that
    recorded the held configuration."""
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
    return {"cores": held["cores"], "executors": held["executors"], "due_at": due_at,
            "in_s": max(0.0, due_s - now.timestamp()), "interval_s": interval_s,
            "first_at": datetime.fromtimestamp(pending.first_at_s, tz=due_at.tzinfo), "evaluation": evaluation,
            "config": held["config"], "plan": stored_plan(held["plan"])}
