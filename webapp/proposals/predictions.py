"""What a proposal predicts, frozen when it is proposed, and what was realized.

The proposal page shows the stored prediction, never a live recomputation: the approver's numbers
stay the numbers the approval was given on. After the execution, :func:`realized` measures the same
quantities from the snapshots of the new configuration; verification stores them beside the verdict.

The formulas are ``scaling.forecast.prediction``'s; this module reads them off plans (``scaling.values.plan.JobPlan``)
and snapshots.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from datetime import datetime

from scaling.forecast import prediction as forecast
from scaling.forecast.job_figures import job_capacity, plan_cores
from scaling.planner.sizing import EXECUTORS_KEY, busy_share
from scaling.policy.numbers import finite_or_none
from scaling.values.metrics import job_utilization
from scaling.values.plan import JobPlan
from scaling.values.state import ScalingRecord
from sparkclient.contract.messages import RescalePath
from webapp.jobs.models import Job, MetricSnapshot, VertexSnapshot
from webapp.proposals.models import Execution

#: Keys of a frozen prediction (``Proposal.prediction``) the page shows.
PREDICTED = ("capacity_per_s", "utilization", "batch_ratio", "catch_up_s", "downtime_s")


def _json_number(value: float) -> float | None:
    """A plan's number as the frozen prediction stores it: 3 decimals, null for infinity (the
    prediction is shown by the API as stored, and its numbers are numbers or null)."""
    return round(value, 3) if math.isfinite(value) else None


def _stage_rates(plan: JobPlan) -> list[tuple[float, float]]:
    """(target rate, true processing rate) per vertex of a plan (records/s; 0 unknown or infinite)."""
    return [(finite_or_none(v.target_data_rate) or 0.0, finite_or_none(v.true_processing_rate) or 0.0)
            for v in plan.vertices]


def demand_cores(plan: JobPlan) -> float:
    """Busy cores the plan's target rates need, ``Σ_v λ_v / TPR_v`` (cores; the catch-up rate is not
    in it): what a recommendation answers, apart from draining the backlog."""
    return forecast.demand_cores(_stage_rates(plan))


def capacity_per_s(plan: JobPlan, source_ids: set[str] | None = None, *, proposed: bool = False) -> float | None:
    """Source records per second the plan's running (or, ``proposed``, its proposed) configuration
    sustains under its measured rates (``scaling.forecast.job_figures.job_capacity``, records/s); None
    when the plan has no rate to go by."""
    return job_capacity(plan, source_ids or (), proposed=proposed).per_s


def executor_record(plan: JobPlan, at_s: float, source_ids: set[str] | None = None) -> tuple[ScalingRecord, ...]:
    """The executor change a micro-batch plan applied, as the scaling history records it for observed
    scalability (``Policy.observed_scalability_*``: the planner fits its coefficient to the job's
    executor records): executors before and after, and the source records per second the old cores
    sustained (:func:`capacity_per_s`; expected: linear in the executors). Empty when the executors
    did not change or the plan has no rate to go by."""
    old, new = plan.executors_current, plan.executors_proposed
    if old is None or new is None or old < 1 or new == old:
        return ()
    rate = capacity_per_s(plan, source_ids)
    if rate is None:
        return ()
    return (ScalingRecord(at_s, EXECUTORS_KEY, old, new, rate, rate * new / old),)


def _utilization(plan: JobPlan, cores_new: int) -> float | None:
    """The busy share of the proposed cores at the target rate (0..1), from the micro-batch model's
    one formula (``scaling.planner.sizing.busy_share``): the planner's own
    ``JobPlan.predicted_utilization`` (it includes the observed scaling coefficient), or, for a plan
    without it, ``busy_share`` of the plan's per-vertex ``λ_v / TPR_v`` on its proposed tasks and cores."""
    value = finite_or_none(plan.predicted_utilization)
    if value is None and cores_new:
        demands = [((finite_or_none(v.target_data_rate) or 0.0) / tpr, int(v.proposed or v.current or 1))
                   for v in plan.vertices if (tpr := finite_or_none(v.true_processing_rate))]
        value = busy_share(demands, cores_new, finite_or_none(plan.overhead_fraction) or 0.0)
    return round(value, 4) if value is not None else None


