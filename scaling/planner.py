"""The micro-batch planner: DS2 mapped onto Spark Structured Streaming (ARCHITECTURE.md).

Stages of a micro-batch share the executor cores in time, so their core needs add up:
``C* = ceil(Σ_v λ_v / TPR_v / utilization_target / (1 − overhead))``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from scaling.evaluate import INF, propagate_target_rates, selectivity, true_output_rate, true_processing_rate
from scaling.metrics import ClusterState, VertexMetrics
from scaling.policy import Policy
from scaling.topology import Topology

MAX_OVERHEAD_FRACTION = 0.9


@dataclass(frozen=True)
class VertexPlan:
    """The plan for one vertex; ``proposed == current`` with a ``note`` when it does not change.

    Rates are records/s; ``true_processing_rate`` is per busy task slot (records per core-second).
    ``ideal_parallelism`` is DS2's π_v: the cores the vertex would keep busy if it ran continuously.
    ``utilization`` is busy core-seconds per second over ``min(tasks, cores)``.
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


@dataclass(frozen=True)
class JobPlan:
    """The plan for a job (micro-batch mode).

    Attributes:
        decision: ``scale`` (something changes), ``no-change`` (load inside the band or the plan
            equals the running configuration).
        reasons: why, in sentences an operator can read.
        load: demand over available capacity: ``Σ_v (λ_v + catch-up_v) / TPR_v /
            (cores × (1 − overhead))``; compared with the utilization band (FLIP-271 thresholds).
        cores_needed: C* (task slots).
        bottleneck: a vertex that cannot reach its share, e.g. pinned partitions, or None.
        batch_ratio: SPARK-12133's R = batch duration / trigger interval, shown beside the plan.
    """

    decision: str
    reasons: tuple[str, ...]
    vertices: tuple[VertexPlan, ...]
    executors_current: int
    executors_proposed: int
    cores_per_executor: int
    cores_needed: int
    load: float
    utilization: float
    overhead_fraction: float
    bottleneck: str | None
    batch_ratio: float | None

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


