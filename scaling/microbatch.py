"""The micro-batch planner for Spark Structured Streaming (ARCHITECTURE.md "DS2 on Spark micro-batches").

Stages of one micro-batch run one after another on the shared cores; a stage with ``n`` tasks on
``C`` cores uses ``min(n, C)`` of them, so cores beyond a stage's tasks cannot speed it up. The plan
is the smallest core count whose predicted utilization is at most the target (inside the band), with
one task per core for every adjustable stage; pinned or partition-bounded stages keep their tasks,
and cores that could only help them are not added (issue 13 item 6). ``JobPlan.limits`` says what
limits the job, as ``reasons.Limit`` codes with their numbers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

from scaling.evaluate import (
    CEIL_MAX, INF, ceil_exact, effective_busy_ms_per_s, is_processing_backlog, propagate_target_rates, selectivity,
    vertex_true_rates,
)
from scaling.metrics import ClusterState, VertexMetrics, job_utilization, task_skew
from scaling.periods import active_period
from scaling.policy import Policy
from scaling.plan import JobPlan, VertexPlan
from scaling.reason_text import limit_text  # noqa: F401 - re-exported
from scaling.reasons import (
    AwaitingActivation, Decision, Direction, HeldScaleDown, Limit, PlanLimit, PlanReason, Reason, VertexReason,
)
from scaling.state import PendingScaleDown, ScalerState, ScalingRecord, activation
from scaling.topology import Topology
from scaling.vertex_scaler import observed_scaling_coefficient, pinned_reason

from scaling.microbatch_sizing import (
    EXECUTORS_KEY, HELPS, RETENTION_WARNING_FRACTION, SEARCH_LIMIT, SKEW_REPORTED, _Stage, _tasks,
    _utilization,
    overhead_share, sizing_demand,
)


def plan_micro_batch(topology: Topology, metrics: Mapping[str, VertexMetrics], cluster: ClusterState,
                     policy: Policy, *, batch_duration_s: float | None = None, state: ScalerState | None = None,
                     now_s: float = 0.0):
    """Compute cores, executors and partitions for a Spark micro-batch job.

    Args:
        topology: the stages as vertices; ``parallelism`` = tasks per batch.
        metrics: per vertex id, window averages (records/s, busy ms/s per task; the busiest task's
            busy time ``busy_time_max_ms_per_s`` when known, so a skewed stage is seen as slow).
        cluster: executors, cores per executor, trigger interval now.
        policy: utilization target and band, catch-up and restart time, bounds, scale factors.
        batch_duration_s: mean batch duration, for SPARK-12133's batch ratio R (display only).
        state: the autoscaler's memory; with one, a lower executor count is held for
            ``scale_down_interval_s`` and then the largest recommendation of that sliding window
            applies (Flink ``DelayedScaleDown``, FLINK-36018 / FLINK-36863).
        now_s: the clock, seconds since the Unix epoch.

    Returns:
        A ``JobPlan``. Formulas:
        - ``TPR_v = in_v / busy_v`` per busy core-second (DS2 Eq. 1), with the busiest task's busy
          time when given (FLIP-271 MAX aggregation); no input → infinite (Flink);
        - ``need_v = (λ_v + catch-up_v [+ restart_v]) / TPR_v`` busy core-seconds per second;
        - predicted utilization ``U(C) = Σ_v need_v / min(tasks_v(C), C) / (1 − overhead)``;
          ``JobPlan.predicted_utilization`` is ``U`` of the target rate alone (λ_v / TPR_v) on the
          planned cores and tasks: the one formula the web app's frozen prediction shows;
        - cores = the smallest multiple of ``cores_per_executor`` with ``U(C) ≤ utilization_target``
          for the sizing demand ``max(λ_v, u × (λ_v + catch-up_v + restart_v)) / TPR_v``
          (``sizing_demand``: the target rate at ``u`` and the backlog drained within the catch-up
          duration at full capacity; Flink's ``AutoScalerUtils.getTargetProcessingCapacity`` adds
          the catch-up on top of the headroom instead) within [min, max] executors; when none
          reaches it, the fewest cores reaching the lowest ``U`` (more would not help: a pinned,
          bounded or skewed stage limits the job);
        - the executor change is clamped to ``[1 − scale_down_max_factor, 1 + scale_up_max_factor]``
          × current (Flink ``JobVertexScaler``), and no scale-down in backlog mode;
        - the job acts only when the current load leaves the utilization band (FLIP-271 thresholds).

    Raises:
        KeyError: a vertex of the topology has no metrics.
    """
    restart_s = state.restart_time_s(policy) if state is not None else policy.restart_time_s
    rates = propagate_target_rates(topology, metrics, policy, restart_time_s=restart_s)
    backlog_mode = is_processing_backlog(topology, metrics, policy)
    cores_now = cluster.cores
    cpe = cluster.cores_per_executor
    overhead_s = max((m.batch_overhead_s for m in metrics.values()), default=0.0)
    overhead = overhead_share(overhead_s, cluster.trigger_interval_s)
    target_u = policy.utilization_target
    low, high = (0.0, 1.0) if backlog_mode else policy.band

    stages: dict[str, _Stage] = {}
    busy_total = 0.0
    for vid in topology.order:
        vertex, m, r = topology.vertex(vid), metrics[vid], rates[vid]
        tpr_total, tor_total = vertex_true_rates(m)
        tpr, tor = tpr_total / vertex.parallelism, tor_total / vertex.parallelism
        busy = (m.busy_time_ms_per_s / 1000.0 * vertex.parallelism if m.busy_time_ms_per_s is not None
                and m.true_processing_rate is None else ((m.records_in_per_s or 0.0) / tpr if tpr < INF else 0.0))
        busy_total += busy
        lam = r.target_data_rate + r.catch_up_data_rate
        finite = 0 < tpr < INF
        mean_busy = m.busy_time_ms_per_s or 0.0
        skew = task_skew(effective_busy_ms_per_s(m), mean_busy)
        base = r.target_data_rate / tpr if finite else 0.0
        need_target = (lam + r.restart_data_rate) / tpr if finite else 0.0
        stages[vid] = _Stage(tpr, tor, busy, lam, base, lam / tpr if finite else 0.0, need_target, skew,
                             sizing_demand(base, need_target - base, target_u))

    tasks_now = {v.id: v.parallelism for v in topology.vertices}
    load = _utilization(stages, tasks_now, cores_now, overhead, "need_up")
    load_down = _utilization(stages, tasks_now, cores_now, overhead, "need_target")

    # The smallest cores whose predicted utilization reaches the target; cores that cannot help are not added.
    lo_exec, hi_exec = cluster.min_executors, max(cluster.max_executors, cluster.min_executors)
    # Observed scalability (Flink ``JobVertexScaler.calculateObservedScalingCoefficient``, FLINK-30571's
    # follow-up) on the executor count: a coefficient α < 1 fitted to the job's own past rescales
    # (capacity at each executor count) says more cores give less than linear gain; the predicted
    # utilization of a larger cluster is divided by it.
    alpha = 1.0
    if policy.observed_scalability_enabled and state is not None:
        executor_records = tuple(r for r in state.history if r.vertex_id == EXECUTORS_KEY)
        alpha = observed_scaling_coefficient(executor_records, policy)
    predicted: list[float] = []
    chosen = None
    total_need = sum(st.need_target for st in stages.values())
    sized_need = sum(st.need_sized for st in stages.values())
    # No fewer cores can reach the target than Σ need / target / (1 − overhead) (every stage on all
    # cores), so the search starts there; it looks at most SEARCH_LIMIT executor counts.
    first = lo_exec
    if 0 < sized_need < INF:
        first = min(hi_exec, max(lo_exec, ceil_exact(sized_need / target_u / (1.0 - overhead) / cpe) - 1))

    def at(cores: int, attr: str) -> float:
        """``U(cores)`` of the demand ``attr`` with each stage's tasks at ``cores``, divided by the
        observed scaling coefficient for more cores than now."""
        u_at = _utilization(stages, {vid: _tasks(topology, vid, cores, policy)[0] for vid in stages}, cores,
                            overhead, attr)
        return u_at / alpha if cores > cores_now else u_at

    for executors in range(first, min(hi_exec, first + SEARCH_LIMIT) + 1):
        u = at(executors * cpe, "need_sized")
        predicted.append(u)
        if u <= target_u:
            chosen = executors
            break
    if chosen is not None and at(chosen * cpe, "base") < low:
        # Issue 13 item 6 / acceptance 7: the catch-up and restart rates must not leave the target
        # rate below the band (the next evaluation would scale down again). Fewer executors whose
        # utilization at the target rate lies in [low, target] are taken instead: the catch-up then
        # drains with the band's headroom. In backlog mode ``low`` is 0 and Flink's sizing stands.
        for fewer in range(chosen - 1, lo_exec - 1, -1):
            u_base = at(fewer * cpe, "base")
            if u_base > target_u:
                break
            if u_base >= low:
                chosen = fewer
                break
    best_u = predicted[-1]
    best_exec = chosen if chosen is not None else first + next(
        k for k, u in enumerate(predicted) if u <= best_u + HELPS or u == best_u)
    executors = best_exec
    cores_needed = max(1, ceil_exact(sized_need / target_u / (1.0 - overhead))) if sized_need < INF else \
        hi_exec * cpe
    # Flink ``JobVertexScaler``: the scale factor is clamped to [1 − down-max-factor, 1 + up-max-factor].
    floor_exec = max(lo_exec, ceil_exact(cluster.executors * (1.0 - policy.scale_down_max_factor)))
    ceil_exec = min(hi_exec, max(cluster.executors, math.floor(cluster.executors * (1.0 + policy.scale_up_max_factor))))
    executors = min(max(executors, floor_exec), ceil_exec)
    if backlog_mode and executors < cluster.executors:
        executors = cluster.executors

    reasons: list[Reason] = []
    pending = {p.vertex_id: p for p in state.pending_scale_downs} if state is not None else {}
    outside_band = load > high or load_down < low
    held: tuple[HeldScaleDown, ...] = ()
    held_note: Reason | None = None
    interval = policy.scale_down_interval_s
    if state is not None and executors < cluster.executors and interval > 0:
        # Flink ``JobVertexScaler.applyScaleDownInterval`` on the executor count.
        pend = (pending.get(EXECUTORS_KEY) or PendingScaleDown(EXECUTORS_KEY, now_s, ())).record(
            now_s, executors, outside_band)
        pending[EXECUTORS_KEY] = pend
        due_s = pend.first_at_s + interval
        if now_s - interval < pend.first_at_s:
            target = pend.max_recommended
            held = (HeldScaleDown(EXECUTORS_KEY, cluster.executors, target, pend.first_at_s, due_s),)
            held_note = Reason(PlanReason.HELD_EXECUTOR_SCALE_DOWN, None, {
                "current": cluster.executors, "target": target, "due_s": due_s, "first_at_s": pend.first_at_s})
            executors = cluster.executors
        else:
            target, target_outside = pend.max_in_window(now_s - interval)
            # FLINK-36863: the largest recommendation of the window applies. Our addition (issue 13
            # item 6 and acceptance 7): not more executors than keep the current target rate inside
            # the band (``U ≥ low``), so that the scale-down is not followed by another one an
            # interval later (Flink would see the result below its scale-down threshold again).
            recommended = executors
            target = min(cluster.executors, target)
            while target > recommended and at(target * cpe, "base") < low:
                target -= 1
            executors = target
            outside_band = outside_band or target_outside
    elif state is not None:
        pending.pop(EXECUTORS_KEY, None)
    cores_planned = executors * cpe

    limits: list[PlanLimit] = []
    if chosen is None:
        if best_exec >= min(hi_exec, first + SEARCH_LIMIT):  # cores still helped at the maximum
            # Both utilizations at the maximum: at the target rate (what ``predicted_utilization`` and
            # the proposal page show) and with the catch-up and restart rates (what the sizing needs).
            limits.append(PlanLimit(Limit.MAX_EXECUTORS, None, {
                "cores_needed": cores_needed, "cores_max": hi_exec * cpe,
                "predicted_utilization": at(best_exec * cpe, "base"), "utilization_with_catch_up": best_u}))
    vertex_plans = []
    bottleneck: str | None = None
    worst_fill = 0.0
    for vid in topology.order:
        vertex, m, st, r = topology.vertex(vid), metrics[vid], stages[vid], rates[vid]
        ideal = (0 if st.lam <= 0 else 1 if st.tpr == INF else CEIL_MAX if st.tpr <= 0
                 else ceil_exact(st.lam / st.tpr / target_u))  # divided in turn: tpr × u can underflow
        pinned = pinned_reason(topology, vertex, policy)
        proposed, capped = _tasks(topology, vid, cores_planned, policy)
        note = Reason(pinned, vid) if pinned is not None else None
        if pinned is None and capped:
            note = Reason(VertexReason.CAPPED, vid, {"tasks": proposed})
        slots = min(proposed, cores_planned)
        fill = st.need_up / slots / (1.0 - overhead) if slots > 0 and st.need_up > 0 else 0.0
        if fill > target_u and (capped or pinned is not None or st.skew > SKEW_REPORTED):
            code = (Limit.PINNED_STAGE if pinned is not None else Limit.PARTITIONS if capped else Limit.BOTTLENECK)
            limits.append(PlanLimit(code, vid, {"fill": fill, "tasks": proposed, "skew": st.skew}))
        if fill > 1.0 and fill > worst_fill:
            worst_fill, bottleneck = fill, vid
        utilization = st.busy / min(vertex.parallelism, cores_now)
        others_up = sum(s.need_up / min(tasks_now[k], cores_now) for k, s in stages.items() if k != vid)
        others_down = sum(s.need_target / min(tasks_now[k], cores_now) for k, s in stages.items() if k != vid)
        slots_now = min(vertex.parallelism, cores_now)
        room_up = (high * (1.0 - overhead) - others_up) * slots_now
        room_down = (low * (1.0 - overhead) - others_down) * slots_now
        up = st.lam / room_up if room_up > 0 else INF
        down = (st.lam + r.restart_data_rate) / room_down if room_down > 0 else INF
        vertex_plans.append(VertexPlan(
            vertex_id=vid, current=vertex.parallelism, proposed=proposed, true_processing_rate=st.tpr,
            true_output_rate=st.tor, selectivity=selectivity(m), target_data_rate=r.target_data_rate,
            catch_up_data_rate=r.catch_up_data_rate, ideal_parallelism=ideal, utilization=utilization,
            busy_core_s_per_s=st.busy, adjustable=vertex.adjustable, reason=note, scale_up_threshold=up,
            scale_down_threshold=down, outside_bounds=outside_band,
            expected_processing_rate=st.tpr * slots, recommended=proposed))
        lag_s = _lag_s(m)
        if vertex.retention_s and lag_s >= RETENTION_WARNING_FRACTION * vertex.retention_s:
            limits.append(PlanLimit(Limit.RETENTION_RISK, vid, {"lag_s": lag_s, "retention_s": vertex.retention_s}))

    catch_up = _catch_up_s_at_max(topology, metrics, stages, policy, hi_exec * cpe, overhead)
    if catch_up is not None:
        limits.append(PlanLimit(Limit.CATCH_UP_UNREACHABLE, None, {
            "catch_up_s": catch_up, "catch_up_duration_s": policy.catch_up_duration_s, "cores_max": hi_exec * cpe}))

    if load > high:
        reasons.append(Reason(PlanReason.LOAD_ABOVE_BAND, None, {
            "load": load, "low": low, "high": high, "need": sum(s.need_up for s in stages.values()),
            "cores": cores_now, "overhead": overhead}))
    elif load_down < low:
        reasons.append(Reason(PlanReason.LOAD_BELOW_BAND, None, {
            "load": load_down, "low": low, "high": high, "need": total_need, "cores": cores_now}))
    for item in limits:
        reasons.append(Reason(item.code, item.vertex_id, dict(item.data)))
    if backlog_mode:
        reasons.append(Reason(PlanReason.BACKLOG_MODE, None, {"lag_threshold_s": policy.backlog_lag_threshold_s,
                                                              "mode": "micro-batch"}))
    plan = JobPlan(
        decision=Decision.NO_CHANGE, reasons=(), vertices=tuple(vertex_plans), executors_current=cluster.executors,
        executors_proposed=executors, cores_per_executor=cpe, cores_needed=cores_needed,
        load=load, utilization=job_utilization(busy_total, cores_now), overhead_fraction=overhead, bottleneck=bottleneck,
        batch_ratio=(batch_duration_s / cluster.trigger_interval_s) if batch_duration_s is not None else None,
        mode="micro-batch", backlog_mode=backlog_mode, restart_time_s=restart_s, held=held, limits=tuple(limits))
    period = active_period(policy.excluded_periods, now_s) if policy.excluded_periods else None
    changes = plan.changes
    # DS2's activation time (Kalavri et al., OSDI 2018, §4; ``Policy.activation_evaluations``): a
    # rescale applies only once that many consecutive evaluations recommended one in its direction
    # (a held scale-down counts as a scale-down recommendation).
    direction = 0
    if held_note is not None:
        direction = -1
    elif outside_band and changes:
        direction = 1 if executors > cluster.executors or any(vp.proposed > vp.current for vp in vertex_plans) else -1
    activated, streak = activation(state, policy, direction)
    waiting = None if activated or held_note is not None else AwaitingActivation(
        Direction.UP if direction > 0 else Direction.DOWN, abs(streak), policy.activation_evaluations)
    if outside_band and changes and period is None and held_note is None and waiting is None:
        decision = Decision.SCALE
    else:
        if held_note is not None:
            decision = Decision.BLOCKED
            reasons.append(held_note)
        elif waiting is not None:
            decision = Decision.BLOCKED
            reasons.append(Reason(PlanReason.ACTIVATION_PENDING, None, waiting.as_json()))
        elif outside_band and changes:
            decision = Decision.BLOCKED
        else:
            decision = Decision.NO_CHANGE
            if not outside_band:
                reasons.insert(0, Reason(PlanReason.WITHIN_BAND, None, {"load": load, "low": low, "high": high}))
            elif not changes:
                reasons.append(Reason(PlanReason.PLAN_EQUALS_RUNNING))
        vertex_plans = [replace(vp, proposed=vp.current, expected_processing_rate=vp.true_processing_rate
                                * min(vp.current, cores_now)) for vp in vertex_plans]
        executors = cluster.executors
    if period is not None:
        reasons.append(Reason(PlanReason.EXCLUDED_PERIOD, None, {"period": period}))
    next_state = None
    if state is not None:
        next_state = replace(state, pending_scale_downs=tuple(pending.values()), activation_streak=streak)
        if decision == Decision.SCALE:
            job_rate = _job_rate(topology, rates, _utilization(stages, tasks_now, cores_now, overhead, "base"))
            records = tuple(ScalingRecord(now_s, vp.vertex_id, vp.current, vp.proposed, vp.true_processing_rate,
                                          vp.true_processing_rate) for vp in vertex_plans if vp.proposed != vp.current)
            if executors != cluster.executors:
                records = (*records, ScalingRecord(now_s, EXECUTORS_KEY, cluster.executors, executors,
                                                   job_rate, job_rate * executors / cluster.executors))
            next_state = next_state.with_records(records)
    return replace(plan, decision=decision, reasons=tuple(reasons), vertices=tuple(vertex_plans),
                   executors_proposed=executors, executable=period is None, next_state=next_state,
                   utilization_now=_utilization(stages, tasks_now, cores_now, overhead, "base"),
                   predicted_utilization=at(executors * cpe, "base"), awaiting_activation=waiting)


def _job_rate(topology: Topology, rates: Mapping, load: float) -> float:
    """The source rate the current cores sustain at full load, records/s: the arrival rate over the
    utilization it causes (``load``)."""
    load_rate = sum(rates[v].target_data_rate for v in topology.order if topology.is_source(v))
    return load_rate / load if load and load < INF else 0.0


def _lag_s(m: VertexMetrics) -> float:
    """A source's backlog age estimate, seconds: ``backlog / records_in_per_s``."""
    if m.backlog <= 0:
        return 0.0
    rate = m.records_in_per_s or 0.0
    return m.backlog / rate if rate > 0 else INF


