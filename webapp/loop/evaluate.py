"""Evaluation: a job's metric window through the scaling model (``scaling.planner.ds2``), stored as an
``Evaluation``, and handed to the proposals; and the beat step for one job (collect, then evaluate).

One evaluation reads the job's policy and its stage bindings once, into an :class:`EvaluationContext`
that every step takes."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime

from django.utils import timezone

from scaling.planner.door import decide
from scaling.planner.sizing import EXECUTORS_KEY
from scaling.policy.policy import Policy
from scaling.values.mode import Mode
from scaling.values.plan import JobPlan
from scaling.values.readiness import SampleIssue
from scaling.values.request import PlanRequest
from scaling.values.state import ScalerState, activated_streak, state_from_dict, state_to_dict
from sparkclient.contract.binding import PlanStage, StageBinding
from webapp.jobs.bindings import pinned_knobs, published_plan, stage_bindings
from webapp.jobs.memory import memory_inputs, memory_knob
from webapp.jobs.models import Evaluation, EvaluationHold, Job, MetricSnapshot
from webapp.jobs.plans import plan_fields
from webapp.jobs.policy_mapping import scaling_policy
from webapp.jobs.selectors import snapshots_in_window
from webapp.jobs.window import window_readiness
from webapp.loop.collect import mark_health, snapshot_collect
from webapp.loop.propose import proposal_create
from webapp.loop.restart import restart_hold
from webapp.loop.window import stable_snapshots, window_inputs
from webapp.proposals.holds import blocked_knobs, config_direction
from webapp.proposals.lifecycle import BUSY

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EvaluationContext:
    """What one evaluation of a job reads, once (:func:`evaluation_context`).

    Attributes:
        job: the job (with its policy row).
        policy: its ``scaling.Policy`` (``webapp.jobs.policy_mapping.scaling_policy``).
        snapshots: the stable metric window, oldest first.
        bindings: each stage of the window's newest snapshot bound to its knob, in stage order.
        positions: ``{vertex id: stage position}`` of the window's newest snapshot.
        pinned: the knobs the checkpoint pins (no proposal may change them).
        stages: the runner's published plan stages, read once (``()`` when none is published).
        now: the evaluation's time.
        state: the autoscaler's memory (``Job.scaler_state``), read once.
        not_ready: why the window is not ready (``webapp.jobs.window.window_readiness``), ``()`` when
            it is: the plan never scales down on it, whatever the algorithm.
    """

    job: Job
    policy: Policy
    snapshots: tuple[MetricSnapshot, ...]
    bindings: tuple[StageBinding, ...]
    positions: Mapping[str, int]
    pinned: tuple[str, ...]
    now: datetime
    stages: tuple[PlanStage, ...] = ()
    state: ScalerState = ScalerState()
    not_ready: tuple[SampleIssue, ...] = ()


def evaluation_context(*, job: Job, snapshots: list[MetricSnapshot], now: datetime) -> EvaluationContext:
    """The context of an evaluation of ``job`` on the window ``snapshots`` (not empty): the policy
    built and the runner's plan stages parsed and bound once."""
    plan = published_plan(job=job)
    newest = snapshots[-1]
    bindings = stage_bindings(job=job, snapshot=newest, plan=plan)
    return EvaluationContext(
        job=job, policy=scaling_policy(job.policy), snapshots=tuple(snapshots), bindings=bindings,
        positions={v.vertex_id: v.position for v in newest.vertices.all()},
        pinned=tuple(pinned_knobs(job=job, plan=plan)), now=now, stages=plan or (),
        state=state_from_dict(job.scaler_state),
        not_ready=window_readiness(snapshots=snapshots, bindings=bindings))


