"""The micro-batch planner for Spark Structured Streaming (docs/ARCHITECTURE.md, "DS2 on Spark micro-batches").

The plan is the smallest core count whose predicted utilization is at most the target (inside the band), with
one task per core for every adjustable stage; pinned or partition-bounded stages keep their tasks, and cores
that could only help them are not added. ``JobPlan.limits`` says what limits the job, as ``reasons.Limit``
codes with their numbers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from scaling.planner.ds2 import selectivity
from scaling.planner.findings import cores_cannot_help, default_shuffle_findings, pinned_findings
from scaling.planner.gate import Gate, backlog_reason, job_gate, next_state
from scaling.planner.limits import catch_up_limit, cores_limit, time_behind_s
from scaling.planner.signals import (
    BatchSignals,
    batch_overrun,
    batch_signals,
    cores_fixed,
    keep_partitions,
    overrun_executors,
    scale_down_veto,
)
from scaling.planner.sizing import (
    EXECUTORS_KEY,
    RETENTION_WARNING_FRACTION,
    SKEW_REPORTED,
    MicroBatchModel,
    Sizing,
    evaluate_stages,
    gains_stop,
    size_cores,
)
from scaling.planner.vertex_scaler import pinned_reason
from scaling.policy.numbers import CEIL_MAX, INF, ceil_exact
from scaling.policy.policy import Policy
from scaling.values.metrics import ClusterState, VertexMetrics, job_utilization
from scaling.values.mode import Mode
from scaling.values.plan import JobPlan, VertexPlan
from scaling.values.readiness import SampleIssue
from scaling.values.reasons import Decision, HeldScaleDown, Limit, PlanLimit, PlanReason, Reason, VertexReason
from scaling.values.state import PendingScaleDown, ScalerState, ScalingRecord
from scaling.values.topology import Topology


def plan_micro_batch(topology: Topology, metrics: Mapping[str, VertexMetrics], cluster: ClusterState, policy: Policy,
                     *, batch_duration_s: float | None = None, state: ScalerState | None = None, now_s: float = 0.0,
                     batch_durations_s: Sequence[float] = (), not_ready: Sequence[SampleIssue] = ()) -> JobPlan:
    """Cores, executors and partitions for a Spark micro-batch job, in the steps of Flink's
    ``ScalingExecutor.scaleResource``: evaluate the stages, size the cores, clamp by the scale factors, the
    delayed scale-down (with ``state``; FLINK-36018 / FLINK-36863), per-stage plans and limits, the job gate.

    ``topology``: the stages, ``parallelism`` = tasks per batch; ``metrics``: window averages per vertex id
    (records/s, busy ms/s per task, the busiest task's when known); ``cluster``: executors, cores per
    executor, trigger interval (``executors_adjustable`` False pins the executors); ``batch_durations_s``: the
    window's batch durations, seconds, for SPARK-12133's batch ratio R (empty: ``batch_duration_s``, the mean,
    alone); ``not_ready``: the samples' readiness issues; ``now_s``: seconds since the Unix epoch. The formulas
    (DS2 Eq. 1, FLIP-271): docs/ARCHITECTURE.md, "DS2 on Spark micro-batches". Raises ``KeyError`` when a vertex
    of the topology has no metrics.
    """
    cluster = cores_fixed(cluster)
    job = evaluate_stages(topology, metrics, cluster, policy, state)
    load, load_down = job.now("need_up"), job.now("need_target")
    outside_band = load > job.high or load_down < job.low
    signals = batch_signals(topology, metrics, cluster, _durations(batch_durations_s, batch_duration_s), not_ready)
    sizing = size_cores(job)
    executors, overrun, veto, kept, diminishing = _measured_executors(job, sizing, signals, outside_band)
    stuck = cores_cannot_help(job) if executors > cluster.executors else None
    executors = cluster.executors if stuck is not None else executors
    delayed = _delayed_scale_down(job, executors, outside_band or overrun is not None, state, now_s)
    stage_plans, stage_limits, bottleneck = _stage_plans(job, delayed.executors, delayed.outside_band)
    stage_plans, vetoed = _vetoed_stages(job, stage_plans, veto, kept, delayed.executors)
    limits = ((stuck,) if stuck else (diminishing,) if diminishing else cores_limit(job, sizing, overrun)) + (
        *stage_limits, *catch_up_limit(job))
    changes = delayed.executors != cluster.executors or any(vp.proposed != vp.current for vp in stage_plans)
    gate = _gate(job, delayed, stage_plans, changes, state, now_s)
    reasons = _reasons(job, load, load_down, delayed, limits, changes, gate, (overrun, veto if vetoed else None))
    if gate.decision != Decision.SCALE:
        stage_plans = _as_they_are(stage_plans, cluster.cores)
    executors = delayed.executors if gate.decision == Decision.SCALE else cluster.executors
    after = (next_state(state, gate, delayed.pending.values(), _records(job, stage_plans, executors, now_s))
             if state is not None else None)
    return JobPlan(
        decision=gate.decision, reasons=reasons, vertices=stage_plans, executors_current=cluster.executors,
        executors_proposed=executors, cores_per_executor=cluster.cores_per_executor,
        cores_needed=sizing.cores_needed, load=load, utilization=job_utilization(job.busy_total, cluster.cores),
        overhead_fraction=job.overhead, bottleneck=bottleneck,
        batch_ratio=signals.ratio,
        mode=Mode.MICRO_BATCH, executable=gate.period is None, backlog_mode=job.backlog_mode,
        restart_time_s=job.restart_s,
        next_state=after, held=delayed.held, limits=limits, utilization_now=job.now("base"),
        predicted_utilization=(job.at(executors * cluster.cores_per_executor, "base") if gate.decision == Decision.SCALE
                               else job.now("base")), awaiting_activation=gate.awaiting,
        findings=(*pinned_findings(job, executors * cluster.cores_per_executor), *default_shuffle_findings(job)))


def _as_they_are(stage_plans: tuple[VertexPlan, ...], cores_now: int) -> tuple[VertexPlan, ...]:
    """The stage plans of a plan that does not scale: each stage at its current tasks, expected at its
    true processing rate on the task slots it has now."""
    return tuple(replace(vp, proposed=vp.current, expected_processing_rate=vp.true_processing_rate
                         * min(vp.current, cores_now)) for vp in stage_plans)


def _durations(batch_durations_s: Sequence[float], batch_duration_s: float | None) -> tuple[float, ...]:
    """The window's batch durations, seconds: ``batch_durations_s``, else the mean alone, else none."""
    return tuple(batch_durations_s) or ((batch_duration_s,) if batch_duration_s is not None else ())


def _clamp_by_scale_factors(executors: int, cluster: ClusterState, policy: Policy, backlog_mode: bool) -> int:
    """Step 3, Flink ``JobVertexScaler``: the executor change is clamped to [1 − scale_down_max_factor,
    1 + scale_up_max_factor] × current within [min, max] executors; no scale-down in backlog mode."""
    lo_exec, hi_exec = cluster.min_executors, max(cluster.max_executors, cluster.min_executors)
    floor_exec = max(lo_exec, ceil_exact(cluster.executors * (1.0 - policy.scale_down_max_factor)))
    ceil_exec = min(hi_exec, max(cluster.executors, math.floor(cluster.executors * (1.0 + policy.scale_up_max_factor))))
    executors = min(max(executors, floor_exec), ceil_exec)
    return cluster.executors if backlog_mode and executors < cluster.executors else executors


def _measured_executors(job: MicroBatchModel, sizing: Sizing, signals: BatchSignals, outside_band: bool
                        ) -> tuple[int, Reason | None, Reason | None, bool, PlanLimit | None]:
    """Step 3 with the measured signals (``scaling.planner.signals``): inside the band, a persistent batch
    overrun asks for the executors that bring R to the target while the model's prediction stays
    inside the band (``overrun_executors``; none fit: no overrun); cores are added only while each
    step is material (``gains_stop``: diminishing returns); the count is clamped by the scale
    factors; a veto (R ≥ ``scale_down_veto_batch_ratio``, a growing backlog) keeps at least the
    current count. Returns (executors, the overrun or None, the veto in force or None, whether the
    veto kept executors, the ``diminishing-returns`` limit or None)."""
    cluster, policy = job.cluster, job.policy
    overrun = None if outside_band else batch_overrun(signals, policy)
    wanted = sizing.executors
    if overrun is not None:
        more = overrun_executors(signals, cluster, policy,
                                 lambda n: job.at(n * cluster.cores_per_executor, "base") >= job.low)
        overrun = None if more is None else overrun
        wanted = wanted if more is None else max(wanted, more)
    start = min(max(cluster.executors, cluster.min_executors), max(cluster.max_executors, cluster.min_executors))
    wanted, diminishing = gains_stop(job, start, wanted)
    executors = _clamp_by_scale_factors(wanted, cluster, policy, job.backlog_mode)
    veto = scale_down_veto(signals, policy)
    if veto is None or executors >= cluster.executors:
        return executors, overrun, veto, False, diminishing
    return cluster.executors, overrun, veto, True, diminishing


def _vetoed_stages(job: MicroBatchModel, stage_plans: tuple[VertexPlan, ...], veto: Reason | None,
                   executors_kept: bool, executors: int) -> tuple[tuple[VertexPlan, ...], bool]:
    """Under a veto no stage loses task slots on ``executors`` (``signals.keep_partitions``).
    Returns (the stage plans, whether the veto kept anything: ``executors_kept`` or a stage's tasks)."""
    if veto is None:
        return stage_plans, False
    plans, kept = keep_partitions(stage_plans, executors * job.cluster.cores_per_executor, job.cluster.cores)
    return plans, kept or executors_kept


@dataclass(frozen=True)
class _Delayed:
    """Step 4's outcome: the executors after the delayed scale-down, the scale-down held (with its
    reason), the pending scale-downs to remember, and whether the job counts as outside its band."""

    executors: int
    held: tuple[HeldScaleDown, ...]
    reason: Reason | None
    pending: dict[str, PendingScaleDown]
    outside_band: bool


def _delayed_scale_down(job: MicroBatchModel, executors: int, outside_band: bool, state: ScalerState | None,
                        now_s: float) -> _Delayed:
    """Step 4, Flink ``JobVertexScaler.applyScaleDownInterval`` (FLINK-36018) on the executor count:
    with a state, a lower count is recorded and held for ``scale_down_interval_s`` after the first
    recommendation; then the largest recommendation of that sliding window applies (FLINK-36863), but
    not more executors than keep the current target rate inside the band (``U ≥ low``; where this
    differs from Flink: docs/ARCHITECTURE.md, "Delayed scale-down")."""
    current, interval = job.cluster.executors, job.policy.scale_down_interval_s
    pending = {p.vertex_id: p for p in state.pending_scale_downs} if state is not None else {}
    if state is None or executors >= current or interval <= 0:
        if state is not None:
            pending.pop(EXECUTORS_KEY, None)
        return _Delayed(executors, (), None, pending, outside_band)
    pend = (pending.get(EXECUTORS_KEY) or PendingScaleDown(EXECUTORS_KEY, now_s, ())).record(
        now_s, executors, outside_band)
    pending[EXECUTORS_KEY] = pend
    if now_s - interval < pend.first_at_s:
        due_s, target = pend.first_at_s + interval, pend.max_recommended
        reason = Reason(PlanReason.HELD_EXECUTOR_SCALE_DOWN, None, {
            "current": current, "target": target, "due_s": due_s, "first_at_s": pend.first_at_s})
        return _Delayed(current, (HeldScaleDown(EXECUTORS_KEY, current, target, pend.first_at_s, due_s),), reason,
                        pending, outside_band)
    target, target_outside = pend.max_in_window(now_s - interval)
    target = min(current, target)
    while target > executors and job.at(target * job.cluster.cores_per_executor, "base") < job.low:
        target -= 1
    return _Delayed(target, (), None, pending, outside_band or target_outside)


def _stage_plans(job: MicroBatchModel, executors: int,
                 outside_band: bool) -> tuple[tuple[VertexPlan, ...], list[PlanLimit], str | None]:
    """Step 5: every stage's plan on ``executors`` (``_stage_plan``), the limits it reports
    (``pinned-stage``, ``partitions``, ``bottleneck``, ``retention-risk``), and the bottleneck: the
    stage that alone fills most of each trigger interval beyond it (None when none overfills it)."""
    thresholds = _band_thresholds(job)
    plans, limits = [], []
    bottleneck, worst_fill = None, 0.0
    for vid in job.topology.order:
        plan, fill, stage_limits = _stage_plan(job, vid, executors * job.cluster.cores_per_executor,
                                               thresholds[vid], outside_band)
        plans.append(plan)
        limits.extend(stage_limits)
        if fill > 1.0 and fill > worst_fill:
            worst_fill, bottleneck = fill, vid
    return tuple(plans), limits, bottleneck


def _band_thresholds(job: MicroBatchModel) -> dict[str, tuple[float, float]]:
    """Per stage, FLIP-271's scale-up and scale-down thresholds on its rate (records/s): the rate at
    which the job's load, the other stages' demand fixed, reaches the band's upper and lower edge:
    ``λ / ((high × (1 − overhead) − Σ_others need_up / slots) × slots_v)`` (``(λ + restart) / ...``
    with ``low`` and ``need_target`` for the scale-down), infinite when there is no room. The
    others' sums are prefix + suffix sums, so all stages take one pass (no stage re-sums the others,
    and no total minus a large own term loses the others' small ones)."""
    cores_now, overhead = job.cluster.cores, job.overhead
    vids = list(job.stages)
    slots = [min(job.topology.vertex(vid).parallelism, cores_now) for vid in vids]
    up_terms = [job.stages[vid].need_up / slots[i] for i, vid in enumerate(vids)]
    down_terms = [job.stages[vid].need_target / slots[i] for i, vid in enumerate(vids)]
    others_up, others_down = _others(up_terms), _others(down_terms)
    result = {}
    for i, vid in enumerate(vids):
        st = job.stages[vid]
        room_up = (job.high * (1.0 - overhead) - others_up[i]) * slots[i]
        room_down = (job.low * (1.0 - overhead) - others_down[i]) * slots[i]
        result[vid] = (st.lam / room_up if room_up > 0 else INF,
                       (st.lam + job.rates[vid].restart_data_rate) / room_down if room_down > 0 else INF)
    return result


def _others(terms: list[float]) -> list[float]:
    """For each position, the sum of every other term: ``prefix[i] + suffix[i + 1]``."""
    prefix, total = [], 0.0
    for term in terms:
        prefix.append(total)
        total += term
    others, total = [0.0] * len(terms), 0.0
    for i in range(len(terms) - 1, -1, -1):
        others[i] = prefix[i] + total
        total += terms[i]
    return others


def _stage_plan(job: MicroBatchModel, vid: str, cores: int, thresholds: tuple[float, float],
                outside_band: bool) -> tuple[VertexPlan, float, list[PlanLimit]]:
    """One stage on ``cores`` cores: its tasks (one per core unless pinned or capped), DS2's ideal
    parallelism π_v = ceil(λ / TPR / u), its fill of each trigger interval ``need_up / min(tasks,
    C) / (1 − overhead)``, and the limits it reports. Returns (plan, fill, limits)."""
    topology, policy = job.topology, job.policy
    vertex, m, st, r = topology.vertex(vid), job.metrics[vid], job.stages[vid], job.rates[vid]
    target_u = policy.utilization_target
    ideal = (0 if st.lam <= 0 else 1 if st.tpr == INF else CEIL_MAX if st.tpr <= 0
             else ceil_exact(st.lam / st.tpr / target_u))  # divided in turn: tpr × u can underflow
    pinned = pinned_reason(topology, vertex, policy)
    proposed, capped = job.tasks_at(cores)[vid], job.capped_at(cores)[vid]
    reason = Reason(pinned, vid) if pinned is not None else None
    if pinned is None and capped:
        reason = Reason(VertexReason.CAPPED, vid, {"tasks": proposed})
    slots = min(proposed, cores)
    fill = st.need_up / slots / (1.0 - job.overhead) if slots > 0 and st.need_up > 0 else 0.0
    limits = []
    bound = capped or job.tasks_at(cores + job.cluster.cores_per_executor)[vid] <= proposed  # more cores: no more tasks
    if fill > target_u and (bound or pinned is not None or st.skew > SKEW_REPORTED):
        code = Limit.PINNED_STAGE if pinned is not None else Limit.PARTITIONS if bound else Limit.BOTTLENECK
        limits.append(PlanLimit(code, vid, {"fill": fill, "tasks": proposed, "skew": st.skew}))
    lag_s = time_behind_s(m)
    if vertex.retention_s and lag_s >= RETENTION_WARNING_FRACTION * vertex.retention_s:
        limits.append(PlanLimit(Limit.RETENTION_RISK, vid, {"lag_s": lag_s, "retention_s": vertex.retention_s}))
    plan = VertexPlan(
        vertex_id=vid, current=vertex.parallelism, proposed=proposed, true_processing_rate=st.tpr,
        true_output_rate=st.tor, selectivity=selectivity(m), target_data_rate=r.target_data_rate,
        catch_up_data_rate=r.catch_up_data_rate, ideal_parallelism=ideal,
        utilization=st.busy / min(vertex.parallelism, job.cluster.cores), busy_core_s_per_s=st.busy,
        adjustable=vertex.adjustable, reason=reason, scale_up_threshold=thresholds[0],
        scale_down_threshold=thresholds[1], outside_bounds=outside_band, expected_processing_rate=st.tpr * slots,
        recommended=proposed)
    return plan, fill, limits


def _gate(job: MicroBatchModel, delayed: _Delayed, stage_plans: tuple[VertexPlan, ...], changes: bool,
          state: ScalerState | None, now_s: float) -> Gate:
    """Step 6, the job-level gate (``gate.job_gate``): the job scales when its load is outside the
    band (FLIP-271 thresholds on the job) and the plan changes something; a held scale-down blocks
    it and counts as a scale-down recommendation for DS2's activation time."""
    if delayed.reason is not None:
        decision, direction = Decision.BLOCKED, -1
    elif delayed.outside_band and changes:
        up = delayed.executors > job.cluster.executors or any(vp.proposed > vp.current for vp in stage_plans)
        decision, direction = Decision.SCALE, 1 if up else -1
    else:
        decision, direction = Decision.NO_CHANGE, 0
    return job_gate(decision, direction, state=state, policy=job.policy, now_s=now_s)


def _reasons(job: MicroBatchModel, load: float, load_down: float, delayed: _Delayed, limits: tuple[PlanLimit, ...],
             changes: bool, gate: Gate, signals: tuple[Reason | None, Reason | None]) -> tuple[Reason, ...]:
    """The plan's reasons: the load against the band (``load-above-band``, ``load-below-band`` or
    ``within-band``), the measured signals (``signals``: ``batch-overrun``, and ``scale-down-
    vetoed`` when the veto kept something while the job is outside its band), the limits,
    backlog mode, what held the change back (``held-executor-scale-down``, ``activation-pending``)
    or ``plan-equals-running``, and the excluded period."""
    band = {"low": job.low, "high": job.high}
    first: list[Reason] = []
    if load > job.high:
        first.append(Reason(PlanReason.LOAD_ABOVE_BAND, None, {
            "load": load, **band, "need": sum(s.need_up for s in job.stages.values()), "cores": job.cluster.cores,
            "overhead": job.overhead}))
    elif load_down < job.low:
        first.append(Reason(PlanReason.LOAD_BELOW_BAND, None, {
            "load": load_down, **band, "need": sum(s.need_target for s in job.stages.values()),
            "cores": job.cluster.cores}))
    elif not delayed.outside_band and delayed.reason is None and gate.awaiting is None:
        first.append(Reason(PlanReason.WITHIN_BAND, None, {"load": load, **band}))
    overrun, vetoed = signals
    first.extend(r for r in (overrun, vetoed if delayed.outside_band else None) if r is not None)
    then: list[Reason] = [Reason(item.code, item.vertex_id, dict(item.data)) for item in limits]
    if job.backlog_mode:
        then.append(backlog_reason(job.policy, Mode.MICRO_BATCH))
    if delayed.reason is not None:
        then.append(delayed.reason)
    elif gate.awaiting is not None:
        then.append(gate.activation_reason)
    elif delayed.outside_band and not changes:
        then.append(Reason(PlanReason.PLAN_EQUALS_RUNNING))
    if gate.period_reason is not None:
        then.append(gate.period_reason)
    return (*first, *then)


def _records(job: MicroBatchModel, stage_plans: tuple[VertexPlan, ...], executors: int,
             now_s: float) -> tuple[ScalingRecord, ...]:
    """The scalings a ``scale`` applies, for the history: each changed stage (its TPR per core), and
    the executor count with the source rate the current cores sustain at full load (``_job_rate``),
    which the observed scaling coefficient of the executors is fitted to."""
    records = tuple(ScalingRecord(now_s, vp.vertex_id, vp.current, vp.proposed, vp.true_processing_rate,
                                  vp.true_processing_rate) for vp in stage_plans if vp.proposed != vp.current)
    current = job.cluster.executors
    if executors == current:
        return records
    job_rate = _job_rate(job.topology, job.rates, job.now("base"))
    return (*records, ScalingRecord(now_s, EXECUTORS_KEY, current, executors, job_rate, job_rate * executors / current))


def _job_rate(topology: Topology, rates: Mapping, load: float) -> float:
    """The source rate the current cores sustain at full load, records/s: the arrival rate over the
    utilization it causes (``load``)."""
    load_rate = sum(rates[v].target_data_rate for v in topology.order if topology.is_source(v))
    return load_rate / load if load and load < INF else 0.0