def measured_downtimes_s(*, job: Job, restart: bool, limit: int = 20) -> list[float]:
    """The job's measured downtimes of succeeded executions, newest first (seconds): those of cores
    changes when ``restart`` (a driver restart or handover, or executors in place: whatever path the
    job's runner took for its cores), otherwise those of changes in the same driver (the query
    restarted in process, with or without an offline state repartition), the only paths a change
    without a cores change takes."""
    downtimes = Execution.objects.filter(proposal__job=job, status=Execution.Status.SUCCEEDED,
                                         downtime_s__isnull=False)
    same_driver = [str(RescalePath.IN_PROCESS), str(RescalePath.STATE_REPARTITION)]
    downtimes = downtimes.exclude(path__in=same_driver) if restart else downtimes.filter(path__in=same_driver)
    return list(downtimes.order_by("-finished_at").values_list("downtime_s", flat=True)[:limit])


def predict(*, plan: JobPlan, snapshot: MetricSnapshot | None, downtimes_s: Iterable[float],
            configured_restart_s: float) -> dict:
    """The prediction of a plan, with its inputs: what the proposal page shows, frozen.

    Returns a dict: ``cores_now``/``cores_new``; ``capacity_per_s`` (source records/s the proposed
    configuration sustains, ``scaling.forecast.job_figures.job_capacity``, as every page states it);
    ``utilization_now`` and ``utilization`` (busy share of the cores at the target rate, 0..1,
    ``JobPlan.utilization_now`` and ``predicted_utilization``: the same formula on the running and the
    proposed cores; the needed utilization the band compares, with the catch-up, is ``inputs.load``);
    ``batch_ratio_now``/``batch_ratio`` (SPARK-12133 R: the task part shrinks with the cores,
    the overhead part does not); ``downtime_s`` (median measured, else the configured restart time)
    with ``downtime_source``; ``restart_backlog`` (the backlog now plus what arrives during the
    downtime, records) and ``catch_up_s`` (seconds to drain it with the spare capacity, None when it
    never drains); and ``inputs``: the arrival rate, backlog, overhead, and per vertex the rates used.
    """
    cores_now, cores_new = plan_cores(plan)
    overhead = finite_or_none(plan.overhead_fraction) or 0.0
    sources = {v.vertex_id for v in snapshot.vertices.all() if v.is_source} if snapshot else set()
    busy_at_target = demand_cores(plan)
    downtimes = [float(d) for d in downtimes_s]
    if downtimes:
        downtime_s, downtime_source = statistics.median(downtimes), "measured"
    else:
        downtime_s, downtime_source = float(configured_restart_s), "configured"
    r_now = finite_or_none(plan.batch_ratio)
    utilization_now = plan.utilization_now if plan.utilization_now is not None else plan.utilization
    prediction: dict = {
        "cores_now": cores_now, "cores_new": cores_new,
        "utilization_now": finite_or_none(utilization_now),
        "utilization": _utilization(plan, cores_new),
        "batch_ratio_now": r_now,
        "batch_ratio": (round(forecast.predicted_batch_ratio(r_now, overhead, cores_now, cores_new), 3)
                        if r_now is not None and cores_new else None),
        "capacity_per_s": None, "catch_up_s": None, "restart_backlog": None,
        "downtime_s": round(downtime_s, 3), "downtime_source": downtime_source,
        "downtime_samples": len(downtimes),
        "inputs": {
            "arrival_per_s": snapshot.arrival_rate_per_s if snapshot else None,
            "backlog": snapshot.backlog if snapshot else None,
            "snapshot": snapshot.pk if snapshot else None,
            "overhead_fraction": overhead, "load": finite_or_none(plan.load),
            "demand_cores": round(busy_at_target, 4),
            "restart_time_s": finite_or_none(plan.restart_time_s),
            "vertices": [{"vertex_id": v.vertex_id, "current": v.current, "proposed": v.proposed,
                          "true_processing_rate": _json_number(v.true_processing_rate),
                          "target_data_rate": _json_number(v.target_data_rate),
                          "catch_up_data_rate": _json_number(v.catch_up_data_rate)} for v in plan.vertices],
        },
    }
    capacity = capacity_per_s(plan, sources, proposed=True)
    if capacity is not None and snapshot is not None:
        prediction["capacity_per_s"] = round(capacity, 3)
        backlog = forecast.restart_backlog(float(snapshot.backlog), snapshot.arrival_rate_per_s, downtime_s)
        prediction["restart_backlog"] = round(backlog)
        catch_up = forecast.catch_up_s(backlog, capacity, snapshot.arrival_rate_per_s)
        prediction["catch_up_s"] = round(catch_up, 3) if catch_up is not None else None
    return prediction


