"""Verification after execution, as Argo Rollouts' analysis: once the new configuration has run
for ``verification_windows`` metric windows, compare what happened with what the plan predicted.

The verdict is judged on the numbers the proposal page shows: the frozen predicted capacity
(``Proposal.prediction["capacity_per_s"]``) and the realized one this module stores
(``verification_detail["realized"]["capacity_per_s"]``, from the latest metric window: the
stabilization interval and the first windows carry the restart's warm-up), through their relative
error (``scaling.forecast.prediction.capacity_error``) against ``verification_tolerance``:

- **verified**: ``|error| ≤ tolerance`` and the backlog is not growing (or is empty);
- **ineffective**: the capacity fell short by more than the tolerance on enough batches, or the
  backlog kept growing;
- **inconclusive**: too few batches, the arrival rate moved so much (more than ±50 %, or to a new
  level before the restart's backlog was back) that the prediction no longer applies, no capacity
  to compare, or a capacity above the prediction by more than the tolerance. In ``auto`` mode an
  inconclusive verdict suspends auto-approval of the job until a person turns it back on (Argo
  Rollouts pauses a rollout on an inconclusive analysis).

The judgement is ``scaling.forecast.prediction.verify``; this module reads the windows and stores the verdict,
its measured error and the tolerance. The rescale's added lag, measured over its own window
(``scaling.forecast.rescale_cost``), is stored beside the realized values.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from scaling.forecast import prediction as forecast
from scaling.forecast.prediction import VerdictReason
from scaling.forecast.rescale_cost import WindowEnd
from scaling.planner.vertex_scaler import is_ineffective
from scaling.policy.numbers import finite_or_none
from scaling.values.metrics import true_processing_rate
from webapp.jobs.models import JobPolicy, MetricSnapshot, VertexSnapshot
from webapp.jobs.window import stored_issues
from webapp.loop.rescale_cost import execution_record_cost
from webapp.loop.restart import verification_delay_s
from webapp.proposals.codes import Actor, AuditAction, AuditReason, Reason
from webapp.proposals.holds import config_direction, scale_up_block_set
from webapp.proposals.lifecycle import audit
from webapp.proposals.models import Execution, Proposal
from webapp.proposals.predictions import capacity_per_s, realized
from webapp.proposals.rollback import suspend_auto_approve


def verification_due(*, now: datetime) -> list[Proposal]:
    """Succeeded scale proposals not verified yet whose configuration ran long enough."""
    due = []
    for proposal in (Proposal.objects.select_related("job__policy", "execution")
                     .filter(status=Proposal.Status.SUCCEEDED, kind=Proposal.Kind.SCALE,
                             verification=Proposal.Verification.NONE, execution__finished_at__isnull=False)):
        needed_s = verification_delay_s(proposal.job.policy)
        if proposal.execution.finished_at + timedelta(seconds=needed_s) <= now:
            due.append(proposal)
    return due


def verdict_reason(check: forecast.Verification) -> Reason:
    """A verification's reason as stored (code: ``scaling.forecast.prediction.VerdictReason``; JSON-ready data:
    capacities in records/s, ``error`` and ``tolerance`` as shares, ``short`` as
    ``[{vertex_id, realized_tpr, predicted_tpr}]``)."""
    data = {key: round(value, 4) if isinstance(value, float) else value
            for key, value in check.data.items() if key != "short"}
    if "short" in check.data:
        data["short"] = [{"vertex_id": s.vertex_id, "realized_tpr": s.realized_tpr, "predicted_tpr": s.predicted_tpr}
                         for s in check.data["short"]]
    return Reason(check.reason, data)


def _stage_rates(proposal: Proposal, after: list[MetricSnapshot]) -> list[forecast.StageRate]:
    """Each planned stage's predicted and realized true processing rate in ``after`` (records per
    busy second at the busiest task's pace, as the plan measured it), the evidence of a short verdict."""
    sums: dict[str, list[float]] = {}
    for v in VertexSnapshot.objects.filter(snapshot__in=after):
        acc = sums.setdefault(v.vertex_id, [0.0, 0.0])
        acc[0] += v.records_in
        acc[1] += v.paced_busy_s
    stages = []
    plan = proposal.job_plan
    for vp in plan.vertices if plan is not None else ():
        predicted = vp.true_processing_rate
        records_in, busy_s = sums.get(vp.vertex_id, (0.0, 0.0))
        if math.isfinite(predicted) and predicted > 0 and busy_s > 0:
            stages.append(forecast.StageRate(vp.vertex_id, predicted, true_processing_rate(records_in, busy_s),
                                             busy_s))
    return stages


