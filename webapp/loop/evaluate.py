"""Evaluation: a job's metric window through the scaling model (``scaling.evaluate``), stored as an
``Evaluation``, and handed to the proposals; and the beat step for one job (collect, then evaluate)."""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, replace
from datetime import datetime, timedelta

from django.utils import timezone

from scaling import ClusterState, JobPlan, PlanRequest, Policy, Topology, VertexMetrics, evaluate
from scaling.state import activated_streak, state_from_dict, state_to_dict
from webapp.loop.collect import mark_health, snapshot_collect
from webapp.jobs.bindings import stage_bindings
from webapp.jobs.models import Evaluation, Job, JobPolicy, MetricSnapshot
from webapp.jobs.selectors import snapshots_in_window

logger = logging.getLogger(__name__)


def scaling_policy(policy: JobPolicy) -> Policy:
    """The ``scaling.Policy`` of a job's policy row (every option, see ``webapp.jobs.policy_mapping``)."""
    from webapp.jobs.policy_mapping import scaling_policy as build  # noqa: PLC0415

    return build(policy)


def window_inputs(*, job: Job, snapshots: list[MetricSnapshot]
                  ) -> tuple[Topology, dict[str, VertexMetrics], ClusterState, float]:
    """The planner's inputs for a window of stored snapshots, through the one Spark → model mapping
    (:func:`sparkclient.collector.model_inputs.model_inputs`, the one the snapshot CLI uses): each snapshot
    becomes a ``JobSample`` again (:func:`snapshot_sample`), the samples a ``scaling.MetricWindow``
    weighted by their spans, so a snapshot without a completed batch weighs in with its time.

    Returns (topology, metrics per vertex id, cluster, mean batch duration in seconds).
    A stage is adjustable only when its binding to a knob is confirmed (:func:`stage_bindings`);
    the executors knob counts cores (executors of one core), up to the least of the policy's
    ``max_cores``, the executors knob's max and the cluster's capacity (:func:`executors_ceiling`).
    """
    from sparkclient.collector.model_inputs import model_inputs  # noqa: PLC0415

    bindings = stage_bindings(job=job, snapshot=snapshots[-1])

    def adjustable(vertex) -> bool:
        binding = bindings[vertex.position] if vertex.position < len(bindings) else None
        return bool(binding and binding.adjustable)

    ceiling = executors_ceiling(job=job)
    inputs = model_inputs([snapshot_sample(s) for s in snapshots], adjustable=adjustable, cores_per_executor=1,
                          min_executors=min(job.policy.min_cores, ceiling), max_executors=ceiling)
    return inputs.topology, inputs.metrics, inputs.cluster, inputs.mean_batch_s


def snapshot_sample(snapshot: MetricSnapshot):
    """A stored snapshot as the collector's ``sparkclient.collector.sample.JobSample`` again (the fields the
    mapping reads; ids and names it does not store are empty)."""
    from sparkclient.collector.sample import JobSample, VertexSample  # noqa: PLC0415

    vertices = tuple(VertexSample(
        vertex_id=v.vertex_id, name=v.name, position=v.position, is_source=v.is_source, tasks=v.tasks,
        busy_s=v.busy_s, busy_max_s=v.busy_max_s, records_in=v.records_in, records_out=v.records_out,
        spill_bytes=v.spill_bytes, upstream=tuple(v.upstream), span_s=v.span_s) for v in snapshot.vertices.all())
    return JobSample(
        run_id=snapshot.run_id, query_name=None, app_id="", window_s=snapshot.window_s, batches=snapshot.batches,
        first_batch_id=None, last_batch_id=None, vertices=vertices, backlog=snapshot.backlog,
        arrival_rate_per_s=snapshot.arrival_rate_per_s, input_rate_per_s=snapshot.input_rate_per_s,
        processed_rate_per_s=snapshot.processed_rate_per_s, batch_duration_s=snapshot.batch_duration_s,
        trigger_interval_s=snapshot.trigger_interval_s, batch_overhead_s=snapshot.batch_overhead_s,
        batch_ratio=snapshot.batch_ratio, executors=snapshot.executors, cores=snapshot.cores,
        state_rows=snapshot.state_rows, state_bytes=snapshot.state_bytes,
        collected_at=snapshot.collected_at.timestamp(), errors=tuple(snapshot.errors))


def executors_ceiling(*, job: Job) -> int:
    """The most executors a plan may ask for: the least of the policy's ``max_cores``, the executors
    knob's ``max`` and the cluster's capacity (when known); never below 1."""
    policy = job.policy
    limits = [max(policy.min_cores, policy.max_cores)]
    executors = next((k for k in job.knob_specs() if k.sets == "executors"), None)
    if executors is not None:
        limits.append(executors.max)
    if job.capacity:
        limits.append(job.capacity)
    return max(1, min(limits))