def plan_micro_batch(topology: Topology, metrics: Mapping[str, VertexMetrics], cluster: ClusterState,
                     policy: Policy, *, batch_duration_s: float | None = None) -> JobPlan:
    """Compute cores, executors and partitions for a Spark micro-batch job (ARCHITECTURE.md).

    Args:
        topology: the stages of the micro-batch job as vertices; ``parallelism`` = tasks per batch.
        metrics: per vertex id, averages over the window (records/s, busy ms/s per task).
        cluster: executors, cores per executor and trigger interval now.
        policy: the utilization target and band, catch-up and restart time, parallelism bounds.
        batch_duration_s: mean batch duration, for SPARK-12133's batch ratio R (display only).

    Returns:
        A JobPlan. Formulas:
        - ``TPR_v = in_v / busy_v`` (DS2 Eq. 1, records per busy core-second);
        - ``λ_v``: FLIP-271 source target rate, propagated by DS2 Eq. 8;
        - ``π_v = ceil(λ_v / (TPR_v × utilization_target))`` (DS2 Eq. 9, the ideal parallelism);
        - ``C* = ceil(Σ_v (λ_v + catch-up_v + restart_v) / TPR_v / utilization_target / (1 − overhead))``;
        - executors = ``ceil(C* / cores_per_executor)`` within [min_executors, max_executors];
        - partitions of an adjustable vertex = the cores (one wave), bounded by the source's
          partitions and by [vertex_min_parallelism, vertex_max_parallelism];
        - the job acts only when the load leaves the utilization band (FLIP-271 thresholds).

    Raises:
        KeyError: a vertex of the topology has no metrics.
    """
    rates = propagate_target_rates(topology, metrics, policy)
    cores_now = cluster.cores
    overhead_s = max((m.batch_overhead_s for m in metrics.values()), default=0.0)
    overhead = min(MAX_OVERHEAD_FRACTION, overhead_s / cluster.trigger_interval_s)
    available = cores_now * (1.0 - overhead)
    target_u = policy.utilization_target

    demand_up = demand_target = 0.0
    busy_total = 0.0
    per_vertex: dict[str, tuple[float, float, float]] = {}
    for vertex_id in topology.order:
        vertex, m, r = topology.vertex(vertex_id), metrics[vertex_id], rates[vertex_id]
        tpr = true_processing_rate(m.records_in_per_s, m.busy_time_ms_per_s, vertex.parallelism)
        busy = m.busy_time_ms_per_s / 1000.0 * vertex.parallelism
        busy_total += busy
        per_vertex[vertex_id] = (tpr, busy, r.target_data_rate + r.catch_up_data_rate)
        if tpr < INF:
            # FLIP-271: scale-up threshold uses target + catch-up; the target capacity adds restart time.
            demand_up += (r.target_data_rate + r.catch_up_data_rate) / tpr
            demand_target += (r.target_data_rate + r.catch_up_data_rate + r.restart_data_rate) / tpr

    load = demand_up / available if available > 0 else INF
    cores_needed = max(1, math.ceil(round(demand_target / target_u / (1.0 - overhead), 9)))
    executors = _bounded(math.ceil(cores_needed / cluster.cores_per_executor),
                         cluster.min_executors, cluster.max_executors)
    cores_planned = executors * cluster.cores_per_executor

    vertex_plans: list[VertexPlan] = []
    bottleneck: str | None = None
    worst_fill = 0.0
    for vertex_id in topology.order:
        vertex, m = topology.vertex(vertex_id), metrics[vertex_id]
        tpr, busy, lam = per_vertex[vertex_id]
        ideal = 0 if lam <= 0 else (1 if tpr == INF else math.ceil(round(lam / (tpr * target_u), 9)))
        note = ""
        if not vertex.adjustable or vertex_id in policy.excluded_vertices or (
                vertex.source and not policy.scaling_sources_enabled):
            proposed = vertex.parallelism
            note = "pinned: its partitions are fixed by the checkpoint" if not vertex.adjustable else "excluded"
        else:
            upper = min(policy.vertex_max_parallelism, vertex.max_parallelism)
            if vertex.source and vertex.partitions:
                upper = min(upper, vertex.partitions)
            proposed = _bounded(cores_planned, policy.vertex_min_parallelism, upper)
            if proposed < cores_planned:
                note = f"bounded at {proposed} (source partitions / max parallelism)"
        # Wall-time share of each trigger interval this stage alone needs with its tasks.
        slots = min(proposed, cores_planned)
        fill = (lam / tpr / slots) if tpr < INF and slots > 0 else 0.0
        if fill > 1.0 - overhead and fill > worst_fill:
            worst_fill, bottleneck = fill, vertex_id
        utilization = busy / min(vertex.parallelism, cores_now)
        vertex_plans.append(VertexPlan(
            vertex_id=vertex_id, current=vertex.parallelism, proposed=proposed,
            true_processing_rate=tpr,
            true_output_rate=true_output_rate(m.records_out_per_s, m.busy_time_ms_per_s, vertex.parallelism),
            selectivity=selectivity(m), target_data_rate=rates[vertex_id].target_data_rate,
            catch_up_data_rate=rates[vertex_id].catch_up_data_rate, ideal_parallelism=ideal,
            utilization=utilization, busy_core_s_per_s=busy, adjustable=vertex.adjustable, note=note))

    low, high = policy.band
    reasons: list[str] = []
    if load > high:
        reasons.append(f"load {load:.2f} above the utilization band [{low}, {high}]: the job needs "
                       f"{demand_up:.2f} busy cores per second for its target and catch-up rate but has "
                       f"{available:.2f} ({cores_now} cores, {overhead:.0%} batch overhead)")
    elif load < low:
        reasons.append(f"load {load:.2f} below the utilization band [{low}, {high}]: {demand_up:.2f} busy "
                       f"cores per second needed of {available:.2f} available")
    if bottleneck is not None:
        reasons.append(f"{bottleneck} is the bottleneck: with its partitions it alone would fill "
                       f"{worst_fill:.0%} of each trigger interval, so more cores cannot help it")
    plan = JobPlan(
        decision="no-change", reasons=(), vertices=tuple(vertex_plans), executors_current=cluster.executors,
        executors_proposed=executors, cores_per_executor=cluster.cores_per_executor, cores_needed=cores_needed,
        load=load, utilization=busy_total / cores_now, overhead_fraction=overhead, bottleneck=bottleneck,
        batch_ratio=(batch_duration_s / cluster.trigger_interval_s) if batch_duration_s is not None else None)
    outside_band = load > high or load < low
    if outside_band and plan.changes:
        decision = "scale"
    else:
        if not outside_band:
            reasons.insert(0, f"load {load:.2f} within the utilization band [{low}, {high}]")
        elif not plan.changes:
            reasons.append("the plan equals the running configuration")
        # No change: every vertex keeps its parallelism and the executors stay.
        vertex_plans = [VertexPlan(**{**vp.__dict__, "proposed": vp.current}) for vp in vertex_plans]
        executors = cluster.executors
        decision = "no-change"
    return JobPlan(**{**plan.__dict__, "decision": decision, "reasons": tuple(reasons),
                      "vertices": tuple(vertex_plans), "executors_proposed": executors})
