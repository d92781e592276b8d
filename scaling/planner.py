"""Job-level planning: the FLIP-271 / DS2 plan for continuous dataflows (``plan_job``) and the
micro-batch planner for Spark Structured Streaming (``plan_micro_batch``, ARCHITECTURE.md).

Both take frozen values and return a ``JobPlan``; a "no change" carries its reasons. With a
``ScalerState`` they also return the next state (``JobPlan.next_state``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

from scaling.evaluate import (
    INF, ceil_exact, edge_output_ratio, evaluate_job, is_processing_backlog, propagate_target_rates,
    selectivity, vertex_true_rates,
)
from scaling.metrics import ClusterState, VertexMetrics
from scaling.periods import active_period
from scaling.policy import Policy
from scaling.state import PendingScaleDown, ScalerState, ScalingRecord
from scaling.topology import Topology
from scaling.vertex_scaler import (
    BLOCKED, OPTIONAL, REQUIRED, _num, align, alignment_base, decide_vertex, parallelism_bounds, pinned_reason,
)

MAX_OVERHEAD_FRACTION = 0.9
EXECUTORS_KEY = "executors"
"""The key of the executor count's pending scale-down in ``ScalerState`` (micro-batch mode)."""

__all__ = ["JobPlan", "VertexPlan", "plan_job", "plan_micro_batch", "edge_output_ratio"]


@dataclass(frozen=True)
class VertexPlan:
    """The plan for one vertex; ``proposed == current`` with a ``note`` when it does not change.

    Rates are records/s. ``true_processing_rate`` is the vertex total in continuous mode (FLIP-271)
    and per busy task slot (records per core-second) in micro-batch mode (ARCHITECTURE.md).
    ``ideal_parallelism`` is DS2's π_v: the instances (cores) the vertex would keep busy at the
    target utilization. ``utilization`` is busy time over available time (0..1).
    ``scale_up_threshold`` / ``scale_down_threshold``: FLIP-271's bounds on the true processing rate;
    ``outside_bounds`` is true when the TPR lies outside them. ``expected_processing_rate`` is
    ``TPR × proposed / current`` (linear scaling). ``recommended`` is what the model computed before
    the job-level rules (gate, delayed scale-down, effectiveness, excluded periods).
    """

    vertex_id: str
    current: int
    proposed: int
    true_processing_rate: float
    true_output_rate: float
    selectivity: float
    target_data_rate: float
    catch_up_data_rate: float
    ideal_parallelism: int
    utilization: float
    busy_core_s_per_s: float
    adjustable: bool
    note: str
    scale_up_threshold: float = 0.0
    scale_down_threshold: float = INF
    expected_processing_rate: float = 0.0
    outside_bounds: bool = False
    recommended: int | None = None


@dataclass(frozen=True)
class JobPlan:
    """The plan for a job.

    Attributes:
        decision: ``scale`` (something changes), ``no-change`` (every vertex within its bounds, or
            nothing to change), ``blocked`` (a change was computed but a rule held it back).
        reasons: why, in sentences an operator can read.
        mode: ``continuous`` or ``micro-batch``.
        executors_current / executors_proposed / cores_per_executor / cores_needed: micro-batch only
            (None in continuous mode). ``cores_needed`` is C* (task slots).
        load: micro-batch: demand over available capacity, ``Σ_v (λ_v + catch-up_v) / TPR_v /
            (cores × (1 − overhead))``, compared with the utilization band (FLIP-271 thresholds).
        utilization: micro-batch: ``Σ busy / cores``.
        bottleneck: a vertex that cannot reach its share, e.g. pinned partitions, or None.
        batch_ratio: SPARK-12133's R = batch duration / trigger interval, shown beside the plan.
        executable: False inside an excluded period: the plan is computed but must not run.
        backlog_mode: FLIP-271 backlog processing (lag above the threshold): no scale-downs.
        restart_time_s: the restart time the plan used (configured or tracked), seconds.
        algorithm: the policy in the registry that produced the plan.
        next_state: the autoscaler state after this evaluation, when a state was given.
    """

    decision: str
    reasons: tuple[str, ...]
    vertices: tuple[VertexPlan, ...]
    executors_current: int | None = None
    executors_proposed: int | None = None
    cores_per_executor: int | None = None
    cores_needed: int | None = None
    load: float | None = None
    utilization: float | None = None
    overhead_fraction: float = 0.0
    bottleneck: str | None = None
    batch_ratio: float | None = None
    mode: str = "micro-batch"
    executable: bool = True
    backlog_mode: bool = False
    restart_time_s: float = 0.0
    algorithm: str = "ds2"
    next_state: ScalerState | None = None

    def vertex(self, vertex_id: str) -> VertexPlan:
        """The plan of one vertex. Raises KeyError when unknown."""
        for plan in self.vertices:
            if plan.vertex_id == vertex_id:
                return plan
        raise KeyError(f"unknown vertex {vertex_id!r}")

    @property
    def changes(self) -> bool:
        """True when any vertex or the executor count changes."""
        return (self.executors_proposed != self.executors_current
                or any(v.proposed != v.current for v in self.vertices))


