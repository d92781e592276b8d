"""DS2 / FLIP-271 evaluation: true rates from busy time and target rates propagated through the DAG."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from scaling.metrics import VertexMetrics
from scaling.policy import Policy
from scaling.topology import Topology

INF = math.inf


def true_processing_rate(records_in_per_s: float, busy_time_ms_per_s: float, tasks: int) -> float:
    """Records one task slot processes per busy second (records per busy core-second).

    DS2 §3.2 Eq. 1 (useful-time rate): ``λ_p = records processed / useful time``.
    In a micro-batch, a running task never waits on backpressure, so task run time is useful time:
    ``TPR = records_in_per_s / (busy_time_ms_per_s / 1000 × tasks)``.
    An idle vertex (no busy time) has an infinite true processing rate (FLIP-271).
    """
    busy_core_s_per_s = busy_time_ms_per_s / 1000.0 * tasks
    if busy_core_s_per_s <= 0:
        return INF
    return records_in_per_s / busy_core_s_per_s


def true_output_rate(records_out_per_s: float, busy_time_ms_per_s: float, tasks: int) -> float:
    """Records one task slot emits per busy second. DS2 §3.2 Eq. 2 (``λ_o``), same units as TPR."""
    return true_processing_rate(records_out_per_s, busy_time_ms_per_s, tasks)


def selectivity(metrics: VertexMetrics) -> float:
    """Output records per input record (DS2's output ratio); 1.0 when no input was seen."""
    if metrics.records_in_per_s <= 0:
        return 1.0
    return metrics.records_out_per_s / metrics.records_in_per_s


@dataclass(frozen=True)
class TargetRates:
    """Target rates of one vertex, records/s over the whole vertex.

    Attributes:
        target_data_rate: the rate the vertex must sustain (source: input rate + backlog growth).
        catch_up_data_rate: extra rate to drain the backlog within the catch-up duration.
        restart_data_rate: extra rate for the records that pile up while the job restarts
            (FLIP-271: ``target × restart_time / catch_up_duration``).
    """

    target_data_rate: float
    catch_up_data_rate: float
    restart_data_rate: float


def propagate_target_rates(topology: Topology, metrics: Mapping[str, VertexMetrics],
                           policy: Policy) -> dict[str, TargetRates]:
    """Target rates of every vertex, in topological order.

    Sources: ``target = records_in_per_s + backlog_growth_per_s``, ``catch_up = backlog /
    catch_up_duration_s`` (FLIP-271). Others: the sum over input edges of the upstream rate times
    the upstream selectivity (DS2 §3.3 Eq. 8), on unrounded values.

    Raises:
        KeyError: a vertex has no metrics.
    """
    rates: dict[str, TargetRates] = {}
    for vertex_id in topology.order:
        m = metrics[vertex_id]
        if topology.is_source(vertex_id):
            target = max(0.0, m.records_in_per_s + m.backlog_growth_per_s)
            catch_up = m.backlog / policy.catch_up_duration_s
        else:
            target = catch_up = 0.0
            for edge in topology.inputs(vertex_id):
                upstream = rates[edge.source]
                ratio = selectivity(metrics[edge.source])
                target += upstream.target_data_rate * ratio
                catch_up += upstream.catch_up_data_rate * ratio
        restart = target * policy.restart_time_s / policy.catch_up_duration_s
        rates[vertex_id] = TargetRates(target, catch_up, restart)
    return rates