def plan_to_config(ctx: EvaluationContext, plan: JobPlan) -> dict:
    """The knob values a plan asks for: the executors knob, the memory knobs (the plan's heap and
    other memory sizes, MB), and
    each bound stage's knob set to the stage's proposed parallelism (a knob bound to several stages
    takes the largest)."""
    job = ctx.job
    config = dict(job.config)
    executors = next((k for k in job.knob_specs() if k.sets == "executors"), None)
    if executors is not None:
        config[executors.name] = plan.executors_proposed * plan.cores_per_executor
    memory = memory_knob(job)
    if memory is not None and plan.memory_proposed_mb is not None:
        config[memory.name] = plan.memory_proposed_mb
    config.update({size.knob: size.proposed_mb for size in plan.memory_sizes})
    proposed: dict[str, int] = {}
    for vertex_plan in plan.vertices:
        position = ctx.positions.get(vertex_plan.vertex_id, -1)
        binding = ctx.bindings[position] if 0 <= position < len(ctx.bindings) else None
        if binding is not None and binding.adjustable and binding.knob:
            proposed[binding.knob] = max(proposed.get(binding.knob, 0), vertex_plan.proposed)
    config.update(proposed)
    return config


def evaluation_run(*, job: Job, now: datetime | None = None) -> Evaluation | None:
    """Evaluate the metric window of ``job`` with the micro-batch planner and store the result.

    Steps: the window (None while it is not full or holds no batch), the plan (``decide``, the one
    door: the algorithm, the memory gate and the memory decisions), its configuration and direction,
    the autoscaler's memory kept, the evaluation stored (with a live-loop hold of a scale-up), and
    the plan handed to the proposals (``proposal_create`` creates, revises, keeps or withdraws the
    pending proposal)."""
    now = now or timezone.now()
    snapshots = _evaluable_window(job, now)
    if snapshots is None:
        return None
    ctx = evaluation_context(job=job, snapshots=snapshots, now=now)
    plan = decide(evaluation_request(ctx))
    proposed_config = plan_to_config(ctx, plan)
    direction = _evaluation_direction(ctx, plan, proposed_config)
    _keep_pending_scale_downs(ctx, plan, direction=direction)
    evaluation = _store(ctx, plan, proposed_config=proposed_config, direction=direction)
    proposal_create(evaluation=evaluation, plan=plan, now=now, pinned=ctx.pinned)
    return evaluation


def _evaluable_window(job: Job, now: datetime) -> list[MetricSnapshot] | None:
    """The stable snapshots of the job's metric window, or None (with the job's health saying why)
    while the window is not full or no micro-batch completed in it."""
    window_s = job.policy.metric_window_s
    snapshots = stable_snapshots(job=job, snapshots=snapshots_in_window(job=job, window_s=window_s, now=now))
    covered_s = sum(s.window_s for s in snapshots)
    if not snapshots or covered_s < 0.9 * window_s or not snapshots[-1].vertices.exists():
        if job.health == Job.Health.RUNNING:
            mark_health(job, Job.Health.COLLECTING, f"{covered_s:.0f} of {window_s:.0f} s of metrics in the window")
        return None
    if not any(s.batches for s in snapshots):
        # No micro-batch completed in the window (a batch longer than the window, or a stalled
        # query): its busy time is not reported yet, so the window says nothing about the load.
        mark_health(job, Job.Health.DEGRADED, f"no micro-batch completed in the last {covered_s:.0f} s: not evaluated")
        return None
    return snapshots


def evaluation_request(ctx: EvaluationContext) -> PlanRequest:
    """What the one door is asked for the window of ``ctx``: the model's inputs of the window, the
    policy, the autoscaler's memory (pending delayed scale-downs, FLINK-36018; applied scalings;
    measured restart times), the batch durations, the not-ready samples and the memory inputs."""
    topology, metrics, cluster, mean_batch_s = window_inputs(job=ctx.job, snapshots=ctx.snapshots,
                                                             bindings=ctx.bindings)
    durations = (tuple(s.batch_duration_s for s in ctx.snapshots if s.batches)
                 or ((mean_batch_s,) if mean_batch_s else ()))
    return PlanRequest(topology=topology, metrics=metrics, policy=ctx.policy, mode=Mode.MICRO_BATCH, cluster=cluster,
                       state=ctx.state, now_s=ctx.now.timestamp(), batch_durations_s=durations,
                       not_ready=ctx.not_ready,
                       memory=memory_inputs(job=ctx.job, snapshots=ctx.snapshots, stages=ctx.stages))