def _bounded(value: int, low: int, high: int) -> int:
    return max(low, min(high, value))


def _excluded_period(policy: Policy, now_s: float) -> str | None:
    return active_period(policy.excluded_periods, now_s) if policy.excluded_periods else None


def _threshold_reason(vertex_id: str, tpr: float, up: float, down: float) -> str:
    if tpr < up:
        return f"{vertex_id}: true processing rate {_rate(tpr)} below scale-up threshold {_rate(up)}"
    return f"{vertex_id}: true processing rate {_rate(tpr)} above scale-down threshold {_rate(down)}"


def _rate(value: float) -> str:
    """A rate for reasons: rounded to 3 decimals as in the JSON output, ``inf`` for infinity."""
    return "inf" if math.isinf(value) else repr(round(value, 3))


def plan_job(topology: Topology, metrics: Mapping[str, VertexMetrics], policy: Policy,
             state: ScalerState | None = None, now_s: float = 0.0) -> JobPlan:
    """FLIP-271 / DS2 plan for a continuous dataflow (one slot per unit of parallelism).

    1. Evaluate every vertex (``evaluate.evaluate_job``): true rates, target and catch-up rates
       propagated by DS2 Eq. 8, scale-up/down thresholds, backlog mode.
    2. Per vertex (``vertex_scaler.decide_vertex``): ``ceil(current × clamp(target_capacity / TPR))``,
       bounds, alignment, FLINK-36018 delayed scale-down, ineffective scale-up detection.
    3. The job-level gate (FLIP-271 ``ScalingExecutor``): act only when a vertex with a required
       change is outside its bounds; then every computed change applies together, held scale-downs
       included.
    4. Inside an excluded period the plan is computed, but ``executable`` is False and nothing changes.

    Args:
        state: the autoscaler's memory (history, pending scale-downs, restart times); default: new job.
        now_s: the clock, seconds since the Unix epoch (UTC for excluded periods).
    """
    state = state if state is not None else ScalerState()
    evaluation = evaluate_job(topology, metrics, policy, restart_time_s=state.restart_time_s(policy))
    decisions = {v.id: decide_vertex(topology, v, evaluation.vertices[v.id], policy, state, now_s,
                                     backlog_mode=evaluation.backlog_mode) for v in topology.vertices}
    outside = {vid: evaluation.vertices[vid].outside_bounds for vid in decisions}
    triggering = [vid for vid in topology.order if decisions[vid].kind == REQUIRED and outside[vid]]
    held = [vid for vid in topology.order if decisions[vid].kind in (OPTIONAL, BLOCKED) and outside[vid]]
    period = _excluded_period(policy, now_s)

    pending = {p.vertex_id: p for p in state.pending_scale_downs}
    for vid, d in decisions.items():
        if d.pending is not None:
            pending[vid] = d.pending
        elif not (evaluation.backlog_mode and d.recommended < d.current):
            pending.pop(vid, None)

    reasons: list[str] = []
    applied: dict[str, int] = {}
    if triggering:
        for vid in triggering:
            e = evaluation.vertices[vid]
            reasons.append(_threshold_reason(vid, e.true_processing_rate, e.scale_up_threshold, e.scale_down_threshold))
        applied = {vid: d.proposed for vid, d in decisions.items()
                   if d.kind in (REQUIRED, OPTIONAL) and d.proposed != d.current}
        decision = "scale"
    elif held:
        for vid in held:
            e = evaluation.vertices[vid]
            reasons.append(f"{_threshold_reason(vid, e.true_processing_rate, e.scale_up_threshold, e.scale_down_threshold)}"
                           f"; {decisions[vid].note}")
        decision = "blocked"
    else:
        decision = "no-change"
        if any(outside.values()):
            reasons.append("no vertex outside its bounds has a parallelism to change")
        else:
            reasons.append("every vertex is within its bounds")
    if evaluation.backlog_mode:
        reasons.append(f"backlog mode: a source's lag is above {_num(policy.backlog_lag_threshold_s)} s, "
                       f"no scale-downs")
    executable = period is None
    if period is not None:
        reasons.append(f"excluded period {period!r}: the plan is computed but not executable")
        if decision == "scale":
            decision = "blocked"
    blocked_by_period = period is not None and bool(applied)

    vertex_plans = []
    for vertex in topology.vertices:
        vid = vertex.id
        e, d, m = evaluation.vertices[vid], decisions[vid], metrics[vid]
        proposed = applied.get(vid, vertex.parallelism)
        note = d.note
        if blocked_by_period and vid in applied:
            note = f"not executable in excluded period {period!r}: computed {vertex.parallelism} -> {proposed}; {note}"
            proposed = vertex.parallelism
        elif not triggering and d.kind == REQUIRED:
            note = f"within bounds: {note} not needed"
        tpr = e.true_processing_rate
        ideal = (0 if e.target_capacity <= 0 else 1 if tpr == INF
                 else ceil_exact(e.target_capacity * vertex.parallelism / tpr))
        vertex_plans.append(VertexPlan(
            vertex_id=vid, current=vertex.parallelism, proposed=proposed, true_processing_rate=tpr,
            true_output_rate=e.true_output_rate, selectivity=selectivity(m), target_data_rate=e.target_data_rate,
            catch_up_data_rate=e.catch_up_data_rate, ideal_parallelism=ideal, utilization=e.utilization,
            busy_core_s_per_s=e.utilization * vertex.parallelism, adjustable=vertex.adjustable, note=note,
            scale_up_threshold=e.scale_up_threshold, scale_down_threshold=e.scale_down_threshold,
            expected_processing_rate=tpr * proposed / vertex.parallelism, outside_bounds=e.outside_bounds,
            recommended=d.recommended))

    next_state = replace(state, pending_scale_downs=tuple(pending.values()))
    if decision == "scale":
        records = tuple(ScalingRecord(now_s, vid, decisions[vid].current, new,
                                      evaluation.vertices[vid].true_processing_rate,
                                      evaluation.vertices[vid].true_processing_rate * new / decisions[vid].current)
                        for vid, new in applied.items())
        next_state = next_state.with_records(records)
    return JobPlan(decision=decision, reasons=tuple(reasons), vertices=tuple(vertex_plans), mode="continuous",
                   executable=executable, backlog_mode=evaluation.backlog_mode,
                   restart_time_s=evaluation.restart_time_s, next_state=next_state)


