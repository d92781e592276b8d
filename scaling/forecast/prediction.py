"""What a micro-batch plan predicts, and how a realized window is judged against it (the web app's
frozen predictions and its verification after an execution call these; nothing else computes them).

Micro-batch model (docs/ARCHITECTURE.md, "DS2 on Spark micro-batches"): stages share the cores, so the
core-seconds one source record costs add up over the stages, ``c = Σ_v λ_v / TPR_v / Σ_sources λ_s``
(core-seconds per record); the job's capacity is ``cores × (1 − overhead) / c`` source records per second.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from scaling.planner.sizing import busy_share, overhead_share
from scaling.values.readiness import SampleIssue

#: Relative change of the arrival rate beyond which a prediction is not comparable (±50 %).
ARRIVAL_SHIFT_LIMIT = 0.5


def demand_cores(stages: Iterable[tuple[float, float]]) -> float:
    """Busy cores the target rates need, ``Σ_v λ_v / TPR_v`` (cores), from ``(target rate, true
    processing rate)`` pairs in records/s; a stage without a rate (0 or None) adds nothing."""
    return sum(target / tpr for target, tpr in stages if tpr)


def cost_core_s_per_record(stages: Iterable[tuple[float, float]], source_rate_per_s: float) -> float | None:
    """Core-seconds one source record costs over all stages, ``Σ_v λ_v / TPR_v / Σ_sources λ_s``
    (seconds); None when there is no rate to go by."""
    busy = demand_cores(stages)
    return busy / source_rate_per_s if busy > 0 and source_rate_per_s > 0 else None


def capacity_per_s(cores: float, overhead_fraction: float, cost_s: float) -> float:
    """Source records per second ``cores`` sustain: ``cores × (1 − overhead) / c`` (records/s)."""
    return cores * (1.0 - overhead_fraction) / cost_s


def predicted_batch_ratio(ratio_now: float, overhead_fraction: float, cores_now: int, cores_new: int) -> float:
    """SPARK-12133's batch ratio R after a change of cores: the task part shrinks with the cores, the
    overhead part does not, ``R' = o + (R − o) × cores_now / cores_new``."""
    return overhead_fraction + max(0.0, ratio_now - overhead_fraction) * cores_now / cores_new


def restart_backlog(backlog: float, arrival_per_s: float, downtime_s: float) -> float:
    """Records to drain after a restart: the backlog now plus what arrives during the downtime
    (FLIP-271 ``AutoScalerUtils.getTargetProcessingCapacity``)."""
    return max(0.0, backlog) + arrival_per_s * downtime_s


def catch_up_s(backlog: float, capacity: float, arrival_per_s: float) -> float | None:
    """Seconds to drain ``backlog`` records with the spare capacity ``capacity − arrival`` (records/s);
    0 for no backlog, None when it never drains."""
    if backlog <= 0:
        return 0.0
    spare = capacity - arrival_per_s
    return backlog / spare if spare > 0 else None


def realized_capacity_per_s(*, cores: int, overhead_s: float, trigger_interval_s: float, busy_s: float,
                            source_records: float) -> float | None:
    """Source records per second measured: ``cores × (1 − overhead) / (busy_s / source_records)``,
    with the overhead share ``overhead_s / trigger_interval_s`` capped at 0.9; None without busy time
    or source records."""
    if busy_s <= 0 or source_records <= 0:
        return None
    return cores * (1.0 - overhead_share(overhead_s, trigger_interval_s)) / (busy_s / source_records)