def assess(*, proposal: Proposal, after: list[MetricSnapshot], before: list[MetricSnapshot], realized_values: dict,
           tolerance: float, stable: list[MetricSnapshot] | None = None,
           load_change_after_s: float | None = None) -> tuple[str, dict, Reason]:
    """Compare the window ``after`` the change with the plan (``scaling.forecast.prediction.verify``), on the
    predicted capacity frozen in ``proposal.prediction`` and the realized one in ``realized_values``
    (``webapp.proposals.predictions.realized``): the two the page shows. The batches that count as
    evidence are those of ``stable`` (the windows after the stabilization interval; default ``after``):
    a batch that overruns its trigger several times over completes once in several windows.
    ``load_change_after_s``: the load changed that many seconds after the change, before the
    rescale's backlog was back (its window ended there: ``scaling.forecast.rescale_cost``). A not-ready sample
    in ``after`` (``MetricSnapshot.not_ready``) makes the verdict inconclusive. Returns
    (result, detail, reason); the detail holds ``error`` and ``tolerance`` (shares) and the reason as
    stored (``verdict``)."""
    if sum(s.batches for s in after) == 0:
        reason = Reason(VerdictReason.NO_BATCHES)
        return (Proposal.Verification.INCONCLUSIVE, {"batches": 0, "tolerance": tolerance,
                                                     "reason": str(reason.code), "verdict": reason.as_json()}, reason)
    window_s = sum(s.window_s for s in after) or 1.0
    arrival_after = sum(s.arrival_rate_per_s * s.window_s for s in after) / window_s
    before_s = sum(s.window_s for s in before)
    arrival_before = sum(s.arrival_rate_per_s * s.window_s for s in before) / before_s if before_s else None
    batches = sum(s.batches for s in (stable or after))
    t0 = after[0].collected_at
    slope = forecast.backlog_slope_per_s([(s.collected_at - t0).total_seconds() for s in after],
                                         [float(s.backlog) for s in after])
    stages = _stage_rates(proposal, after)
    predicted = finite_or_none((proposal.prediction or {}).get("capacity_per_s"))
    realized_capacity = finite_or_none(realized_values.get("capacity_per_s"))
    check = forecast.verify(batches=batches, arrival_before=arrival_before, arrival_after=arrival_after,
                            slope_per_s=slope, latest_backlog=after[-1].backlog, realized_capacity=realized_capacity,
                            predicted_capacity=predicted, stages=stages, tolerance=tolerance,
                            load_change_after_s=load_change_after_s,
                            not_ready=[issue for s in after for issue in stored_issues(s)])
    reason = verdict_reason(check)
    error = forecast.capacity_error(realized_capacity, predicted)
    detail = {"batches": batches, "arrival_before_per_s": arrival_before and round(arrival_before, 3),
              "arrival_after_per_s": round(arrival_after, 3), "backlog_slope_per_s": round(slope, 3),
              "latest_backlog": after[-1].backlog, "error": None if error is None else round(error, 4),
              "tolerance": tolerance, "reason": str(check.reason), "verdict": reason.as_json(),
              "vertices": [{"vertex_id": s.vertex_id, "predicted_tpr": round(s.predicted_tpr, 3),
                            "realized_tpr": round(s.realized_tpr, 3), "ratio": round(s.ratio, 3),
                            "busy_s": round(s.busy_s, 3)} for s in stages]}
    return Proposal.Verification(str(check.verdict)), detail, reason


def blocks_scale_ups(*, proposal: Proposal, result: str, detail: dict, policy: JobPolicy,
                     sources: set[str]) -> bool:
    """Whether a verified execution blocks further scale-ups: FLIP-271's ineffective scale-up
    detection (``job.autoscaler.scaling.effectiveness.*``) on the job's capacity. It blocks when
    ``effectiveness_detection_enabled``, the change scaled up, the verdict is ineffective, and the
    realized capacity gain is below ``effectiveness_threshold`` × the predicted gain
    (``scaling.planner.vertex_scaler.is_ineffective``, records/s: capacity at the old cores, at the new cores
    under the plan's rates, and realized); with no capacity to compare, the verdict decides."""
    if not policy.effectiveness_detection_enabled or result != Proposal.Verification.INEFFECTIVE:
        return False
    if config_direction(job=proposal.job, current=proposal.current_config, proposed=proposal.proposed_config) != "up":
        return False
    plan = proposal.job_plan
    if plan is None:
        return True
    before = capacity_per_s(plan, sources)
    expected = capacity_per_s(plan, sources, proposed=True)
    now = (detail.get("realized") or {}).get("capacity_per_s")
    if before is None or expected is None or not isinstance(now, (int, float)) or expected <= before:
        return True
    return is_ineffective(before, expected, float(now), policy.effectiveness_threshold)