def realized(*, plan: JobPlan | None, after: list[MetricSnapshot], finished_at: datetime, downtime_s: float | None,
             vertices: list[VertexSnapshot]) -> dict:
    """The same quantities as :func:`predict`, measured on the snapshots ``after`` the change (oldest
    first) and their ``vertices``: capacity (records/s, from the realized busy time per source
    record at the busiest task's pace); utilization at the arrival rate
    (``scaling.forecast.prediction.realized_utilization_at``: the measured busy time rescaled to the
    arrivals, comparable with the prediction "at the target rate"), and the
    measured busy share ``busy_share`` (Σ busy / (window × cores), which includes any catch-up); batch
    ratio, and the measured downtime; the number of completed batches, and no figure when it is 0.
    The realized catch-up is the execution's own (``Execution.catch_up_s``, ``scaling.forecast.rescale_cost``),
    followed past the verification window, so it is not measured here a second way."""
    window_s = sum(s.window_s for s in after)
    out: dict = {"capacity_per_s": None, "utilization": None, "busy_share": None, "batch_ratio": None,
                 "downtime_s": downtime_s, "window_s": round(window_s, 3),
                 "batches": sum(s.batches for s in after)}
    if not after or window_s <= 0 or not out["batches"]:
        return out  # nothing is measured from windows without a completed batch
    cores = after[-1].cores or 1
    busy = sum(v.busy_s for v in vertices)
    sources = [v for v in vertices if v.is_source]
    source_in = sum(v.records_in for v in sources)
    batches = sum(s.batches for s in after)
    overhead = sum(s.batch_overhead_s * s.batches for s in after) / batches if batches else 0.0
    trigger = after[-1].trigger_interval_s or 1.0
    # At the busiest task's pace, as the plan's rates were measured (VertexSnapshot.paced_busy_s): a
    # skewed stage is compared like with like.
    capacity = forecast.realized_capacity_per_s(cores=cores, overhead_s=overhead, trigger_interval_s=trigger,
                                                busy_s=sum(v.paced_busy_s for v in vertices), source_records=source_in)
    if capacity is not None:
        out["capacity_per_s"] = round(capacity, 3)
    out["busy_share"] = round(job_utilization(busy / window_s, cores), 4)
    stages: dict[str, list] = {}
    for v in vertices:
        stage = stages.setdefault(v.vertex_id, [0.0, v.tasks])
        stage[0] += v.busy_s / window_s
        stage[1] = v.tasks
    arrival = sum(s.arrival_rate_per_s * s.window_s for s in after) / window_s
    at_arrival = forecast.realized_utilization_at(
        stages=[(b, t) for b, t in stages.values()], source_per_s=source_in / window_s, rate_per_s=arrival,
        cores=cores, overhead_s=overhead, trigger_interval_s=trigger)
    if at_arrival is not None:
        out["utilization"] = round(at_arrival, 4)
    if batches:
        out["batch_ratio"] = round(sum(s.batch_duration_s * s.batches for s in after) / batches / trigger, 3)
    return out
