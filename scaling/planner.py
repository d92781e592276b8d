"""Job-level planning: the FLIP-271 / DS2 plan for continuous dataflows (``plan_job``) and the
micro-batch planner for Spark Structured Streaming (``plan_micro_batch``, ARCHITECTURE.md).

Both take frozen values and return a ``JobPlan``; a "no change" carries its reasons. With a
``ScalerState`` they also return the next state (``JobPlan.next_state``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from scaling.evaluate import (CEIL_MAX, INF, ceil_exact, edge_output_ratio, evaluate_job, selectivity,
                              vertex_utilization)
from scaling.metrics import VertexMetrics
from scaling.microbatch import plan_micro_batch
from scaling.microbatch_sizing import EXECUTORS_KEY, MAX_OVERHEAD_FRACTION
from scaling.periods import active_period
from scaling.policy import Policy
from scaling.plan import JobPlan, VertexPlan
from scaling.reasons import AwaitingActivation, Decision, Direction, HeldScaleDown, PlanReason, Reason, VertexReason
from scaling.state import ScalerState, ScalingRecord, activation
from scaling.topology import Topology
from scaling.vertex_scaler import BLOCKED, HELD, REQUIRED, decide_vertex


__all__ = ["EXECUTORS_KEY", "MAX_OVERHEAD_FRACTION", "JobPlan", "VertexPlan", "edge_output_ratio", "plan_job",
           "plan_micro_batch"]


def _bounded(value: int, low: int, high: int) -> int:
    return max(low, min(high, value))


def _excluded_period(policy: Policy, now_s: float) -> str | None:
    return active_period(policy.excluded_periods, now_s) if policy.excluded_periods else None


def _threshold_reason(code: PlanReason, vertex_id: str, tpr: float, up: float, down: float) -> Reason:
    return Reason(code, vertex_id, {"true_processing_rate": tpr, "scale_up_threshold": up,
                                    "scale_down_threshold": down})


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
    remembered = state
    state = state if state is not None else ScalerState()
    evaluation = evaluate_job(topology, metrics, policy, restart_time_s=state.restart_time_s(policy))
    decisions = {v.id: decide_vertex(topology, v, evaluation.vertices[v.id], policy, state, now_s)
                 for v in topology.vertices}
    outside = {vid: evaluation.vertices[vid].outside_bounds for vid in decisions}
    # Flink ``ScalingExecutor.computeScalingSummary``: scale when some vertex's change is outside its
    # utilization bounds (for a due delayed scale-down, that of the recommendation it applies); then
    # every required change applies. A held scale-down is no change: it never joins (FLINK-36535).
    triggering = [vid for vid in topology.order if decisions[vid].kind == REQUIRED and decisions[vid].outside_bounds]
    held = [vid for vid in topology.order if decisions[vid].kind in (HELD, BLOCKED) and outside[vid]]
    period = _excluded_period(policy, now_s)

    pending = {p.vertex_id: p for p in state.pending_scale_downs}
    for vid, d in decisions.items():
        if d.pending is not None:
            pending[vid] = d.pending
        elif not (evaluation.backlog_mode and d.recommended < d.current):
            pending.pop(vid, None)

    reasons: list[Reason] = []
    applied: dict[str, int] = {}
    direction = 0
    if triggering:
        for vid in triggering:
            e = evaluation.vertices[vid]
            reasons.append(_threshold_reason(PlanReason.THRESHOLD_EXCEEDED, vid, e.true_processing_rate,
                                             e.scale_up_threshold, e.scale_down_threshold))
        applied = {vid: d.proposed for vid, d in decisions.items()
                   if d.kind == REQUIRED and d.proposed != d.current}
        decision = Decision.SCALE
        direction = (0 if not applied else 1 if any(new > decisions[vid].current for vid, new in applied.items())
                     else -1)
    elif held:
        for vid in held:
            e = evaluation.vertices[vid]
            reasons.append(_threshold_reason(PlanReason.CHANGE_HELD, vid, e.true_processing_rate, e.scale_up_threshold,
                                             e.scale_down_threshold).with_cause(decisions[vid].reason))
        decision = Decision.BLOCKED
        direction = -1 if any(decisions[vid].kind == HELD for vid in held) else 0
    else:
        decision = Decision.NO_CHANGE
        if any(outside.values()):
            reasons.append(Reason(PlanReason.NO_VERTEX_TO_CHANGE))
        else:
            reasons.append(Reason(PlanReason.EVERY_VERTEX_WITHIN_BOUNDS))
    # DS2's activation time (Kalavri et al., OSDI 2018, §4; ``Policy.activation_evaluations``): a
    # rescale applies only once that many consecutive evaluations recommended one in its direction
    # (a held scale-down counts as a scale-down recommendation).
    activated, streak = activation(remembered, policy, direction)
    waiting = None
    if not activated and decision == Decision.SCALE:
        waiting = AwaitingActivation(Direction.UP if streak > 0 else Direction.DOWN, abs(streak),
                                     policy.activation_evaluations)
        reasons.append(Reason(PlanReason.ACTIVATION_PENDING, None, waiting.as_json()))
        decision = Decision.BLOCKED
    if evaluation.backlog_mode:
        reasons.append(Reason(PlanReason.BACKLOG_MODE, None, {"lag_threshold_s": policy.backlog_lag_threshold_s,
                                                              "mode": "continuous"}))
    executable = period is None
    if period is not None:
        reasons.append(Reason(PlanReason.EXCLUDED_PERIOD, None, {"period": period}))
        if decision == Decision.SCALE:
            decision = Decision.BLOCKED
    blocked_by_period = period is not None and bool(applied)

    vertex_plans = []
    for vertex in topology.vertices:
        vid = vertex.id
        e, d, m = evaluation.vertices[vid], decisions[vid], metrics[vid]
        proposed = applied.get(vid, vertex.parallelism)
        reason = d.reason
        computed = {"current": vertex.parallelism, "computed": proposed}
        if blocked_by_period and vid in applied:
            reason = Reason(VertexReason.NOT_EXECUTABLE, vid, {"period": period, **computed}).with_cause(reason)
            proposed = vertex.parallelism
        elif waiting is not None and vid in applied:
            reason = Reason(VertexReason.AWAITING_ACTIVATION, vid, computed).with_cause(reason)
            proposed = vertex.parallelism
        elif not triggering and d.kind == REQUIRED:
            reason = Reason(VertexReason.NOT_NEEDED, vid).with_cause(reason)
        tpr = e.true_processing_rate
        ideal = (0 if e.target_capacity <= 0 else 1 if tpr == INF else CEIL_MAX if tpr <= 0
                 else ceil_exact(e.target_capacity * vertex.parallelism / tpr))
        vertex_plans.append(VertexPlan(
            vertex_id=vid, current=vertex.parallelism, proposed=proposed, true_processing_rate=tpr,
            true_output_rate=e.true_output_rate, selectivity=selectivity(m), target_data_rate=e.target_data_rate,
            catch_up_data_rate=e.catch_up_data_rate, ideal_parallelism=ideal, utilization=e.utilization,
            busy_core_s_per_s=vertex_utilization(m, tpr, e.target_data_rate, busiest=False) * vertex.parallelism,
            adjustable=vertex.adjustable, reason=reason,
            scale_up_threshold=e.scale_up_threshold, scale_down_threshold=e.scale_down_threshold,
            expected_processing_rate=tpr * proposed / vertex.parallelism, outside_bounds=e.outside_bounds,
            recommended=d.recommended))

    next_state = replace(state, pending_scale_downs=tuple(pending.values()), activation_streak=streak)
    if decision == Decision.SCALE:
        records = tuple(ScalingRecord(now_s, vid, decisions[vid].current, new,
                                      evaluation.vertices[vid].true_processing_rate,
                                      evaluation.vertices[vid].true_processing_rate * new / decisions[vid].current)
                        for vid, new in applied.items())
        next_state = next_state.with_records(records)
    held_values = tuple(HeldScaleDown(vid, d.current, int(d.reason.data["target"]), float(d.reason.data["first_at_s"]),
                                      float(d.reason.data["due_s"])) for vid, d in decisions.items() if d.kind == HELD)
    return JobPlan(decision=decision, reasons=tuple(reasons), vertices=tuple(vertex_plans), mode="continuous",
                   executable=executable, backlog_mode=evaluation.backlog_mode,
                   restart_time_s=evaluation.restart_time_s, next_state=next_state, held=held_values,
                   awaiting_activation=waiting)