def _catch_up_s_at_max(topology: Topology, metrics: Mapping[str, VertexMetrics], stages: Mapping[str, _Stage],
                       policy: Policy, cores_max: int, overhead: float) -> float | None:
    """Seconds to drain the backlog at ``cores_max`` cores, when that exceeds ``catch_up_duration_s``
    (else None). The spare share ``1 − U_base`` of the batch drains the backlog at ``(1 / U_base − 1)``
    × the arrival rate (``U_base``: utilization of the arrivals alone)."""
    backlog = sum(metrics[v].backlog for v in topology.order if topology.is_source(v))
    if backlog <= 0 or policy.catch_up_duration_s <= 0:
        return None
    tasks = {vid: _tasks(topology, vid, cores_max, policy)[0] for vid in stages}
    u_base = _utilization(stages, tasks, cores_max, overhead, "base")
    arrival = sum((metrics[v].records_in_per_s or 0.0) + metrics[v].backlog_growth_per_s
                  for v in topology.order if topology.is_source(v))
    if u_base >= 1.0 or arrival <= 0:
        seconds = INF if u_base >= 1.0 else 0.0
    else:
        # The spare capacity drains the backlog; a product that underflows (denormal rates) drains nothing.
        drain = (1.0 / u_base - 1.0) * arrival if u_base > 0 else INF
        seconds = backlog / drain if drain > 0 else INF
    return seconds if seconds > policy.catch_up_duration_s else None

