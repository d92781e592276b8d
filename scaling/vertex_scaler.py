"""Per-vertex scaling (FLIP-271 ``JobVertexScaler``): scale factor, bounds, alignment to partitions
or key groups, delayed scale-down (FLINK-36018) and ineffective scale-up detection."""

from __future__ import annotations

import math
from dataclasses import dataclass

from scaling.evaluate import INF, VertexEvaluation, ceil_exact
from scaling.policy import Policy
from scaling.state import PendingScaleDown, ScalerState
from scaling.topology import Topology, Vertex

NO_CHANGE = "none"
REQUIRED = "required"
OPTIONAL = "optional"   # a held scale-down: applied only if the job scales anyway (FLINK-36018)
BLOCKED = "blocked"     # an ineffective scale-up that is blocked


@dataclass(frozen=True)
class VertexDecision:
    """The outcome for one vertex before the job-level gate.

    Attributes:
        recommended: the parallelism the model computes (factor, bounds, alignment).
        proposed: what the vertex runs if the job scales now: ``recommended`` for a required
            change, the largest recommendation in the interval for a held scale-down, else current.
        kind: ``none``, ``required``, ``optional`` (held scale-down) or ``blocked``.
        note: why, for people.
        pending: the vertex's delayed scale-down after this evaluation, or None.
        ineffective: the last scale-up of this vertex was measured ineffective.
    """

    vertex_id: str
    current: int
    recommended: int
    proposed: int
    kind: str
    note: str
    pending: PendingScaleDown | None = None
    ineffective: bool = False


def parallelism_bounds(vertex: Vertex, policy: Policy) -> tuple[int, int]:
    """``[lower, upper]``: ``vertex_{min,max}_parallelism`` capped by the vertex's max parallelism and,
    for a source, its partitions (FLIP-271 ``JobVertexScaler.scale``)."""
    upper = min(policy.vertex_max_parallelism, vertex.max_parallelism)
    if vertex.partitions:
        upper = min(upper, vertex.partitions)
    lower = min(policy.vertex_min_parallelism, upper)
    return lower, upper


def alignment_base(topology: Topology, vertex: Vertex) -> tuple[int, str] | None:
    """What to align to: ``(partitions, "partitions")`` for a source with partitions,
    ``(max_parallelism, "key groups")`` for a vertex behind a hash edge, else None."""
    if vertex.partitions and topology.is_source(vertex.id):
        return vertex.partitions, "partitions"
    if any(edge.ship == "hash" for edge in topology.inputs(vertex.id)):
        return vertex.max_parallelism, "key groups"
    return None