def realized_utilization_at(*, stages: Iterable[tuple[float, int]], source_per_s: float, rate_per_s: float,
                            cores: int, overhead_s: float, trigger_interval_s: float) -> float | None:
    """The measured busy share of the trigger interval rescaled to ``rate_per_s`` source records/s, the realized
    ``predicted_utilization`` "at the target rate" (0..1 when it fits; None without source records): ``stages``
    (per stage: busy core-seconds per second, tasks, at ``source_per_s`` records/s) scaled to the rate, as busy
    time scales with it (DS2 §3.2's constant cost per record: a restart's catch-up load is taken out), through
    ``scaling.planner.sizing.busy_share`` with the measured overhead share."""
    if source_per_s <= 0:
        return None
    scale = rate_per_s / source_per_s
    return busy_share(((busy * scale, tasks) for busy, tasks in stages), cores,
                      overhead_share(overhead_s, trigger_interval_s))


def caught_up(*, backlog: float, trigger_interval_s: float, batch_duration_s: float, arrival_per_s: float) -> bool:
    """Whether what is left is about two batches' worth of arrivals (a batch runs one trigger
    interval, or longer when it overruns it)."""
    return backlog <= 2 * max(trigger_interval_s, batch_duration_s) * max(1.0, arrival_per_s)


def backlog_slope_per_s(times_s: Sequence[float], backlogs: Sequence[float]) -> float:
    """Least-squares slope of the backlog over time (records per second); 0 for fewer than two
    points or no spread in time."""
    if len(times_s) < 2 or len(set(times_s)) < 2:
        return 0.0
    return statistics.linear_regression(times_s, backlogs).slope


class Verdict(StrEnum):
    """Outcome of a verification (Argo Rollouts' analysis)."""

    VERIFIED = "verified"
    INEFFECTIVE = "ineffective"
    INCONCLUSIVE = "inconclusive"


class VerdictReason(StrEnum):
    """Why a verification reached its verdict (data in ``Verification.data``). Every verdict that had a
    capacity to compare carries ``error`` (:func:`capacity_error`), ``tolerance``,
    ``realized_capacity_per_s`` and ``predicted_capacity_per_s``."""

    NO_BATCHES = "no-batches"              # no micro-batch completed since the change
    FEW_BATCHES = "few-batches"            # data: batches, min_batches (+ capacity data)
    ARRIVAL_SHIFT = "arrival-shift"        # data: arrival_before, arrival_after
    LOAD_CHANGE = "load-change"            # data: after_s (the load changed before the backlog was back)
    NOT_READY = "not-ready"                # data: samples, issues ([{code, data}], the newest per code)
    CAPACITY_SHORT = "capacity-short"      # data: capacity data, short (stage rates below the prediction)
    CAPACITY_ABOVE = "capacity-above"      # data: capacity data (the prediction missed the other way)
    RATE_SHORT = "rate-short"              # a verdict judged on stage rates: data: short, capacity_ratio
    BACKLOG_GROWING = "backlog-growing"    # data: slope (+ capacity data)
    NO_RATES = "no-rates"                  # no capacity to compare with (plan or window without rates)
    WITHIN_TOLERANCE = "within-tolerance"  # data: capacity data, slope


#: Fewest completed micro-batches after the change that can show a capacity clearly worse than predicted.
MIN_BATCHES = 3


def capacity_error(realized_per_s: float | None, predicted_per_s: float | None) -> float | None:
    """The relative capacity error of a prediction, ``realized / predicted − 1`` (a share: −0.167 is
    16.7 % below the prediction); None when either capacity (records/s) is unknown or the predicted
    one is not positive."""
    if realized_per_s is None or predicted_per_s is None or predicted_per_s <= 0:
        return None
    return realized_per_s / predicted_per_s - 1.0


@dataclass(frozen=True)
class StageRate:
    """One stage's predicted and realized true processing rates (records per busy second), and its
    realized busy time in the window (seconds): the evidence of a verdict that the capacity fell short."""

    vertex_id: str
    predicted_tpr: float
    realized_tpr: float
    busy_s: float = 1.0

    @property
    def ratio(self) -> float:
        return self.realized_tpr / self.predicted_tpr


@dataclass(frozen=True)
class Verification:
    """A verdict, why, and its numbers."""

    verdict: Verdict
    reason: VerdictReason
    data: dict = field(default_factory=dict)


