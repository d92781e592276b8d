"""Restart-aware evaluation: after an execution the scaler expects the backlog that
built up during the downtime and the catch-up the plan predicted, so neither that backlog nor the
warm-up batches of a fresh JVM cause a new scale-up by themselves.

References (apache/flink-kubernetes-operator, flink-autoscaler):
- FLIP-271 stabilization: ``ScalingMetricCollector`` ignores metrics until
  ``job.autoscaler.stabilization.interval`` after the job (re)started (``stableTime``), and clears
  the metric history when the job changed; ``webapp.loop.window.stable_snapshots`` does the same,
  and verification skips the interval too.
- Restart time in the catch-up target: ``AutoScalerUtils.getTargetProcessingCapacity`` adds
  ``INPUT_RATE × RESTART / CATCH_UP`` to the target capacity, with the restart time measured by
  ``ScalingTracking`` (``job.autoscaler.restart.time-tracking``); the frozen prediction
  (``predictions.predict``) uses the same backlog, ``arrival × downtime``, for its catch-up time.

The rule, for an evaluation that points up after the newest execution of a scale proposal:
- while that execution is not verified yet (its verification is due after the stabilization
  interval and ``verification_windows`` metric windows), hold: what the restart's first windows
  show is the downtime's backlog and a cold JVM, not a new load;
- once verified (the realized rates match the prediction), hold until the predicted catch-up
  (with the verification tolerance as margin) is over, provided the arrival rate alone still fits
  the realized capacity inside the band: the remaining demand is the restart's backlog, which
  drains as predicted.
An ``inconclusive`` verdict, or an arrival rate the realized capacity cannot carry, lets the
scale-up through; an ``ineffective`` one is the block's business (``services.scale_up_block_set``).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings

from scaling.values.plan import JobPlan
from webapp.jobs.models import EvaluationHold, Job
from webapp.jobs.selectors import latest_snapshot
from webapp.proposals.models import Execution, Proposal
from webapp.proposals.predictions import capacity_per_s

#: Longest the hold waits for a verification that does not come (the reconcile beat is down), as a
#: multiple of the time the verification needs.
VERIFICATION_WAIT_FACTOR = 2.0


def verification_delay_s(policy) -> float:
    """Seconds after an execution before its verification is due: the stabilization interval, then
    ``verification_windows`` metric windows."""
    return settings.SCALER_STABILIZATION_S + policy.verification_windows * policy.metric_window_s


def restart_hold(*, job: Job, plan: JobPlan, now: datetime) -> tuple[EvaluationHold, dict] | None:
    """Whether a scale-up the evaluation's ``plan`` asks for is the restart's own backlog
    or warm-up (see the module docstring). Returns ``(hold, detail)`` or None."""
    execution = (Execution.objects.select_related("proposal")
                 .filter(proposal__job=job, proposal__kind=Proposal.Kind.SCALE, status=Execution.Status.SUCCEEDED,
                         finished_at__isnull=False).order_by("-finished_at").first())
    if execution is None or (job.config_changed_at and execution.finished_at < job.config_changed_at
                             - timedelta(seconds=1)):
        return None  # the running configuration is not that execution's
    proposal, policy = execution.proposal, job.policy
    elapsed_s = (now - execution.finished_at).total_seconds()
    delay_s = verification_delay_s(policy)
    if proposal.verification == Proposal.Verification.NONE:
        if elapsed_s < VERIFICATION_WAIT_FACTOR * delay_s:
            return EvaluationHold.AWAITING_VERIFICATION, {"proposal": proposal.pk,
                                                          "due_in_s": round(max(0.0, delay_s - elapsed_s), 1)}
        return None
    if proposal.verification != Proposal.Verification.VERIFIED:
        return None
    predicted_catch_up = (proposal.prediction or {}).get("catch_up_s")
    if not isinstance(predicted_catch_up, (int, float)):
        return None
    end_s = settings.SCALER_STABILIZATION_S + predicted_catch_up * (1.0 + policy.verification_tolerance)
    if elapsed_s >= end_s:
        return None
    snapshot = latest_snapshot(job=job)
    sources = {v.vertex_id for v in snapshot.vertices.all() if v.is_source} if snapshot else set()
    capacity = capacity_per_s(plan, sources)
    arrival = sum(v.target_data_rate for v in plan.vertices if v.vertex_id in sources)
    high = policy.utilization_max if policy.utilization_max is not None else min(1.0, policy.utilization_target + 0.3)
    if capacity is None or arrival > high * capacity:
        return None
    return EvaluationHold.RESTART_CATCH_UP, {"proposal": proposal.pk, "capacity_per_s": round(capacity, 1),
                                             "arrival_per_s": round(arrival, 1),
                                             "catch_up_left_s": round(end_s - elapsed_s, 1)}