def align(parallelism: int, *, n: int, unit: str, lower: int, upper: int, mode: str) -> tuple[int, str]:
    """Align ``parallelism`` to ``n`` partitions or key groups (Flink
    ``scaling.key-group.partitions.adjust.mode``). Returns (parallelism, note).

    - ``evenly_spread``: the smallest divisor of ``n`` in ``[parallelism, upper]`` (Flink
      ``EVENLY_SPREAD``), so every task gets the same share;
    - ``balanced``: the smallest ``p ≥ parallelism`` whose busiest task holds no more than
      ``floor(n / parallelism)``: ``p = ceil(n / floor(n / parallelism))``, so the effective
      parallelism ``n / ceil(n / p)`` reaches the target;
    - ``off``: unchanged.
    When no such value fits under ``upper``: the fewest tasks reaching the best share possible under
    ``upper``, ``ceil(n / ceil(n / upper))`` (more tasks would not raise the effective parallelism), and
    a note saying the alignment was limited.
    """
    if mode == "off" or n < 1 or parallelism >= n:
        return parallelism, ""
    if mode == "evenly_spread":
        aligned = next((p for p in range(parallelism, upper + 1) if n % p == 0), None)
    else:
        share = n // parallelism
        aligned = -(-n // share)
        if aligned > upper:
            aligned = None
    if aligned is None:
        fallback = max(lower, -(-n // -(-n // upper)))
        return fallback, (f"alignment limited: no parallelism in [{parallelism}, {upper}] spreads {n} {unit} "
                          f"evenly; using {fallback}")
    if aligned == parallelism:
        return parallelism, ""
    if n % aligned == 0:
        how = f"to spread {n} partitions evenly" if unit == "partitions" else f"to the {n} key groups"
    else:
        how = f"so no task holds more than {-(-n // aligned)} of {n} {unit}"
    return aligned, f"aligned {parallelism} -> {aligned} {how}"


def compute_parallelism(topology: Topology, vertex: Vertex, evaluation: VertexEvaluation,
                        policy: Policy) -> tuple[int, str]:
    """The recommended parallelism of one vertex and a note (FLIP-271 ``computeScaleTargetParallelism``).

    ``factor = target_capacity / TPR``, clamped to ``[1 − scale_down_max_factor, 1 + scale_up_max_factor]``;
    ``new = ceil(factor × current)`` within the bounds, then aligned. An idle vertex (infinite TPR)
    goes to its minimum. Units: target capacity and TPR in records/s.
    """
    lower, upper = parallelism_bounds(vertex, policy)
    tpr = evaluation.true_processing_rate
    current = vertex.parallelism
    if tpr == INF:
        wanted, note = lower, "idle: infinite true processing rate, scale to the minimum"
    else:
        factor = evaluation.target_capacity / tpr
        factor = min(max(factor, 1.0 - policy.scale_down_max_factor), 1.0 + policy.scale_up_max_factor)
        wanted = ceil_exact(factor * current)
        note = ""
    bounded = min(max(wanted, lower), upper)
    if bounded != wanted:
        note = f"bounded {wanted} -> {bounded} by [{lower}, {upper}]"
    base = alignment_base(topology, vertex)
    if base is not None:
        aligned, align_note = align(bounded, n=base[0], unit=base[1], lower=lower, upper=upper,
                                    mode=policy.alignment)
        # Alignment never turns a scale-up into a scale-down or the reverse.
        if (bounded >= current > aligned) or (bounded <= current < aligned):
            return current, f"alignment of {bounded} to {base[0]} {base[1]} limited to the current {current}"
        if align_note:
            return aligned, align_note
    return bounded, note


def pinned_reason(topology: Topology, vertex: Vertex, policy: Policy) -> str | None:
    """Why a vertex may not change, or None: excluded, pinned, or a source with source scaling off."""
    if vertex.id in policy.excluded_vertices:
        return "excluded: listed in excluded_vertices"
    if not vertex.adjustable:
        return "pinned: its partitions are fixed by the checkpoint"
    if not policy.scaling_sources_enabled and topology.is_source(vertex.id):
        return "source scaling disabled (scaling_sources_enabled is false)"
    return None


def is_ineffective(record_tpr: float, record_expected: float, tpr_now: float, threshold: float) -> bool:
    """FLIP-271 ``detectIneffectiveScaleUp``: the measured gain ``TPR_now − TPR_before`` is below
    ``threshold`` × the expected gain ``expected − TPR_before`` (records/s)."""
    expected_gain = record_expected - record_tpr
    if expected_gain <= 0 or math.isinf(tpr_now) or math.isinf(record_tpr):
        return False
    return (tpr_now - record_tpr) / expected_gain < threshold


def decide_vertex(topology: Topology, vertex: Vertex, evaluation: VertexEvaluation, policy: Policy,
                  state: ScalerState, now_s: float, *, backlog_mode: bool) -> VertexDecision:
    """Apply the per-vertex rules to the recommendation (FLIP-271 ``detectBlockScaling``, FLINK-36018).

    - equal to current: no change, and any pending scale-down is cleared;
    - scale-up: at once (clears the pending scale-down), unless the last scale-up of this vertex was
      ineffective and ``effectiveness_detection_enabled`` blocks it;
    - scale-down: none in backlog mode; with ``scale_down_interval_s ≤ 0`` at once; otherwise held
      until ``scale_down_interval_s`` after the first recommendation, then the largest recommendation
      seen since (FLINK-36018). A held scale-down is optional: it joins if the job scales anyway.
    """
    current = vertex.parallelism
    reason = pinned_reason(topology, vertex, policy)
    if reason is not None:
        return VertexDecision(vertex.id, current, current, current, NO_CHANGE, reason)
    recommended, note = compute_parallelism(topology, vertex, evaluation, policy)
    if recommended == current:
        return VertexDecision(vertex.id, current, current, current, NO_CHANGE,
                              note or ("within bounds" if not evaluation.outside_bounds
                                       else "computed parallelism equals current"))
    if recommended > current:
        note = note or f"scale up {current} -> {recommended}"
        record = state.last_record(vertex.id)
        if record is not None and record.scaled_up and record.new_parallelism == current and is_ineffective(
                record.true_processing_rate, record.expected_processing_rate, evaluation.true_processing_rate,
                policy.effectiveness_threshold):
            gain = (f"last scale-up {record.old_parallelism} -> {record.new_parallelism} was ineffective: "
                    f"true processing rate {_num(record.true_processing_rate)} -> "
                    f"{_num(evaluation.true_processing_rate)}, expected {_num(record.expected_processing_rate)}")
            if policy.effectiveness_detection_enabled:
                return VertexDecision(vertex.id, current, recommended, current, BLOCKED,
                                      f"blocked: {gain}; not scaling {current} -> {recommended}", ineffective=True)
            return VertexDecision(vertex.id, current, recommended, recommended, REQUIRED,
                                  f"{note}; warning: {gain}", ineffective=True)
        return VertexDecision(vertex.id, current, recommended, recommended, REQUIRED, note)
    # Scale-down.
    if backlog_mode:
        return VertexDecision(vertex.id, current, recommended, current, NO_CHANGE,
                              f"backlog mode: no scale-down ({current} -> {recommended} not applied)")
    note = note or f"scale down {current} -> {recommended}"
    if policy.scale_down_interval_s <= 0:
        return VertexDecision(vertex.id, current, recommended, recommended, REQUIRED, note)
    pending = state.pending(vertex.id)
    if pending is None:
        pending = PendingScaleDown(vertex.id, now_s, ((now_s, recommended),))
    else:
        pending = PendingScaleDown(vertex.id, pending.first_at_s, (*pending.recommendations, (now_s, recommended)))
    target = pending.max_recommended
    if target >= current:
        return VertexDecision(vertex.id, current, recommended, current, NO_CHANGE,
                              f"pending scale-down to {target} is not below the current {current}")
    due_s = pending.first_at_s + policy.scale_down_interval_s
    if now_s < due_s:
        return VertexDecision(vertex.id, current, recommended, target, OPTIONAL,
                              f"delayed scale-down {current} -> {target} held until t={_num(due_s)} s "
                              f"(first recommended at t={_num(pending.first_at_s)} s)", pending=pending)
    return VertexDecision(vertex.id, current, recommended, target, REQUIRED,
                          f"delayed scale-down {current} -> {target}: the largest recommendation since "
                          f"t={_num(pending.first_at_s)} s", pending=pending)


def _num(value: float) -> str:
    """A number for messages: up to 3 decimals, ``inf`` for infinity."""
    if math.isinf(value):
        return "inf"
    rounded = round(value, 3)
    return str(int(rounded)) if rounded == int(rounded) and abs(rounded) < 1e15 else str(rounded)