def plan_to_config(*, job: Job, plan: JobPlan) -> dict:
    """The knob values a plan asks for: the executors knob, and each bound stage's knob set to the
    stage's proposed parallelism (a knob bound to several stages takes the largest)."""
    config = dict(job.config)
    specs = job.knob_specs()
    executors = next((k for k in specs if k.sets == "executors"), None)
    if executors is not None:
        config[executors.name] = plan.executors_proposed * plan.cores_per_executor
    snapshot = job.snapshots.order_by("-collected_at").first()
    bindings = stage_bindings(job=job, snapshot=snapshot) if snapshot is not None else ()
    positions = {v.vertex_id: v.position for v in snapshot.vertices.all()} if snapshot is not None else {}
    proposed: dict[str, int] = {}
    for vertex_plan in plan.vertices:
        position = positions.get(vertex_plan.vertex_id, -1)
        binding = bindings[position] if 0 <= position < len(bindings) else None
        if binding is not None and binding.adjustable and binding.knob:
            proposed[binding.knob] = max(proposed.get(binding.knob, 0), vertex_plan.proposed)
    config.update(proposed)
    return config


def plan_as_json(plan: JobPlan) -> dict:
    """A JobPlan as JSON (infinite rates as the string ``"inf"``, as in SCENARIO.md)."""
    def clean(value):
        if isinstance(value, float):
            return "inf" if value == float("inf") else round(value, 3)
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [clean(v) for v in value]
        return value
    data = asdict(plan)
    data.pop("next_state", None)  # the job's state is stored on the job, not in every plan
    return clean(data)


def stable_snapshots(*, job: Job, snapshots: list[MetricSnapshot]) -> list[MetricSnapshot]:
    """The snapshots of the current query run, without its first ``SCALER_STABILIZATION_S`` seconds.

    FLIP-271's ``job.autoscaler.stabilization.interval``: right after a (re)start, a cold JVM, Python
    workers and state store loading make the first batches slow, and a catch-up batch carries the
    backlog; metrics from then say nothing about the steady state. A new ``run_id`` marks a restart.
    The run started at most one collect interval before its first snapshot (whose window may reach
    back over the downtime to the previous run's last batch, :func:`sparkclient.collector.topology.window_batches`).
    """
    from django.conf import settings  # noqa: PLC0415

    if not snapshots:
        return []
    run_id = snapshots[-1].run_id
    first = job.snapshots.filter(run_id=run_id).order_by("collected_at").first()
    started = first.collected_at - timedelta(seconds=min(first.window_s, settings.SCALER_COLLECT_INTERVAL_S))
    stable_from = started + timedelta(seconds=settings.SCALER_STABILIZATION_S)
    return [s for s in snapshots if s.run_id == run_id and s.collected_at - timedelta(seconds=s.window_s) >= stable_from]


def evaluation_run(*, job: Job, now: datetime | None = None) -> Evaluation | None:
    """Evaluate the metric window of ``job`` with the micro-batch planner and store the result.

    Steps: the window (None while it is not full or holds no batch), the plan (``scaling.evaluate``),
    the job's memory kept, the evaluation stored (with a live-loop hold of a scale-up), handed to the
    proposals (``proposal_create`` creates, revises, keeps or withdraws the pending proposal).
    """
    from webapp.loop.propose import proposal_create  # noqa: PLC0415 - apps depend one way at import

    now = now or timezone.now()
    snapshots = _evaluable_window(job, now)
    if snapshots is None:
        return None
    plan = _plan(job, snapshots, now)
    proposed_config = plan_to_config(job=job, plan=plan)
    direction = _evaluation_direction(job=job, plan=plan, proposed_config=proposed_config)
    _keep_pending_scale_downs(job, plan, direction=direction)
    evaluation = _store(job, plan, window_s=sum(s.window_s for s in snapshots), now=now,
                        proposed_config=proposed_config, direction=direction)
    proposal_create(evaluation=evaluation, now=now)
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


def _plan(job: Job, snapshots: list[MetricSnapshot], now: datetime) -> JobPlan:
    """The algorithm the policy names (scaling/algorithms.py registry) on the window, with the job's
    memory: pending delayed scale-downs (FLINK-36018), applied scalings, measured restart times."""
    topology, metrics, cluster, mean_batch_s = window_inputs(job=job, snapshots=snapshots)
    durations = tuple(s.batch_duration_s for s in snapshots if s.batches) or ((mean_batch_s,) if mean_batch_s else ())
    return evaluate(PlanRequest(topology=topology, metrics=metrics, policy=scaling_policy(job.policy),
                                mode="micro-batch", cluster=cluster, state=state_from_dict(job.scaler_state),
                                now_s=now.timestamp(), batch_durations_s=durations))


