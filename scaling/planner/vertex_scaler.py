"""Per-vertex scaling (Flink ``JobVertexScaler``): scale factor, bounds, alignment to partitions or
key groups (Flink ``alignment.ParallelismAligner``), delayed scale-down (Flink ``DelayedScaleDown``,
FLINK-36018 / FLINK-36535 / FLINK-36863), observed scalability and ineffective scale-up detection."""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal

from scaling.planner.ds2 import VertexEvaluation
from scaling.policy.numbers import INF, ceil_exact
from scaling.policy.policy import Policy
from scaling.values.reasons import Reason, VertexChange, VertexReason
from scaling.values.state import HISTORY_MAX_AGE_S, PendingScaleDown, ScalerState, ScalingRecord
from scaling.values.topology import Topology, Vertex

NO_CHANGE = VertexChange.NONE
REQUIRED = VertexChange.REQUIRED
HELD = VertexChange.HELD
BLOCKED = VertexChange.BLOCKED
MAX_INT = 2**31 - 1


@dataclass(frozen=True)
class VertexDecision:
    """The outcome for one vertex before the job-level gate (Flink ``ParallelismChange``): ``recommended``, the
    parallelism the model computes (factor, bounds, alignment); ``proposed``, what it runs if the job scales now
    (``recommended`` for a required change, the window's largest recommendation for a due delayed scale-down,
    else the current); ``kind``, a ``VertexChange`` (``held``: a delayed scale-down inside its interval, not
    applied even if another vertex scales, FLINK-36535); ``outside_bounds``, whether it counts for the gate
    (Flink ``ParallelismChange.isOutsideUtilizationBound``; for a due delayed scale-down, that of the
    recommendation it applies); ``reason``, a ``VertexReason`` with its numbers (``reason_text`` words it);
    ``pending``, the delayed scale-down after this evaluation or None; ``ineffective``, the last scale-up of
    this vertex was measured ineffective."""

    vertex_id: str
    current: int
    recommended: int
    proposed: int
    kind: VertexChange
    reason: Reason
    pending: PendingScaleDown | None = None
    ineffective: bool = False
    outside_bounds: bool = False


def parallelism_bounds(vertex: Vertex, policy: Policy, current: int | None = None, *,
                       cap_at_partitions: bool = True) -> tuple[int, int]:
    """``[lower, upper]`` for a vertex running ``current`` tasks (default its parallelism), Flink
    ``JobVertexScaler.computeScaleTargetParallelism``: ``[min(current, vertex.min-parallelism), max(current,
    vertex.max-parallelism)]``, the upper end capped by the max parallelism (key groups) and, with
    ``cap_at_partitions``, a source's partitions (docs/ARCHITECTURE.md, "Parallelism bounds")."""
    current = vertex.parallelism if current is None else current
    lower = min(current, policy.vertex_min_parallelism)
    upper = min(max(current, policy.vertex_max_parallelism), vertex.max_parallelism)
    if vertex.partitions and cap_at_partitions:
        upper = min(upper, vertex.partitions)
    return min(lower, upper), upper


def alignment_base(topology: Topology, vertex: Vertex) -> tuple[int, str] | None:
    """What to align to (Flink ``ParallelismAlignmentMode.isApplicable``): ``(partitions,
    "partitions")`` for a source with partitions, ``(max_parallelism, "key groups")`` for a vertex
    behind a hash edge, else None."""
    if vertex.partitions and topology.is_source(vertex.id):
        return vertex.partitions, "partitions"
    if any(edge.ship == "hash" for edge in topology.inputs(vertex.id)):
        return vertex.max_parallelism, "key groups"
    return None


