"""Job-level planning for continuous dataflows: the FLIP-271 / DS2 plan (``plan_job``; the micro-batch planner
is ``scaling.planner.microbatch``). It takes frozen values and returns a ``JobPlan``; a "no change" carries its
reasons, and with a ``ScalerState`` the plan holds the next state (``JobPlan.next_state``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from scaling.planner.ds2 import JobEvaluation, evaluate_job, selectivity, vertex_utilization
from scaling.planner.gate import Gate, backlog_reason, job_gate, next_state
from scaling.planner.vertex_scaler import BLOCKED, HELD, REQUIRED, VertexDecision, decide_vertex
from scaling.policy.numbers import CEIL_MAX, INF, ceil_exact
from scaling.policy.policy import Policy
from scaling.values.metrics import VertexMetrics
from scaling.values.mode import Mode
from scaling.values.plan import JobPlan, VertexPlan
from scaling.values.reasons import Decision, HeldScaleDown, PlanReason, Reason, VertexReason
from scaling.values.state import PendingScaleDown, ScalerState, ScalingRecord
from scaling.values.topology import Topology

__all__ = ["plan_job"]


def plan_job(topology: Topology, metrics: Mapping[str, VertexMetrics], policy: Policy,
             state: ScalerState | None = None, now_s: float = 0.0) -> JobPlan:
    """FLIP-271 / DS2 plan for a continuous dataflow (one slot per unit of parallelism), in the steps of Flink's
    ``ScalingExecutor.scaleResource``:
    1. evaluate every vertex (``ds2.evaluate_job``): true rates, target and catch-up rates propagated by DS2
       Eq. 8, scale-up/down thresholds, backlog mode;
    2. per vertex (``vertex_scaler.decide_vertex``): ``ceil(current × clamp(target_capacity / TPR))``, bounds,
       alignment, FLINK-36018 delayed scale-down, ineffective scale-up detection;
    3. the scaling summary (``computeScalingSummary``): act only when a vertex with a required change is
       outside its bounds, then every required change applies together;
    4. the job-level gate (``gate.job_gate``): DS2's activation time; in an excluded period the plan is
       computed, but ``executable`` is False and nothing changes.
    ``state``: the memory (history, pending scale-downs, restart times; default: a new job); ``now_s``: the
    clock, seconds since the Unix epoch (UTC for excluded periods)."""
    remembered = state
    state = state if state is not None else ScalerState()
    evaluation = evaluate_job(topology, metrics, policy, restart_time_s=state.restart_time_s(policy))
    decisions = {v.id: decide_vertex(topology, v, evaluation.vertices[v.id], policy, state, now_s)
                 for v in topology.vertices}
    summary = _scaling_summary(topology, evaluation, decisions)
    gate = job_gate(summary.decision, summary.direction, state=remembered, policy=policy, now_s=now_s)
    reasons = [*summary.reasons, *_optional(gate.activation_reason),
               *(_optional(backlog_reason(policy, Mode.CONTINUOUS)) if evaluation.backlog_mode else ()),
               *_optional(gate.period_reason)]
    vertex_plans = tuple(_vertex_plan(topology, metrics, evaluation, decisions[v.id], summary, gate)
                         for v in topology.vertices)
    records = (ScalingRecord(now_s, vid, decisions[vid].current, new, evaluation.vertices[vid].true_processing_rate,
                             evaluation.vertices[vid].true_processing_rate * new / decisions[vid].current)
               for vid, new in summary.applied.items())
    after = next_state(state, gate, _pending_scale_downs(state, decisions, evaluation.backlog_mode), records)
    held = tuple(HeldScaleDown(vid, d.current, int(d.reason.data["target"]), float(d.reason.data["first_at_s"]),
                               float(d.reason.data["due_s"])) for vid, d in decisions.items() if d.kind == HELD)
    return JobPlan(decision=gate.decision, reasons=tuple(reasons), vertices=vertex_plans, mode=Mode.CONTINUOUS,
                   executable=gate.period is None, backlog_mode=evaluation.backlog_mode,
                   restart_time_s=evaluation.restart_time_s, next_state=after, held=held,
                   awaiting_activation=gate.awaiting)


def _optional(reason: Reason | None) -> tuple[Reason, ...]:
    return () if reason is None else (reason,)


@dataclass(frozen=True)
class _Summary:
    """Flink ``ScalingExecutor.computeScalingSummary``'s outcome: the decision before the gate, its
    reasons, the parallelism of every vertex that changes (``applied``), the direction (+1 / -1 / 0)
    for the activation time, and whether some vertex triggered the scaling."""

    decision: Decision
    reasons: tuple[Reason, ...]
    applied: Mapping[str, int]
    direction: int
    triggered: bool


def _scaling_summary(topology: Topology, evaluation: JobEvaluation,
                     decisions: Mapping[str, VertexDecision]) -> _Summary:
    """Flink ``ScalingExecutor.computeScalingSummary``: scale when some vertex's required change is
    outside its utilization bounds (for a due delayed scale-down, that of the recommendation it
    applies); then every required change applies. A held scale-down is no change: it never joins
    (FLINK-36535); held or blocked vertices outside their bounds make the job ``blocked``."""
    triggering = [vid for vid in topology.order if decisions[vid].kind == REQUIRED and decisions[vid].outside_bounds]
    if triggering:
        applied = {vid: d.proposed for vid, d in decisions.items() if d.kind == REQUIRED and d.proposed != d.current}
        direction = 0 if not applied else 1 if any(new > decisions[vid].current for vid, new in applied.items()) else -1
        return _Summary(Decision.SCALE, tuple(_threshold_reason(PlanReason.THRESHOLD_EXCEEDED, evaluation, vid)
                                              for vid in triggering), applied, direction, True)
    held = [vid for vid in topology.order
            if decisions[vid].kind in (HELD, BLOCKED) and evaluation.vertices[vid].outside_bounds]
    if held:
        reasons = tuple(_threshold_reason(PlanReason.CHANGE_HELD, evaluation, vid).with_cause(decisions[vid].reason)
                        for vid in held)
        return _Summary(Decision.BLOCKED, reasons, {}, -1 if any(decisions[vid].kind == HELD for vid in held) else 0,
                        False)
    outside = any(e.outside_bounds for e in evaluation.vertices.values())
    reason = Reason(PlanReason.NO_VERTEX_TO_CHANGE if outside else PlanReason.EVERY_VERTEX_WITHIN_BOUNDS)
    return _Summary(Decision.NO_CHANGE, (reason,), {}, 0, False)


def _threshold_reason(code: PlanReason, evaluation: JobEvaluation, vertex_id: str) -> Reason:
    """``threshold-exceeded`` / ``change-held``: the vertex's TPR against FLIP-271's thresholds."""
    e = evaluation.vertices[vertex_id]
    return Reason(code, vertex_id, {"true_processing_rate": e.true_processing_rate,
                                    "scale_up_threshold": e.scale_up_threshold,
                                    "scale_down_threshold": e.scale_down_threshold})


def _pending_scale_downs(state: ScalerState, decisions: Mapping[str, VertexDecision],
                         backlog_mode: bool) -> tuple[PendingScaleDown, ...]:
    """The delayed scale-downs to remember (FLINK-36018): a vertex's new recording replaces its
    old one; a vertex without one forgets it, except a scale-down recommended in backlog mode."""
    pending = {p.vertex_id: p for p in state.pending_scale_downs}
    for vid, d in decisions.items():
        if d.pending is not None:
            pending[vid] = d.pending
        elif not (backlog_mode and d.recommended < d.current):
            pending.pop(vid, None)
    return tuple(pending.values())


def _vertex_plan(topology: Topology, metrics: Mapping[str, VertexMetrics], evaluation: JobEvaluation,
                 d: VertexDecision, summary: _Summary, gate: Gate) -> VertexPlan:
    """One vertex's plan: the applied parallelism (the current one when the gate holds the job
    back, with the gate's reason wrapping the vertex's own), DS2's ideal parallelism π_v =
    ``ceil(target capacity × p / TPR)``, busy cores and the expected rate ``TPR × proposed / p``."""
    vid = d.vertex_id
    vertex, e, m = topology.vertex(vid), evaluation.vertices[vid], metrics[vid]
    proposed = summary.applied.get(vid, vertex.parallelism)
    reason = d.reason
    computed = {"current": vertex.parallelism, "computed": proposed}
    if gate.period is not None and vid in summary.applied:
        reason = Reason(VertexReason.NOT_EXECUTABLE, vid, {"period": gate.period, **computed}).with_cause(reason)
        proposed = vertex.parallelism
    elif gate.awaiting is not None and vid in summary.applied:
        reason = Reason(VertexReason.AWAITING_ACTIVATION, vid, computed).with_cause(reason)
        proposed = vertex.parallelism
    elif not summary.triggered and d.kind == REQUIRED:
        reason = Reason(VertexReason.NOT_NEEDED, vid).with_cause(reason)
    tpr = e.true_processing_rate
    ideal = (0 if e.target_capacity <= 0 else 1 if tpr == INF else CEIL_MAX if tpr <= 0
             else ceil_exact(e.target_capacity * vertex.parallelism / tpr))
    return VertexPlan(
        vertex_id=vid, current=vertex.parallelism, proposed=proposed, true_processing_rate=tpr,
        true_output_rate=e.true_output_rate, selectivity=selectivity(m), target_data_rate=e.target_data_rate,
        catch_up_data_rate=e.catch_up_data_rate, ideal_parallelism=ideal, utilization=e.utilization,
        busy_core_s_per_s=vertex_utilization(m, tpr, e.target_data_rate, busiest=False) * vertex.parallelism,
        adjustable=vertex.adjustable, reason=reason, scale_up_threshold=e.scale_up_threshold,
        scale_down_threshold=e.scale_down_threshold, expected_processing_rate=tpr * proposed / vertex.parallelism,
        outside_bounds=e.outside_bounds, recommended=d.recommended)
