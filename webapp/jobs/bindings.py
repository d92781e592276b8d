"""A job's stages bound to its knobs (:func:`sparkclient.contract.binding.bind_stages`): from the runner's
published plan stages (``Job.plan_stages``) and the tasks Spark ran in a stored snapshot."""

from __future__ import annotations

import json

from sparkclient.contract.binding import PlanStage, StageBinding, bind_stages, plan_stages_from_json
from webapp.jobs.models import Job, MetricSnapshot


def published_plan(*, job: Job) -> tuple[PlanStage, ...] | None:
    """The runner's published plan stages of ``job``, upstream first; None when none is published or
    the stored one is malformed (then no stage binds: each is a mismatch)."""
    try:
        return plan_stages_from_json(json.dumps(job.plan_stages)) if job.plan_stages else None
    except ValueError:
        return None


def stage_bindings(*, job: Job, snapshot: MetricSnapshot,
                   plan: tuple[PlanStage, ...] | None = None) -> tuple[StageBinding, ...]:
    """Each stage of ``snapshot``'s newest batch bound to its knob, from the runner's plan stages
    (``plan``, else :func:`published_plan`) and the tasks Spark ran; in stage order."""
    plan = published_plan(job=job) if plan is None else plan
    tasks = [v.tasks for v in sorted(snapshot.vertices.all(), key=lambda v: v.position)]
    return bind_stages(plan, job.knob_specs(), job.config, tasks)


def plan_bindings(*, job: Job, plan: tuple[PlanStage, ...] | None = None) -> tuple[StageBinding, ...]:
    """The runner's plan stages of ``job`` (``plan``, else :func:`published_plan`) bound to its knobs,
    each stage's tasks taken as its knob says: which knob sets which stage, and which the checkpoint
    pins. ``()`` when no (valid) plan is published."""
    plan = published_plan(job=job) if plan is None else plan
    return bind_stages(plan, job.knob_specs(), job.config, [1] * len(plan)) if plan is not None else ()


def pinned_knobs(*, job: Job, plan: tuple[PlanStage, ...] | None = None) -> list[str]:
    """The knobs of ``job`` its checkpoint pins (``PinReason.by_checkpoint``): the runner refuses any
    change of them (``state-not-repartitionable``), so no proposal may change them."""
    return sorted({b.knob for b in plan_bindings(job=job, plan=plan)
                   if b.knob and b.pin is not None and b.pin.by_checkpoint})