def proposal_verify(*, proposal: Proposal, now: datetime | None = None) -> Proposal | None:
    """Record ``verified``, ``ineffective`` or ``inconclusive`` for a succeeded scale proposal
    (once: a conditional UPDATE on ``verification``), with the realized values the page shows beside
    the prediction. An inconclusive verdict in ``auto`` mode suspends the job's auto-approval until a
    person resumes it. Returns None when it was already recorded."""
    now = now or timezone.now()
    execution: Execution = proposal.execution
    policy = proposal.job.policy
    # FLIP-271 stabilization (ScalingMetricCollector's stableTime): the first windows after the change
    # carry the restart's warm-up, not the new configuration's rates.
    stable_from = execution.finished_at + timedelta(seconds=settings.SCALER_STABILIZATION_S)
    since_change = list(proposal.job.snapshots.filter(collected_at__gt=execution.finished_at, collected_at__lte=now)
                        .order_by("collected_at"))
    stable = [s for s in since_change if s.collected_at - timedelta(seconds=s.window_s) >= stable_from - timedelta(
        seconds=1e-3)] or since_change
    # The rates of the latest metric window: a warm-up longer than the stabilization interval is
    # behind it by then (as Flink's effectiveness detection compares the latest evaluated rates).
    after = [s for s in stable if s.collected_at > now - timedelta(seconds=policy.metric_window_s)] or stable
    window_start = proposal.created_at - timedelta(seconds=policy.metric_window_s)
    before = list(proposal.job.snapshots.filter(collected_at__gt=window_start, collected_at__lte=proposal.created_at))
    after_vertices = list(VertexSnapshot.objects.filter(snapshot__in=after))
    # What happened, beside what was predicted (the proposal page shows both, from these stored values).
    # The figures and their evidence (batches, window) all from the window the verdict judges.
    values = realized(plan=proposal.job_plan, after=after, finished_at=execution.finished_at,
                      downtime_s=execution.downtime_s, vertices=after_vertices)
    # The rescale's cost over its own window (scaling.forecast.rescale_cost), as the execution stores it: its
    # added lag now, and whether a load change ended the window before the backlog was back.
    cost = execution_record_cost(execution, now=now)
    values["added_lag_s"] = execution.added_lag_s
    load_change_after_s = (round(cost.window_end_s - execution.finished_at.timestamp(), 1)
                           if cost is not None and cost.ended_by == WindowEnd.LOAD_CHANGE else None)
    result, detail, reason = assess(proposal=proposal, after=after, before=before, realized_values=values,
                                    tolerance=policy.verification_tolerance, stable=stable,
                                    load_change_after_s=load_change_after_s)
    detail["realized"] = values
    with transaction.atomic():
        updated = Proposal.objects.filter(pk=proposal.pk, verification=Proposal.Verification.NONE).update(
            verification=result, verification_detail=detail, verified_at=now)
        if not updated:
            return None
        audit(job=proposal.job, proposal=proposal, actor=Actor.VERIFICATION,
              action=AuditAction(f"verification_{result}"), after=detail, reason=reason)
        sources = {v.vertex_id for v in after_vertices if v.is_source}
        if blocks_scale_ups(proposal=proposal, result=result, detail=detail, policy=policy, sources=sources):
            scale_up_block_set(proposal=proposal, verdict=reason, now=now)
        if result == Proposal.Verification.INCONCLUSIVE and policy.mode == JobPolicy.Mode.AUTO:
            suspend_auto_approve(job=proposal.job, now=now, actor=Actor.VERIFICATION, reason=Reason(
                AuditReason.INCONCLUSIVE_VERIFICATION, {"proposal": proposal.pk, "verdict": reason.as_json()}))
    proposal.refresh_from_db()
    return proposal
