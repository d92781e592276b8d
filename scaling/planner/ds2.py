"""DS2 / FLIP-271 evaluation: true rates from busy time, target rates propagated through the DAG,
the scale-up and scale-down thresholds, and backlog mode.

Units: rates are records/s. In ``continuous`` mode a vertex's true processing rate is the vertex
total (all its subtasks, as Flink's ``TRUE_PROCESSING_RATE`` and DS2's ``o[λ_p]``); the micro-batch
planner divides it by the tasks to get records per busy core-second (docs/ARCHITECTURE.md, "DS2 on Spark
micro-batches").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from scaling.policy.numbers import INF, java_round
from scaling.policy.policy import Policy
from scaling.values.metrics import VertexMetrics
from scaling.values.topology import Topology


def true_processing_rate(records_in_per_s: float, busy_time_ms_per_s: float, tasks: int) -> float:
    """Records one task slot processes per busy second (records per busy core-second), DS2 §3.2 Eq. 1:
    ``records_in_per_s / (busy_time_ms_per_s / 1000 × tasks)``; infinite with no busy time or no input (Flink
    ``computeTprFromBusyTime``; docs/ARCHITECTURE.md, "True rates from busy time")."""
    busy_core_s_per_s = busy_time_ms_per_s / 1000.0 * tasks
    if busy_core_s_per_s <= 0 or records_in_per_s <= 0:
        return INF
    return records_in_per_s / busy_core_s_per_s


def true_output_rate(records_out_per_s: float, busy_time_ms_per_s: float, tasks: int) -> float:
    """Records one task slot emits per busy second. DS2 §3.2 Eq. 2 (``λ_o``), same units as TPR."""
    return true_processing_rate(records_out_per_s, busy_time_ms_per_s, tasks)


def vertex_true_rates(m: VertexMetrics) -> tuple[float, float]:
    """The vertex-total true processing and output rates, records/s (FLIP-271 ``TRUE_PROCESSING_RATE``
    = ``numRecordsInPerSecond × 1000 / busyTimeMsPerSecond``; DS2 §3.2 ``o[λ_p]``, ``o[λ_o]``).

    Rates given directly (DS2's aggregated rates) win over busy time. The busy time is the busiest
    task's when ``busy_time_max_ms_per_s`` is given (FLIP-271 aggregates busy time with MAX by
    default, Flink ``job.autoscaler.metrics.busy-time.aggregator``), else the mean. No busy time or
    no input → infinite (Flink ``computeTprFromBusyTime``).
    """
    if m.true_processing_rate is not None:
        tpr = m.true_processing_rate
        if m.true_output_rate is not None:
            tor = m.true_output_rate
        elif m.records_in_per_s and m.records_out_per_s is not None:
            tor = tpr * m.records_out_per_s / m.records_in_per_s
        else:
            tor = tpr
        return tpr, tor
    busy = effective_busy_ms_per_s(m)
    records_in = m.records_in_per_s or 0.0
    records_out = m.records_out_per_s if m.records_out_per_s is not None else records_in
    # Flink ``ScalingMetricEvaluator.computeTprFromBusyTime``: ``rate / (busyMsPerSecond / 1000)``, in
    # that order, so the factor (and its ceil in ``JobVertexScaler.scale``) agrees with Flink to the bit
    # (a denormal busy time that underflows to 0 s gives infinity, as Java's division does).
    busy_s = busy / 1000.0
    if busy_s <= 0 or records_in <= 0:
        return INF, INF
    return records_in / busy_s, records_out / busy_s


def effective_busy_ms_per_s(m: VertexMetrics) -> float:
    """The busy time that sets the pace, ms/s: the busiest task's (``busy_time_max_ms_per_s``) when
    given, else the mean over the tasks (FLIP-271's MAX busy-time aggregation)."""
    if m.busy_time_max_ms_per_s is not None:
        return max(m.busy_time_max_ms_per_s, m.busy_time_ms_per_s or 0.0)
    return m.busy_time_ms_per_s or 0.0


def selectivity(metrics: VertexMetrics) -> float:
    """Output records per input record (DS2's output ratio ``o[λ_o] / o[λ_p]``); 1.0 when no input
    was seen."""
    if metrics.records_in_per_s is None or metrics.records_out_per_s is None:
        tpr, tor = vertex_true_rates(metrics)
        return tor / tpr if 0 < tpr < INF else 1.0
    if metrics.records_in_per_s <= 0:
        return 1.0
    return metrics.records_out_per_s / metrics.records_in_per_s


def edge_output_ratio(topology: Topology, metrics: Mapping[str, VertexMetrics], source: str, target: str) -> float:
    """Records sent on the edge ``source → target`` per record ``source`` consumes (FLIP-271
    ``computeEdgeOutputRatio``; DS2 Eq. 8's ``o[λ_o] / o[λ_p]`` with adjacency entry 1).

    The edge's data rate is, most reliable first: the target's input rate when this is its only
    input; its input rate minus the output of its other single-output inputs; the source's full
    output (also when the target gives no ``records_in_per_s``, as in DS2). As in Flink's
    ``computeEdgeOutputRatio`` (FLINK-34266), a source with no input ("we also need to flatten the
    output rate") or an edge whose data rate is not positive has ratio 0.
    """
    m_source = metrics[source]
    full = selectivity(m_source)
    m_target = metrics[target]
    records_in = m_source.records_in_per_s
    if records_in is not None and records_in <= 0:
        return 0.0
    if m_target.records_in_per_s is None or not records_in:
        return full
    inputs = topology.inputs(target)
    if len(inputs) == 1:
        return m_target.records_in_per_s / records_in
    others = 0.0
    for edge in inputs:
        if edge.source == source:
            continue
        upstream = metrics[edge.source]
        if len(topology.outputs(edge.source)) != 1 or upstream.records_out_per_s is None:
            return full
        others += upstream.records_out_per_s
    return max(0.0, m_target.records_in_per_s - others) / records_in


@dataclass(frozen=True)
class TargetRates:
    """Target rates of one vertex, records/s over the whole vertex: ``target_data_rate`` to sustain (a source's
    input + backlog growth), ``catch_up_data_rate`` to drain the backlog within the catch-up duration, and
    ``restart_data_rate`` for the records piling up in a restart (FLIP-271: target × restart / catch-up time)."""

    target_data_rate: float
    catch_up_data_rate: float
    restart_data_rate: float


def propagate_target_rates(topology: Topology, metrics: Mapping[str, VertexMetrics],
                           policy: Policy, *, restart_time_s: float | None = None) -> dict[str, TargetRates]:
    """Target rates of every vertex, in topological order.

    Sources: ``target = records_in_per_s + backlog_growth_per_s`` (FLIP-271 ``TARGET_DATA_RATE``),
    ``catch_up = backlog / catch_up_duration_s`` (FLIP-271 ``CATCH_UP_DATA_RATE``). Others: the sum
    over input edges of the upstream rate times the edge output ratio (DS2 §3.3 Eq. 8), on unrounded
    values. ``restart = target × restart_time_s / catch_up_duration_s`` (FLIP-271 target capacity).

    Raises:
        KeyError: a vertex has no metrics.
    """
    restart_s = policy.restart_time_s if restart_time_s is None else restart_time_s
    # catch_up_duration_s = 0 disables backlog-based scaling: no catch-up and no restart rate
    # (Flink ``ScalingMetricEvaluator``: ``catchUpTargetSec == 0 ? 0 : lag / catchUpTargetSec``;
    # ``AutoScalerUtils.getTargetProcessingCapacity``: no restart rate when it is 0).
    catch_up_s = policy.catch_up_duration_s
    restart_share = restart_s / catch_up_s if catch_up_s > 0 else 0.0
    rates: dict[str, TargetRates] = {}
    for vertex_id in topology.order:
        m = metrics[vertex_id]
        if topology.is_source(vertex_id):
            target = max(0.0, (m.records_in_per_s or 0.0) + m.backlog_growth_per_s)
            catch_up = m.backlog / catch_up_s if catch_up_s > 0 else 0.0
        else:
            target = catch_up = 0.0
            for edge in topology.inputs(vertex_id):
                upstream = rates[edge.source]
                ratio = edge_output_ratio(topology, metrics, edge.source, vertex_id)
                target += upstream.target_data_rate * ratio
                catch_up += upstream.catch_up_data_rate * ratio
        rates[vertex_id] = TargetRates(target, catch_up, target * restart_share)
    return rates


def is_processing_backlog(topology: Topology, metrics: Mapping[str, VertexMetrics], policy: Policy) -> bool:
    """Backlog mode (FLIP-271 ``isProcessingBacklog``): some source's lag in seconds,
    ``backlog / records_in_per_s``, is above ``backlog_lag_threshold_s``. The band is then [0, 1]:
    no scale-down triggers a scaling."""
    for vertex_id in topology.order:
        if not topology.is_source(vertex_id):
            continue
        m = metrics[vertex_id]
        if m.backlog <= 0:
            continue
        rate = m.records_in_per_s or 0.0
        lag_s = m.backlog / rate if rate > 0 else INF
        if lag_s > policy.backlog_lag_threshold_s:
            return True
    return False


def target_processing_capacity(rates: TargetRates, utilization: float, *, with_restart: bool) -> float:
    """Flink ``AutoScalerUtils.getTargetProcessingCapacity``, records/s, rounded half up
    (``Math.round``) before anyone divides by it:
    ``round(catch_up + (restart ? target × restart_time / catch_up_duration : 0) + target / utilization)``.
    Utilization 0 gives infinity."""
    if utilization <= 0:
        return INF
    restart = rates.restart_data_rate if with_restart else 0.0
    return java_round(rates.catch_up_data_rate + restart + rates.target_data_rate / min(1.0, utilization))


def vertex_utilization(m: VertexMetrics, tpr: float, target_data_rate: float, *, busiest: bool = True) -> float:
    """Fraction of time the vertex is busy (Flink's evaluated ``LOAD``), busy time / 1000: the busiest task's when
    given (Flink's default ``metrics.busy-time.aggregator`` MAX; ``ScalingMetricsTest.testLoadMetrics``: max 200,
    avg 150 -> 0.2), else and with ``busiest=False`` the mean (busy core-seconds of the vertex); for DS2's
    directly given rates, observed input / true processing rate."""
    if m.busy_time_ms_per_s is not None and m.true_processing_rate is None:
        return (effective_busy_ms_per_s(m) if busiest else m.busy_time_ms_per_s) / 1000.0
    observed = m.records_in_per_s if m.records_in_per_s is not None else target_data_rate
    return observed / tpr if 0 < tpr < INF else 0.0


@dataclass(frozen=True)
class VertexEvaluation:
    """The evaluated metrics of one vertex (FLIP-271 ``ScalingMetricEvaluator``), records/s.

    Attributes:
        true_processing_rate / true_output_rate: vertex totals (DS2 ``o[λ_p]``, ``o[λ_o]``).
        scale_up_threshold: ``round(catch_up + target / utilization_max)`` (1.0 in backlog mode).
        scale_down_threshold: ``round(catch_up + restart + target / utilization_min)``; infinite in
            backlog mode (utilization_min 0).
        target_capacity: ``round(catch_up + restart + target / utilization_target)``: the capacity
            the new parallelism must reach, rounded as Flink's ``getTargetProcessingCapacity``.
        utilization: busy time / 1000, the fraction of time the vertex is busy.
        outside_bounds: TPR below the scale-up or above the scale-down threshold.
    """

    vertex_id: str
    parallelism: int
    true_processing_rate: float
    true_output_rate: float
    target_data_rate: float
    catch_up_data_rate: float
    restart_data_rate: float
    scale_up_threshold: float
    scale_down_threshold: float
    target_capacity: float
    utilization: float
    outside_bounds: bool


@dataclass(frozen=True)
class JobEvaluation:
    """All vertices' evaluations, whether the job processes backlog, and the restart time used."""

    vertices: Mapping[str, VertexEvaluation]
    backlog_mode: bool
    restart_time_s: float


def evaluate_job(topology: Topology, metrics: Mapping[str, VertexMetrics], policy: Policy,
                 *, restart_time_s: float | None = None) -> JobEvaluation:
    """Evaluate every vertex (FLIP-271 ``ScalingMetricEvaluator.evaluate`` +
    ``computeProcessingRateThresholds``).

    Args:
        restart_time_s: the restart time to use (tracked or configured); default ``policy.restart_time_s``.
    """
    restart_s = policy.restart_time_s if restart_time_s is None else restart_time_s
    rates = propagate_target_rates(topology, metrics, policy, restart_time_s=restart_s)
    backlog = is_processing_backlog(topology, metrics, policy)
    low, high = (0.0, 1.0) if backlog else policy.band
    target_u = policy.utilization_target
    result: dict[str, VertexEvaluation] = {}
    for vertex in topology.vertices:
        vertex_id = vertex.id
        m = metrics[vertex_id]
        tpr, tor = vertex_true_rates(m)
        r = rates[vertex_id]
        up = target_processing_capacity(r, high, with_restart=False)
        down = target_processing_capacity(r, low, with_restart=True)
        result[vertex_id] = VertexEvaluation(
            vertex_id=vertex_id, parallelism=vertex.parallelism, true_processing_rate=tpr,
            true_output_rate=tor, target_data_rate=r.target_data_rate, catch_up_data_rate=r.catch_up_data_rate,
            restart_data_rate=r.restart_data_rate, scale_up_threshold=up, scale_down_threshold=down,
            target_capacity=target_processing_capacity(r, target_u, with_restart=True),
            utilization=vertex_utilization(m, tpr, r.target_data_rate),
            outside_bounds=tpr < up or tpr > down)
    return JobEvaluation(result, backlog, restart_s)