def _keep_pending_scale_downs(job: Job, plan: JobPlan, *, direction: str) -> None:
    """Only the pending scale-downs and the activation streak (DS2's activation time) carry over from
    an evaluation: a scaling enters the history when its execution succeeds
    (webapp.loop.execute), not when it is proposed.

    A rescale the planner activated is not applied here: it becomes a proposal that waits for its
    decision. Its streak stays full (``scaling.state.activated_streak``), so the evaluations that go
    on recommending it while it waits keep it activated instead of starting the activation time over
    every other evaluation; the execution resets it (``ScalerState.with_records``)."""
    if plan.next_state is None:
        return
    state = state_from_dict(job.scaler_state)
    streak = plan.next_state.activation_streak
    if plan.decision == "scale" and direction in (Evaluation.Direction.UP, Evaluation.Direction.DOWN):
        streak = activated_streak(scaling_policy(job.policy), 1 if direction == Evaluation.Direction.UP else -1)
    kept = replace(state, pending_scale_downs=plan.next_state.pending_scale_downs, activation_streak=streak)
    if kept != state:
        Job.objects.filter(pk=job.pk).update(scaler_state=state_to_dict(kept))
        job.scaler_state = state_to_dict(kept)


def _store(job: Job, plan: JobPlan, *, window_s: float, now: datetime, proposed_config: dict,
           direction: str) -> Evaluation:
    """The evaluation row: the plan, the configuration it maps to, its direction, and the live
    loop's hold of a scale-up (ineffective-scale-up block, restart awareness), if any."""
    plan_json = plan_as_json(plan)
    hold, hold_detail = "", {}
    if plan.decision == "scale" and direction == Evaluation.Direction.UP and proposed_config != job.config:
        hold, hold_detail = _scale_up_hold(job=job, plan=plan_json, proposed_config=proposed_config, now=now)
    return Evaluation.objects.create(
        job=job, decision=plan.decision, reasons=list(plan.reasons), plan=plan_json,
        proposed_config=proposed_config, window_s=window_s, direction=direction, hold=hold, hold_detail=hold_detail,
        held_scale_down=_held_scale_down(job=job, plan=plan))


def _evaluation_direction(*, job: Job, plan: JobPlan, proposed_config: dict) -> str:
    """Where an evaluation points: the direction of its change when it scales, else up when the load
    is above the utilization band, down when below it (``VertexPlan.outside_bounds`` is the band
    test of the micro-batch planner), none inside it."""
    from webapp.proposals.holds import config_direction  # noqa: PLC0415

    if plan.decision == "scale" and proposed_config != job.config:
        way = config_direction(job=job, current=job.config, proposed=proposed_config)
        if way in (Evaluation.Direction.UP, Evaluation.Direction.DOWN):
            return way
    if not any(v.outside_bounds for v in plan.vertices):
        return Evaluation.Direction.NONE
    high = scaling_policy(job.policy).band[1]
    return Evaluation.Direction.UP if (plan.load or 0.0) > high else Evaluation.Direction.DOWN


def _scale_up_hold(*, job: Job, plan: dict, proposed_config: dict, now: datetime) -> tuple[str, dict]:
    """The live loop's rules that keep a scale-up from becoming a proposal: the ineffective-scale-up
    block, then restart awareness (``webapp.loop.restart``). Returns ``(hold, detail)``, or
    ``("", {})`` when none applies."""
    from webapp.proposals.reasons import EvaluationHold  # noqa: PLC0415
    from webapp.loop.restart import restart_hold  # noqa: PLC0415
    from webapp.proposals.holds import blocked_knobs  # noqa: PLC0415

    blocked = blocked_knobs(job=job, current=job.config, proposed=proposed_config)
    if blocked:
        return EvaluationHold.SCALE_UP_BLOCKED, {"knobs": blocked, "proposal": job.scale_up_block.get("proposal")}
    held = restart_hold(job=job, plan=plan, now=now)
    return (str(held[0]), held[1]) if held else ("", {})


def _held_scale_down(*, job: Job, plan: JobPlan) -> dict:
    """While the planner holds a scale-down of the executors (FLINK-36018), the plan as it would
    run: ``{executors, cores, config, plan}``; else ``{}``."""
    from scaling.planner import EXECUTORS_KEY  # noqa: PLC0415

    pending = plan.next_state.pending(EXECUTORS_KEY) if plan.next_state is not None else None
    if pending is None or plan.decision == "scale" or plan.executors_current is None:
        return {}
    executors = min(plan.executors_current, pending.max_recommended)
    if executors >= plan.executors_current:
        return {}
    held = replace(plan, decision="scale", executors_proposed=executors, next_state=None,
                   vertices=tuple(replace(v, proposed=v.recommended if v.recommended is not None else v.proposed)
                                  for v in plan.vertices))
    config = plan_to_config(job=job, plan=held)
    return {"executors": executors, "cores": executors * (plan.cores_per_executor or 1), "config": config,
            "plan": plan_as_json(held)}


def collect_and_evaluate(*, job: Job) -> None:
    """One beat for one job: collect a snapshot, then evaluate unless a proposal is executing."""
    from webapp.proposals.lifecycle import BUSY  # noqa: PLC0415

    started = time.monotonic()
    snapshot = snapshot_collect(job=job)
    if snapshot is None:
        return
    busy = job.proposals.filter(status__in=BUSY).exists()
    if not busy:
        evaluation_run(job=job)
    logger.info("collected %s in %.2f s (%d batches)", job.name, time.monotonic() - started, snapshot.batches)
