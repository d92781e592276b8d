"""Job-level planning: the FLIP-271 / DS2 plan for continuous dataflows (``plan_job``) and the
micro-batch planner for Spark Structured Streaming (``plan_micro_batch``, ARCHITECTURE.md).

Both take frozen values and return a ``JobPlan``; a "no change" carries its reasons. With a
``ScalerState`` they also return the next state (``JobPlan.next_state``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from scaling.evaluate import (CEIL_MAX, INF, ceil_exact, edge_output_ratio, evaluate_job, selectivity,
                              vertex_utilization)
from scaling.metrics import VertexMetrics
from scaling.periods import active_period
from scaling.policy import Policy
from scaling.reasons import (
    AwaitingActivation, Decision, Direction, HeldScaleDown, Limit, PlanLimit, VertexReason, activation_text,
    excluded_period_text,
)
from scaling.state import ScalerState, ScalingRecord, activation
from scaling.topology import Topology
from scaling.vertex_scaler import BLOCKED, HELD, REQUIRED, _num, decide_vertex


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
    the job-level rules (gate, delayed scale-down, effectiveness, excluded periods). ``reason`` /
    ``reason_data``: the structured why of ``note`` (continuous mode; ``reasons.VertexReason``).
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
    reason: VertexReason | None = None
    reason_data: Mapping[str, float] = field(default_factory=dict)


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
        backlog_mode: FLIP-271 backlog processing (lag above the threshold): utilization band
            [0, 1], so a scale-down never triggers a scaling (it may join one, as in Flink).
        restart_time_s: the restart time the plan used (configured or tracked), seconds.
        algorithm: the policy in the registry that produced the plan.
        next_state: the autoscaler state after this evaluation, when a state was given.
        held: the delayed scale-downs held now (structured: vertex, target, due time).
        limits: micro-batch: what limits the plan (``reasons.Limit`` codes with their numbers).
        utilization_now / predicted_utilization: micro-batch: the busy share of each trigger
            interval at the target rate alone (no catch-up, no restart), ``Σ_v λ_v / TPR_v /
            min(tasks_v, C) / (1 − overhead)`` (0..1, ``microbatch._utilization``), on the running
            cores and on the proposed cores and tasks. None in continuous mode.
        awaiting_activation: a recommended rescale not applied yet: fewer consecutive evaluations
            than ``Policy.activation_evaluations`` recommended it (DS2's activation time).
    """

    decision: Decision
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
    held: tuple[HeldScaleDown, ...] = ()
    limits: tuple[PlanLimit, ...] = ()
    utilization_now: float | None = None
    predicted_utilization: float | None = None
    awaiting_activation: AwaitingActivation | None = None

    def limit(self, code: Limit) -> PlanLimit | None:
        """The first limit with ``code``, or None."""
        return next((item for item in self.limits if item.code == code), None)

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

    reasons: list[str] = []
    applied: dict[str, int] = {}
    direction = 0
    if triggering:
        for vid in triggering:
            e = evaluation.vertices[vid]
            reasons.append(_threshold_reason(vid, e.true_processing_rate, e.scale_up_threshold, e.scale_down_threshold))
        applied = {vid: d.proposed for vid, d in decisions.items()
                   if d.kind == REQUIRED and d.proposed != d.current}
        decision = Decision.SCALE
        direction = (0 if not applied else 1 if any(new > decisions[vid].current for vid, new in applied.items())
                     else -1)
    elif held:
        for vid in held:
            e = evaluation.vertices[vid]
            reasons.append(f"{_threshold_reason(vid, e.true_processing_rate, e.scale_up_threshold, e.scale_down_threshold)}"
                           f"; {decisions[vid].note}")
        decision = Decision.BLOCKED
        direction = -1 if any(decisions[vid].kind == HELD for vid in held) else 0
    else:
        decision = Decision.NO_CHANGE
        if any(outside.values()):
            reasons.append("no vertex outside its bounds has a parallelism to change")
        else:
            reasons.append("every vertex is within its bounds")
    # DS2's activation time (Kalavri et al., OSDI 2018, §4; ``Policy.activation_evaluations``): a
    # rescale applies only once that many consecutive evaluations recommended one in its direction
    # (a held scale-down counts as a scale-down recommendation).
    activated, streak = activation(remembered, policy, direction)
    waiting = None
    if not activated and decision == Decision.SCALE:
        waiting = AwaitingActivation(Direction.UP if streak > 0 else Direction.DOWN, abs(streak),
                                     policy.activation_evaluations)
        reasons.append(activation_text(waiting))
        decision = Decision.BLOCKED
    if evaluation.backlog_mode:
        reasons.append(f"backlog mode: a source's lag is above {_num(policy.backlog_lag_threshold_s)} s, "
                       f"scale-downs do not trigger a scaling")
    executable = period is None
    if period is not None:
        reasons.append(excluded_period_text(period))
        if decision == Decision.SCALE:
            decision = Decision.BLOCKED
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
        elif waiting is not None and vid in applied:
            note = f"awaiting activation: computed {vertex.parallelism} -> {proposed}; {note}"
            proposed = vertex.parallelism
        elif not triggering and d.kind == REQUIRED:
            note = f"within bounds: {note} not needed"
        tpr = e.true_processing_rate
        ideal = (0 if e.target_capacity <= 0 else 1 if tpr == INF else CEIL_MAX if tpr <= 0
                 else ceil_exact(e.target_capacity * vertex.parallelism / tpr))
        vertex_plans.append(VertexPlan(
            vertex_id=vid, current=vertex.parallelism, proposed=proposed, true_processing_rate=tpr,
            true_output_rate=e.true_output_rate, selectivity=selectivity(m), target_data_rate=e.target_data_rate,
            catch_up_data_rate=e.catch_up_data_rate, ideal_parallelism=ideal, utilization=e.utilization,
            busy_core_s_per_s=vertex_utilization(m, tpr, e.target_data_rate, busiest=False) * vertex.parallelism,
            adjustable=vertex.adjustable, note=note,
            scale_up_threshold=e.scale_up_threshold, scale_down_threshold=e.scale_down_threshold,
            expected_processing_rate=tpr * proposed / vertex.parallelism, outside_bounds=e.outside_bounds,
            recommended=d.recommended, reason=d.reason, reason_data=dict(d.data)))

    next_state = replace(state, pending_scale_downs=tuple(pending.values()), activation_streak=streak)
    if decision == Decision.SCALE:
        records = tuple(ScalingRecord(now_s, vid, decisions[vid].current, new,
                                      evaluation.vertices[vid].true_processing_rate,
                                      evaluation.vertices[vid].true_processing_rate * new / decisions[vid].current)
                        for vid, new in applied.items())
        next_state = next_state.with_records(records)
    held_values = tuple(HeldScaleDown(vid, d.current, int(d.data["target"]), float(d.data["first_at_s"]),
                                      float(d.data["due_s"])) for vid, d in decisions.items() if d.kind == HELD)
    return JobPlan(decision=decision, reasons=tuple(reasons), vertices=tuple(vertex_plans), mode="continuous",
                   executable=executable, backlog_mode=evaluation.backlog_mode,
                   restart_time_s=evaluation.restart_time_s, next_state=next_state, held=held_values,
                   awaiting_activation=waiting)


from scaling.microbatch import EXECUTORS_KEY, plan_micro_batch  # noqa: E402,F401 - re-exported
from scaling.microbatch_sizing import MAX_OVERHEAD_FRACTION  # noqa: E402,F401 - re-exported