def first_aligned_in_region(current: int, target: int, n: int, upper: int, *, load_reducing: bool) -> int:
    """Flink ``ParallelismAligner.firstAlignedInRegion``: scan upward from ``target`` for a divisor
    of ``n`` (or, with ``load_reducing``, a parallelism whose per-task share ``n // p`` is below
    ``n // target``). Region: ``[target, min(n, upper)]`` for a scale-up, ``[target, min(current, n,
    upper)]`` for a scale-down. Returns 0 when none is found."""
    cap = min(n, upper)
    end = cap if target > current else min(current, cap)
    for p in range(target, end + 1):
        if n % p == 0 or (load_reducing and n // p < n // target):
            return p
    return 0


def relaxed_downward_fallback(target: int, n: int, lower: int) -> int:
    """Flink ``ParallelismAligner.relaxedDownwardFallback`` (legacy adjust modes only)."""
    p = target
    while p > 0:
        if n // p > n // target:
            if n % p != 0:
                p += 1
            break
        p -= 1
    return max(p, lower)


def align_parallelism(current: int, target: int, *, n: int, lower: int, upper: int, mode: str,
                      legacy: bool = False) -> tuple[int, bool]:
    """Align ``target`` to ``n`` partitions or key groups. Returns ``(parallelism, blocked)``.

    - ``balanced`` / ``evenly_spread`` / ``off``: Flink main's ``BuiltInAlignmentMode`` (FLIP-586):
      the first accepted value of the region (``balanced`` also accepts a load-reducing one), or the
      target unchanged when none is found: alignment never vetoes a scaling. So 128 key groups at
      20 → 18 with ``evenly_spread`` goes to 18.
    - ``legacy`` (``key_group_partitions_adjust_mode``: ``evenly_spread`` / ``maximize_utilisation``):
      Flink ``KeyGroupOrPartitionsAdjustMode``: the same search, then the relaxed downward fallback,
      and the current parallelism (``blocked``) when that would invert the direction.
    """
    if target == current or mode == "off" or n < 1:
        return target, False
    if legacy:
        aligned = first_aligned_in_region(current, target, n, upper, load_reducing=mode == "maximize_utilisation")
        if aligned > 0:
            return aligned, False
        candidate = relaxed_downward_fallback(target, n, lower)
        if (target > current and candidate <= current) or (target < current and candidate >= current):
            return current, True
        return candidate, False
    aligned = first_aligned_in_region(current, target, n, upper, load_reducing=mode == "balanced")
    return (aligned if aligned > 0 else target), False


def observed_scaling_coefficient(history: tuple[ScalingRecord, ...], policy: Policy) -> float:
    """Flink ``JobVertexScaler.calculateObservedScalingCoefficient`` (observed scalability,
    FLINK-30571's follow-up): fit ``R_i = β · α · P_i`` by least squares over the vertex's past
    scalings (``P_i`` the parallelism the TPR ``R_i`` was measured at), ``β`` the TPR per task at the
    latest smallest parallelism; ``α`` clamped to ``[coefficient_min, 1]``, rounded up to 2 decimals.
    1.0 (linear) with fewer than ``observed_scalability_min_observations`` records; 1.0 as well when a
    past TPR is infinite (Flink's α is then infinite and clamped)."""
    observations = [(float(r.old_parallelism), r.true_processing_rate) for r in history if r.old_parallelism > 0]
    if not observations or len(observations) < policy.observed_scalability_min_observations:
        return 1.0
    smallest = None
    for p, rate in reversed(observations):
        if p == 1:
            smallest = (p, rate)
            break
        if smallest is None or p < smallest[0]:
            smallest = (p, rate)
    assert smallest is not None
    baseline = smallest[1] / smallest[0]
    squared = sum(p * p for p, _ in observations)
    if not 0 < baseline < INF or squared == 0:
        return 1.0   # Flink: 1.0 for a NaN baseline; an infinite one makes its α NaN (it throws there)
    total = sum(p * r for p, r in observations)
    # Flink ``optimizeLinearScalingCoefficient``: ``sum / (squaredSum * baseline)`` in that order; a
    # past TPR of infinity (an idle vertex) or an underflowing product gives α = ∞, clamped to 1.
    denominator = squared * baseline
    alpha = total / denominator if denominator > 0 and math.isfinite(total) else INF
    alpha = max(policy.observed_scalability_coefficient_min, min(1.0, alpha))
    # ``BigDecimal.valueOf(α).setScale(2, RoundingMode.CEILING)``: rounded up on α's shortest decimal form.
    return float(Decimal(repr(alpha)).quantize(Decimal("0.01"), rounding=ROUND_CEILING))


@dataclass(frozen=True)
class Recommendation:
    """``compute_parallelism``'s result: the parallelism and why (a ``VertexReason`` with its numbers)."""

    parallelism: int
    reason: Reason


def compute_parallelism(topology: Topology, vertex: Vertex, evaluation: VertexEvaluation,
                        policy: Policy, coefficient: float = 1.0) -> Recommendation:
    """The recommended parallelism of one vertex (Flink ``computeScaleTargetParallelism`` + ``scale``).

    ``factor = target_capacity / TPR`` (target capacity rounded, Flink ``AutoScalerUtils.
    getTargetProcessingCapacity``), divided by the observed scaling ``coefficient``, clamped to
    ``[1 − scale_down_max_factor, 1 + scale_up_max_factor]``; ``new = ceil(factor × current)`` within
    ``parallelism_bounds``, then aligned. An idle vertex (infinite TPR, e.g. a Spark no-data batch)
    has factor 0, so it obeys ``scale_down_max_factor`` (Flink ``testScaleDownWithZeroProcessingRate``:
    2 → 1; p10 → 4). Units: target capacity and TPR in records/s.
    """
    current = vertex.parallelism
    # Flink main ``JobVertexScaler.scale``: partitions only bound the alignment's search region
    # (``ParallelismAligner.upperBoundForAlignment``); BALANCED keeps a target above them.
    lower, upper = parallelism_bounds(vertex, policy, current, cap_at_partitions=False)
    tpr = evaluation.true_processing_rate
    capacity = evaluation.target_capacity
    if tpr == INF or capacity <= 0:
        factor = 0.0
    elif tpr <= 0:
        factor = INF
    else:
        factor = capacity / tpr
    factor = factor / coefficient if coefficient > 0 else factor
    factor = min(max(factor, 1.0 - policy.scale_down_max_factor), 1.0 + policy.scale_up_max_factor)
    raw = int(min(ceil_exact(factor * current) if math.isfinite(factor) else MAX_INT, MAX_INT))
    bounded = min(max(raw, lower), upper)
    code = VertexReason.IDLE if tpr == INF else (VertexReason.SCALE_UP if bounded > current
                                                 else VertexReason.SCALE_DOWN)
    reason = Reason(code, vertex.id, {"factor": factor, "coefficient": coefficient, "current": current,
                                      "to": bounded})
    if bounded != raw:
        reason = Reason(VertexReason.BOUNDED, vertex.id, {"wanted": raw, "lower": lower, "upper": upper,
                                                           "to": bounded})
    elif bounded == current and code != VertexReason.IDLE:
        reason = Reason(VertexReason.WITHIN_BOUNDS, vertex.id, {"factor": factor, "coefficient": coefficient})
    if bounded == current:
        return Recommendation(current, reason)
    base = alignment_base(topology, vertex)
    if base is not None:
        mode, legacy = policy.alignment_mode
        aligned, blocked = align_parallelism(current, bounded, n=base[0], lower=lower, upper=upper, mode=mode,
                                             legacy=legacy)
        if blocked:
            return Recommendation(current, Reason(VertexReason.ALIGNMENT_BLOCKED, vertex.id, {
                "from": bounded, "n": base[0], "unit": base[1], "current": current}))
        if aligned != bounded:
            return Recommendation(aligned, Reason(VertexReason.ALIGNED, vertex.id, {
                "from": bounded, "to": aligned, "n": base[0], "unit": base[1]}))
    return Recommendation(bounded, reason)


def pinned_reason(topology: Topology, vertex: Vertex, policy: Policy) -> VertexReason | None:
    """Why a vertex may not change, or None: ``excluded`` (``excluded_vertices``), ``pinned`` (not
    adjustable), or ``source-scaling-disabled`` (a source with ``scaling_sources_enabled`` off)."""
    if vertex.id in policy.excluded_vertices:
        return VertexReason.EXCLUDED
    if not vertex.adjustable:
        return VertexReason.PINNED
    if not policy.scaling_sources_enabled and topology.is_source(vertex.id):
        return VertexReason.SOURCE_SCALING_DISABLED
    return None


def is_ineffective(record_tpr: float, record_expected: float, tpr_now: float, threshold: float) -> bool:
    """FLIP-271 ``detectIneffectiveScaleUp``: the measured gain ``TPR_now − TPR_before`` is below
    ``threshold`` × the expected gain ``expected − TPR_before`` (records/s)."""
    expected_gain = record_expected - record_tpr
    if expected_gain <= 0 or math.isinf(tpr_now) or math.isinf(record_tpr):
        return False
    return (tpr_now - record_tpr) / expected_gain < threshold


def decide_vertex(topology: Topology, vertex: Vertex, evaluation: VertexEvaluation, policy: Policy,
                  state: ScalerState, now_s: float) -> VertexDecision:
    """Apply the per-vertex rules to the recommendation (Flink ``JobVertexScaler.detectBlockScaling`` and
    ``applyScaleDownInterval``):
    - equal to current: no change, and the vertex's pending scale-down is cleared;
    - scale-up: at once (clears the pending scale-down), unless the last scale-up of this vertex was
      ineffective and ``effectiveness_detection_enabled`` blocks it;
    - scale-down (also in backlog mode, where it is never outside the bounds and only joins another vertex's
      scaling, as in Flink): at once with ``scale_down_interval_s ≤ 0``; else every recommendation is recorded
      (FLINK-36018) and the vertex is ``held`` (it joins no other vertex's scaling, FLINK-36535) until
      ``scale_down_interval_s`` after the first, then goes to the largest recommendation of the last
      ``scale_down_interval_s`` (the sliding window of FLINK-36863; docs/ARCHITECTURE.md, "Delayed scale-down").
    """
    current = vertex.parallelism
    outside = evaluation.outside_bounds
    pinned = pinned_reason(topology, vertex, policy)
    if pinned is not None:
        return VertexDecision(vertex.id, current, current, current, NO_CHANGE, Reason(pinned, vertex.id))
    # Flink passes the vertex's history trimmed to ``history.max.age`` (``ScalingHistoryUtils.
    # trimScalingHistory``): older scalings neither fit the coefficient nor block a scale-up.
    history = tuple(r for r in state.history_of(vertex.id) if r.at_s >= now_s - HISTORY_MAX_AGE_S)
    coefficient = observed_scaling_coefficient(history, policy) if policy.observed_scalability_enabled else 1.0
    rec = compute_parallelism(topology, vertex, evaluation, policy, coefficient)
    recommended, reason = rec.parallelism, rec.reason
    if recommended == current:
        if reason.code == VertexReason.WITHIN_BOUNDS and outside:
            reason = Reason(VertexReason.EQUALS_CURRENT, vertex.id, reason.data)
        return VertexDecision(vertex.id, current, current, current, NO_CHANGE, reason)
    if recommended > current:
        return _scale_up(vertex.id, current, rec, history, evaluation, policy)
    # Scale-down. Backlog mode does not veto it here: Flink's ``JobVertexScaler`` has no backlog
    # check; backlog processing only makes the scale-down threshold infinite (``ScalingMetricEvaluator.
    # computeProcessingRateThresholds``), so a scale-down never triggers a scaling but joins one
    # (``ScalingExecutor.computeScalingSummary``) and is recorded as a delayed scale-down.
    interval = policy.scale_down_interval_s
    if interval <= 0:
        return VertexDecision(vertex.id, current, recommended, recommended, REQUIRED, reason, outside_bounds=outside)
    pending = state.pending(vertex.id) or PendingScaleDown(vertex.id, now_s, ())
    pending = pending.record(now_s, recommended, outside)
    window_start = now_s - interval
    due_s = pending.first_at_s + interval
    if window_start < pending.first_at_s:
        target = pending.max_recommended
        return VertexDecision(vertex.id, current, recommended, current, HELD, Reason(
            VertexReason.HELD_SCALE_DOWN, vertex.id,
            {"current": current, "target": target, "due_s": due_s, "first_at_s": pending.first_at_s}),
            pending=pending, outside_bounds=outside)
    target, target_outside = pending.max_in_window(window_start)
    if target >= current:
        return VertexDecision(vertex.id, current, recommended, current, NO_CHANGE, Reason(
            VertexReason.SCALE_DOWN_WINDOW_NOT_BELOW, vertex.id,
            {"current": current, "target": target, "interval_s": interval}), pending=pending)
    return VertexDecision(vertex.id, current, recommended, target, REQUIRED, Reason(
        VertexReason.DELAYED_SCALE_DOWN_DUE, vertex.id,
        {"current": current, "target": target, "window_start_s": window_start}),
        pending=pending, outside_bounds=target_outside)


def _scale_up(vertex_id: str, current: int, rec: Recommendation, history: tuple[ScalingRecord, ...],
              evaluation: VertexEvaluation, policy: Policy) -> VertexDecision:
    """A recommended scale-up: at once, unless the last scale-up of this vertex was ineffective
    (FLIP-271 ``detectIneffectiveScaleUp``): then blocked with ``effectiveness_detection_enabled``,
    else applied with a warning."""
    recommended, outside = rec.parallelism, evaluation.outside_bounds
    record = history[-1] if history else None
    if record is None or not record.scaled_up or record.new_parallelism != current or not is_ineffective(
            record.true_processing_rate, record.expected_processing_rate, evaluation.true_processing_rate,
            policy.effectiveness_threshold):
        return VertexDecision(vertex_id, current, recommended, recommended, REQUIRED, rec.reason,
                              outside_bounds=outside)
    data = {"tpr_before": record.true_processing_rate, "tpr_now": evaluation.true_processing_rate,
            "expected": record.expected_processing_rate, "old": record.old_parallelism,
            "new": record.new_parallelism, "current": current, "to": recommended}
    if policy.effectiveness_detection_enabled:
        return VertexDecision(vertex_id, current, recommended, current, BLOCKED,
                              Reason(VertexReason.INEFFECTIVE_BLOCKED, vertex_id, data), ineffective=True,
                              outside_bounds=outside)
    return VertexDecision(vertex_id, current, recommended, recommended, REQUIRED,
                          Reason(VertexReason.INEFFECTIVE_WARNING, vertex_id, data).with_cause(rec.reason),
                          ineffective=True, outside_bounds=outside)