def plan_micro_batch(topology: Topology, metrics: Mapping[str, VertexMetrics], cluster: ClusterState,
                     policy: Policy, *, batch_duration_s: float | None = None, state: ScalerState | None = None,
                     now_s: float = 0.0) -> JobPlan:
    """Compute cores, executors and partitions for a Spark micro-batch job (ARCHITECTURE.md).

    Args:
        topology: the stages of the micro-batch job as vertices; ``parallelism`` = tasks per batch.
        metrics: per vertex id, averages over the window (records/s, busy ms/s per task).
        cluster: executors, cores per executor and trigger interval now.
        policy: the utilization target and band, catch-up and restart time, parallelism bounds.
        batch_duration_s: mean batch duration, for SPARK-12133's batch ratio R (display only).
        state: the autoscaler's memory. Without one the plan is stateless (no delayed scale-down);
            with one, a lower executor count is held for ``scale_down_interval_s`` (FLINK-36018).
        now_s: the clock, seconds since the Unix epoch.

    Returns:
        A JobPlan. Formulas:
        - ``TPR_v = in_v / busy_v`` (DS2 Eq. 1, records per busy core-second);
        - ``λ_v``: FLIP-271 source target rate, propagated by DS2 Eq. 8;
        - ``π_v = ceil((λ_v + catch-up_v) / (TPR_v × utilization_target))`` (DS2's optimal parallelism);
        - ``C* = ceil(Σ_v (λ_v + catch-up_v + restart_v) / TPR_v / utilization_target / (1 − overhead))``;
        - executors = ``ceil(C* / cores_per_executor)`` within [min_executors, max_executors];
        - partitions of an adjustable vertex = the cores (one wave), bounded by the source's
          partitions and by [vertex_min_parallelism, vertex_max_parallelism], and aligned to the
          source's partitions;
        - the job acts only when the load leaves the utilization band (FLIP-271 thresholds); in
          backlog mode the band's lower end is 0 (no scale-down);
        - per vertex, the thresholds are the TPR (records per busy core-second) at which the job's
          load would leave the band, all other vertices unchanged.

    Raises:
        KeyError: a vertex of the topology has no metrics.
    """
    restart_s = state.restart_time_s(policy) if state is not None else policy.restart_time_s
    rates = propagate_target_rates(topology, metrics, policy, restart_time_s=restart_s)
    backlog_mode = is_processing_backlog(topology, metrics, policy)
    cores_now = cluster.cores
    overhead_s = max((m.batch_overhead_s for m in metrics.values()), default=0.0)
    overhead = min(MAX_OVERHEAD_FRACTION, overhead_s / cluster.trigger_interval_s)
    available = cores_now * (1.0 - overhead)
    target_u = policy.utilization_target
    low, high = (0.0, 1.0) if backlog_mode else policy.band

    demand_up = demand_target = 0.0
    busy_total = 0.0
    per_vertex: dict[str, tuple[float, float, float, float, float, float]] = {}
    for vertex_id in topology.order:
        vertex, m, r = topology.vertex(vertex_id), metrics[vertex_id], rates[vertex_id]
        tpr_total, tor_total = vertex_true_rates(m)
        tpr, tor = tpr_total / vertex.parallelism, tor_total / vertex.parallelism
        busy = (m.busy_time_ms_per_s / 1000.0 * vertex.parallelism if m.busy_time_ms_per_s is not None
                and m.true_processing_rate is None else ((m.records_in_per_s or 0.0) / tpr if tpr < INF else 0.0))
        busy_total += busy
        lam = r.target_data_rate + r.catch_up_data_rate
        need_up = lam / tpr if tpr < INF else 0.0
        need_target = (lam + r.restart_data_rate) / tpr if tpr < INF else 0.0
        per_vertex[vertex_id] = (tpr, tor, busy, lam, need_up, need_target)
        # FLIP-271: scale-up threshold uses target + catch-up; the target capacity adds restart time.
        demand_up += need_up
        demand_target += need_target

    load = demand_up / available if available > 0 else INF
    load_down = demand_target / available if available > 0 else INF
    cores_needed = max(1, ceil_exact(demand_target / target_u / (1.0 - overhead)))
    executors = _bounded(math.ceil(cores_needed / cluster.cores_per_executor),
                         cluster.min_executors, cluster.max_executors)
    if backlog_mode and executors < cluster.executors:
        executors = cluster.executors

    # FLINK-36018 on the executor count (stateful calls only).
    reasons: list[str] = []
    pending = {p.vertex_id: p for p in state.pending_scale_downs} if state is not None else {}
    held_note = ""
    outside_band = load > high or load_down < low
    if state is not None and executors < cluster.executors and policy.scale_down_interval_s > 0 and outside_band:
        previous = pending.get(EXECUTORS_KEY)
        recs = (*(previous.recommendations if previous else ()), (now_s, executors))
        first = previous.first_at_s if previous else now_s
        pend = PendingScaleDown(EXECUTORS_KEY, first, recs)
        pending[EXECUTORS_KEY] = pend
        executors = min(cluster.executors, pend.max_recommended)
        if now_s < first + policy.scale_down_interval_s:
            held_note = (f"delayed scale-down of executors {cluster.executors} -> {executors} held until "
                         f"t={_num(first + policy.scale_down_interval_s)} s (first recommended at t={_num(first)} s)")
    elif state is not None:
        pending.pop(EXECUTORS_KEY, None)
    cores_planned = executors * cluster.cores_per_executor

    vertex_plans: list[VertexPlan] = []
    bottleneck: str | None = None
    worst_fill = 0.0
    for vertex_id in topology.order:
        vertex, m = topology.vertex(vertex_id), metrics[vertex_id]
        tpr, tor, busy, lam, need_up, need_target = per_vertex[vertex_id]
        r = rates[vertex_id]
        ideal = 0 if lam <= 0 else (1 if tpr == INF else ceil_exact(lam / (tpr * target_u)))
        note = ""
        reason = pinned_reason(topology, vertex, policy)
        if reason is not None:
            proposed = vertex.parallelism
            note = reason
        else:
            lower, upper = parallelism_bounds(vertex, policy)
            proposed = _bounded(cores_planned, lower, upper)
            if proposed < cores_planned:
                note = f"bounded at {proposed} (source partitions / max parallelism)"
            base = alignment_base(topology, vertex)
            if base is not None and base[1] == "partitions":
                # Align within the planned cores: one task more than the cores runs a second wave.
                proposed, align_note = align(proposed, n=base[0], unit=base[1], lower=lower,
                                             upper=max(lower, min(upper, cores_planned)), mode=policy.alignment)
                note = align_note or note
        # Wall-time share of each trigger interval this stage alone needs with its tasks.
        slots = min(proposed, cores_planned)
        fill = (lam / tpr / slots) if tpr < INF and slots > 0 else 0.0
        if fill > 1.0 - overhead and fill > worst_fill:
            worst_fill, bottleneck = fill, vertex_id
        utilization = busy / min(vertex.parallelism, cores_now)
        others_up, others_target = demand_up - need_up, demand_target - need_target
        room_up, room_down = high * available - others_up, low * available - others_target
        up = lam / room_up if room_up > 0 else INF
        down = (lam + r.restart_data_rate) / room_down if room_down > 0 else INF
        vertex_plans.append(VertexPlan(
            vertex_id=vertex_id, current=vertex.parallelism, proposed=proposed, true_processing_rate=tpr,
            true_output_rate=tor, selectivity=selectivity(m), target_data_rate=r.target_data_rate,
            catch_up_data_rate=r.catch_up_data_rate, ideal_parallelism=ideal, utilization=utilization,
            busy_core_s_per_s=busy, adjustable=vertex.adjustable, note=note, scale_up_threshold=up,
            scale_down_threshold=down, outside_bounds=outside_band,
            expected_processing_rate=tpr * min(proposed, cores_planned), recommended=proposed))

    if load > high:
        reasons.append(f"load {load:.2f} above the utilization band [{low}, {high}]: the job needs "
                       f"{demand_up:.2f} busy cores per second for its target and catch-up rate but has "
                       f"{available:.2f} ({cores_now} cores, {overhead:.0%} batch overhead)")
    elif load_down < low:
        reasons.append(f"load {load_down:.2f} below the utilization band [{low}, {high}]: {demand_target:.2f} busy "
                       f"cores per second needed of {available:.2f} available")
    if bottleneck is not None:
        reasons.append(f"{bottleneck} is the bottleneck: with its partitions it alone would fill "
                       f"{worst_fill:.0%} of each trigger interval, so more cores cannot help it")
    if backlog_mode:
        reasons.append(f"backlog mode: a source's lag is above {_num(policy.backlog_lag_threshold_s)} s, "
                       f"no scale-downs")
    plan = JobPlan(
        decision="no-change", reasons=(), vertices=tuple(vertex_plans), executors_current=cluster.executors,
        executors_proposed=executors, cores_per_executor=cluster.cores_per_executor, cores_needed=cores_needed,
        load=load, utilization=busy_total / cores_now, overhead_fraction=overhead, bottleneck=bottleneck,
        batch_ratio=(batch_duration_s / cluster.trigger_interval_s) if batch_duration_s is not None else None,
        mode="micro-batch", backlog_mode=backlog_mode, restart_time_s=restart_s)
    period = _excluded_period(policy, now_s)
    executable = period is None
    scale = outside_band and plan.changes and not held_note
    if scale and period is None:
        decision = "scale"
    else:
        if held_note and plan.changes:
            decision = "blocked"
            reasons.append(held_note)
        elif scale:
            decision = "blocked"
        else:
            decision = "no-change"
            if not outside_band:
                reasons.insert(0, f"load {load:.2f} within the utilization band [{low}, {high}]")
            elif not plan.changes:
                reasons.append("the plan equals the running configuration")
        # No change: every vertex keeps its parallelism and the executors stay.
        vertex_plans = [replace(vp, proposed=vp.current, expected_processing_rate=vp.true_processing_rate
                                * min(vp.current, cores_now)) for vp in vertex_plans]
        executors = cluster.executors
    if period is not None:
        reasons.append(f"excluded period {period!r}: the plan is computed but not executable")
    next_state = None
    if state is not None:
        next_state = replace(state, pending_scale_downs=tuple(pending.values()))
        if decision == "scale":
            load_rate = sum(rates[v].target_data_rate for v in topology.order if topology.is_source(v))
            records = tuple(ScalingRecord(now_s, vp.vertex_id, vp.current, vp.proposed, vp.true_processing_rate,
                                          vp.true_processing_rate) for vp in vertex_plans if vp.proposed != vp.current)
            if plan.executors_proposed != cluster.executors:
                job_rate = load_rate / load if load and load < INF else 0.0
                records = (*records, ScalingRecord(now_s, EXECUTORS_KEY, cluster.executors, plan.executors_proposed,
                                                   job_rate, job_rate * plan.executors_proposed / cluster.executors))
            next_state = next_state.with_records(records)
    return replace(plan, decision=decision, reasons=tuple(reasons), vertices=tuple(vertex_plans),
                   executors_proposed=executors, executable=executable, next_state=next_state)