def verify(*, batches: int, arrival_before: float | None, arrival_after: float, slope_per_s: float,
           latest_backlog: float, realized_capacity: float | None, predicted_capacity: float | None,
           tolerance: float, stages: Sequence[StageRate] = (), load_change_after_s: float | None = None,
           not_ready: Sequence[SampleIssue] = ()) -> Verification:
    """Judge the window after a change against the plan, on the capacities the proposal page shows (records/s:
    the frozen prediction and the realized value) and their :func:`capacity_error`, in Argo Rollouts' three
    outcomes. ``verified`` only when ``|error| ≤ tolerance`` (a share) and the backlog grows no faster than
    ``tolerance × arrival``. ``inconclusive``: no batches; a sample not ready (``not_ready``, its issues:
    incomplete metrics judge nothing); the load changed level ``load_change_after_s`` seconds after the change,
    before its backlog was back (``rescale_cost.WindowEnd.LOAD_CHANGE``), or the arrival rate moved more than
    :data:`ARRIVAL_SHIFT_LIMIT`; no capacity to compare; a shortfall beyond the tolerance on fewer than
    :data:`MIN_BATCHES` batches; a capacity above the prediction by more than the tolerance (the prediction does
    not describe the job, though it did no harm). ``ineffective``: such a shortfall on enough batches, or a
    growing backlog. Every verdict with both capacities holds the error, the tolerance and the capacities in its
    data; ``stages`` (optional) name the stages whose rates fell short, as evidence.
    """
    error = capacity_error(realized_capacity, predicted_capacity)
    data = {} if error is None else {"error": error, "tolerance": tolerance,
                                     "realized_capacity_per_s": realized_capacity,
                                     "predicted_capacity_per_s": predicted_capacity}
    if batches == 0:
        return Verification(Verdict.INCONCLUSIVE, VerdictReason.NO_BATCHES)
    if not_ready:
        newest = {issue.code: issue.to_json() for issue in not_ready}
        return Verification(Verdict.INCONCLUSIVE, VerdictReason.NOT_READY,
                            {**data, "samples": len(not_ready), "issues": list(newest.values())})
    if load_change_after_s is not None:
        return Verification(Verdict.INCONCLUSIVE, VerdictReason.LOAD_CHANGE, {**data, "after_s": load_change_after_s})
    if arrival_before and abs(arrival_after - arrival_before) > ARRIVAL_SHIFT_LIMIT * arrival_before:
        return Verification(Verdict.INCONCLUSIVE, VerdictReason.ARRIVAL_SHIFT,
                            {**data, "arrival_before": arrival_before, "arrival_after": arrival_after})
    growing = slope_per_s > tolerance * max(arrival_after, 1.0) and latest_backlog > 0
    if error is None:
        if growing:
            return Verification(Verdict.INEFFECTIVE, VerdictReason.BACKLOG_GROWING, {"slope": slope_per_s})
        return Verification(Verdict.INCONCLUSIVE, VerdictReason.NO_RATES)
    if error < -tolerance:
        if batches < MIN_BATCHES:
            return Verification(Verdict.INCONCLUSIVE, VerdictReason.FEW_BATCHES,
                                {**data, "batches": batches, "min_batches": MIN_BATCHES})
        short = [s for s in stages if s.ratio < 1 - tolerance]
        return Verification(Verdict.INEFFECTIVE, VerdictReason.CAPACITY_SHORT, {**data, "short": short})
    if error > tolerance:
        return Verification(Verdict.INCONCLUSIVE, VerdictReason.CAPACITY_ABOVE, data)
    if growing:
        return Verification(Verdict.INEFFECTIVE, VerdictReason.BACKLOG_GROWING, {**data, "slope": slope_per_s})
    return Verification(Verdict.VERIFIED, VerdictReason.WITHIN_TOLERANCE, {**data, "slope": slope_per_s})