def _keep_pending_scale_downs(ctx: EvaluationContext, plan: JobPlan, *, direction: str) -> None:
    """Only the pending scale-downs and the activation streak (DS2's activation time) carry over from
    an evaluation: a scaling enters the history when its execution succeeds
    (webapp.loop.execute), not when it is proposed.

    A rescale the planner activated is not applied here: it becomes a proposal that waits for its
    decision. Its streak stays full (``scaling.values.state.activated_streak``), so the evaluations that go
    on recommending it while it waits keep it activated instead of starting the activation time over
    every other evaluation; the execution resets it (``ScalerState.with_records``)."""
    if plan.next_state is None:
        return
    job, state = ctx.job, ctx.state
    streak = plan.next_state.activation_streak
    if plan.decision == "scale" and direction in (Evaluation.Direction.UP, Evaluation.Direction.DOWN):
        streak = activated_streak(ctx.policy, 1 if direction == Evaluation.Direction.UP else -1)
    kept = replace(state, pending_scale_downs=plan.next_state.pending_scale_downs, activation_streak=streak)
    if kept != state:
        Job.objects.filter(pk=job.pk).update(scaler_state=state_to_dict(kept))
        job.scaler_state = state_to_dict(kept)


def _store(ctx: EvaluationContext, plan: JobPlan, *, proposed_config: dict, direction: str) -> Evaluation:
    """The evaluation row: the plan, the configuration it maps to, its direction, the live loop's
    hold of a scale-up (ineffective-scale-up block, restart awareness), if any, and of a scale-down
    on a window that is not ready (``samples_not_ready``: any algorithm's)."""
    job = ctx.job
    hold, hold_detail = "", {}
    if plan.decision == "scale" and direction == Evaluation.Direction.UP and proposed_config != job.config:
        hold, hold_detail = _scale_up_hold(ctx, plan=plan, proposed_config=proposed_config)
    if plan.decision == "scale" and direction == Evaluation.Direction.DOWN and ctx.not_ready:
        hold, hold_detail = EvaluationHold.SAMPLES_NOT_READY, {"codes": sorted({str(i.code) for i in ctx.not_ready})}
    return Evaluation.objects.create(
        job=job, decision=plan.decision, **plan_fields(plan),
        proposed_config=proposed_config, window_s=sum(s.window_s for s in ctx.snapshots), direction=direction,
        hold=hold, hold_detail=hold_detail, held_scale_down=_held_scale_down(ctx, plan))


def _evaluation_direction(ctx: EvaluationContext, plan: JobPlan, proposed_config: dict) -> str:
    """Where an evaluation points: the direction of its change when it scales, else up when the load
    is above the utilization band, down when below it (``VertexPlan.outside_bounds`` is the band
    test of the micro-batch planner), none inside it."""
    job = ctx.job
    if plan.decision == "scale" and proposed_config != job.config:
        way = config_direction(job=job, current=job.config, proposed=proposed_config)
        if way in (Evaluation.Direction.UP, Evaluation.Direction.DOWN):
            return way
    if not any(v.outside_bounds for v in plan.vertices):
        return Evaluation.Direction.NONE
    high = ctx.policy.band[1]
    return Evaluation.Direction.UP if (plan.load or 0.0) > high else Evaluation.Direction.DOWN


