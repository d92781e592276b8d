"""The job-level limits of a micro-batch plan (``scaling.planner.microbatch``): what keeps it from its
target, as ``reasons.Limit`` codes with their numbers: ``max-executors``, ``cores-not-adjustable``
(the pipeline declares no executors knob) and ``catch-up-unreachable``; and a source's backlog age."""

from __future__ import annotations

from scaling.planner.signals import cores_not_adjustable
from scaling.planner.sizing import MicroBatchModel, Sizing, _utilization
from scaling.policy.numbers import INF
from scaling.values.metrics import VertexMetrics
from scaling.values.reasons import Limit, PlanLimit, Reason

__all__ = ["catch_up_limit", "cores_limit", "time_behind_s"]


def cores_limit(job: MicroBatchModel, sizing: Sizing, overrun: Reason | None) -> tuple[PlanLimit, ...]:
    """``max-executors`` when no count reached the target and cores still helped at the last one:
    both utilizations there, at the target rate (what ``predicted_utilization`` and the proposal
    page show) and with the catch-up and restart rates (what the sizing needs). When the pipeline
    cannot change its cores, ``cores-not-adjustable`` instead, also for a batch overrun."""
    cluster = job.cluster
    if not cluster.executors_adjustable:
        if sizing.chosen and overrun is None:
            return ()
        return (cores_not_adjustable(cluster.cores, sizing.cores_needed, job.now("base"), sizing.best_u),)
    if sizing.chosen or not sizing.at_limit:
        return ()
    cores_max = max(job.cluster.max_executors, job.cluster.min_executors) * job.cluster.cores_per_executor
    return (PlanLimit(Limit.MAX_EXECUTORS, None, {
        "cores_needed": sizing.cores_needed, "cores_max": cores_max,
        "predicted_utilization": job.at(sizing.executors * job.cluster.cores_per_executor, "base"),
        "utilization_with_catch_up": sizing.best_u}),)


def catch_up_limit(job: MicroBatchModel) -> tuple[PlanLimit, ...]:
    """``catch-up-unreachable`` when even the maximum executors drain the backlog slower than
    ``catch_up_duration_s`` (``_catch_up_s_at_max``)."""
    cores_max = max(job.cluster.max_executors, job.cluster.min_executors) * job.cluster.cores_per_executor
    catch_up = _catch_up_s_at_max(job, cores_max)
    if catch_up is None:
        return ()
    return (PlanLimit(Limit.CATCH_UP_UNREACHABLE, None, {
        "catch_up_s": catch_up, "catch_up_duration_s": job.policy.catch_up_duration_s, "cores_max": cores_max}),)


def time_behind_s(m: VertexMetrics) -> float:
    """A source's backlog age estimate, seconds: ``backlog / records_in_per_s``."""
    if m.backlog <= 0:
        return 0.0
    rate = m.records_in_per_s or 0.0
    return m.backlog / rate if rate > 0 else INF


def _catch_up_s_at_max(job: MicroBatchModel, cores_max: int) -> float | None:
    """Seconds to drain the backlog at ``cores_max`` cores, when that exceeds ``catch_up_duration_s``
    (else None). The spare share ``1 − U_base`` of the batch drains the backlog at ``(1 / U_base − 1)``
    × the arrival rate (``U_base``: utilization of the arrivals alone)."""
    topology, metrics, policy = job.topology, job.metrics, job.policy
    backlog = sum(metrics[v].backlog for v in topology.order if topology.is_source(v))
    if backlog <= 0 or policy.catch_up_duration_s <= 0:
        return None
    u_base = _utilization(job.stages, job.tasks_at(cores_max), cores_max, job.overhead, "base")
    arrival = sum((metrics[v].records_in_per_s or 0.0) + metrics[v].backlog_growth_per_s
                  for v in topology.order if topology.is_source(v))
    if u_base >= 1.0 or arrival <= 0:
        seconds = INF if u_base >= 1.0 else 0.0
    else:
        # The spare capacity drains the backlog; a product that underflows (denormal rates) drains nothing.
        drain = (1.0 / u_base - 1.0) * arrival if u_base > 0 else INF
        seconds = backlog / drain if drain > 0 else INF
    return seconds if seconds > policy.catch_up_duration_s else None