def _scale_up_hold(ctx: EvaluationContext, *, plan: JobPlan, proposed_config: dict) -> tuple[str, dict]:
    """The live loop's rules that keep a scale-up from becoming a proposal: the ineffective-scale-up
    block, then restart awareness (``webapp.loop.restart``). Returns ``(hold, detail)``, or
    ``("", {})`` when none applies."""
    job = ctx.job
    blocked = blocked_knobs(job=job, current=job.config, proposed=proposed_config)
    if blocked:
        return EvaluationHold.SCALE_UP_BLOCKED, {"knobs": blocked, "proposal": job.scale_up_block.get("proposal")}
    held = restart_hold(job=job, plan=plan, now=ctx.now)
    return (str(held[0]), held[1]) if held else ("", {})


def _held_scale_down(ctx: EvaluationContext, plan: JobPlan) -> dict:
    """While the planner holds a scale-down of the executors (FLINK-36018), the plan as it would
    run: ``{executors, cores, config, plan}``; else ``{}``, and ``{}`` on a window that is not ready
    (no scale-down on it, not even one a person applies from the job page)."""
    pending = plan.next_state.pending(EXECUTORS_KEY) if plan.next_state is not None else None
    if pending is None or plan.decision == "scale" or plan.executors_current is None or ctx.not_ready:
        return {}
    executors = min(plan.executors_current, pending.max_recommended)
    if executors >= plan.executors_current:
        return {}
    held = replace(plan, decision="scale", executors_proposed=executors, next_state=None,
                   vertices=tuple(replace(v, proposed=v.recommended if v.recommended is not None else v.proposed)
                                  for v in plan.vertices))
    config = plan_to_config(ctx, held)
    return {"executors": executors, "cores": executors * (plan.cores_per_executor or 1), "config": config,
            "plan": held.to_json()}


def collect_and_evaluate(*, job: Job) -> None:
    """One beat for one job: collect a snapshot, then evaluate unless a proposal is executing.

    Logs one ``webapp.loop.timing`` record per beat (:func:`log_timing`): the collection's and the
    evaluation's CPU time in this thread (``time.thread_time``), ms."""
    started, cpu = time.monotonic(), time.thread_time()
    snapshot = snapshot_collect(job=job)
    collect_ms = (time.thread_time() - cpu) * 1000
    evaluate_ms, evaluation = None, None
    if snapshot is not None and not job.proposals.filter(status__in=BUSY).exists():
        cpu = time.thread_time()
        evaluation = evaluation_run(job=job)
        evaluate_ms = (time.thread_time() - cpu) * 1000
    log_timing(job=job, collected=snapshot is not None, collect_ms=collect_ms, evaluate_ms=evaluate_ms,
               evaluated=evaluation is not None, wall_s=time.monotonic() - started)
    if snapshot is not None:
        logger.info("collected %s in %.2f s (%d batches)", job.name, time.monotonic() - started, snapshot.batches)


#: The logger of the per-beat timing records (the fleet benchmark reads them from the worker's log).
timing_logger = logging.getLogger("webapp.loop.timing")
#: What starts a timing record's log message; a JSON object follows.
TIMING_PREFIX = "loop-timing "


def log_timing(*, job: Job, collected: bool, collect_ms: float, evaluate_ms: float | None, evaluated: bool,
               wall_s: float) -> None:
    """Log one beat's timing record: ``loop-timing {"job": id, "at": epoch s, "collected": bool,
    "collect_cpu_ms": ms, "evaluate_cpu_ms": ms or null (no evaluation ran), "evaluated": whether an
    evaluation was stored, "wall_s": s}``."""
    timing_logger.info("%s%s", TIMING_PREFIX, json.dumps({
        "job": job.pk, "at": round(time.time(), 3), "collected": collected, "collect_cpu_ms": round(collect_ms, 3),
        "evaluate_cpu_ms": None if evaluate_ms is None else round(evaluate_ms, 3), "evaluated": evaluated,
        "wall_s": round(wall_s, 4)}))
