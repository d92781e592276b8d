"""Record what each rescale cost on its execution: ``added_lag_s`` and ``catch_up_s`` from the job's
metric snapshots (:func:`scaling.forecast.rescale_cost.rescale_cost`), and ``time_to_effect_s`` from the
approval to the runner's first batch on the new configuration
(:func:`scaling.forecast.rescale_cost.measured_time_to_effect_s`)."""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from django.utils import timezone

from scaling.forecast.rescale_cost import LagSample, RescaleCost, measured_time_to_effect_s, rescale_cost
from sparkclient.contract.messages import RescaleResult
from webapp.jobs.models import MetricSnapshot
from webapp.proposals.models import Execution

#: How long after an execution its catch-up is still looked for, seconds; past it, catch_up_s stays empty.
FOLLOW_S = 3600.0


def time_to_effect_s(execution: Execution, result: RescaleResult, *, answered_at: datetime) -> float | None:
    """Seconds from the approval of ``execution``'s proposal (``decided_at``; the execution's start
    without one) to the first batch on the new configuration that ``result`` reports
    (``first_batch_at``, the runner's clock, capped at ``answered_at``, when the web app read the
    answer); None when the result has no first batch (nothing restarted, or an older runner)."""
    approved = execution.proposal.decided_at or execution.started_at
    return measured_time_to_effect_s(approved_at_s=approved.timestamp(), first_batch_at_s=result.first_batch_at,
                                     answered_at_s=answered_at.timestamp())


def execution_record_cost(execution: Execution, *, now: datetime | None = None) -> RescaleCost | None:
    """Fill ``added_lag_s`` and ``catch_up_s`` of a succeeded execution from the snapshots around it
    (only windows that completed a batch: a window without one read no backlog). The steady level is
    the proposal's metric window before the execution started; the tolerance one trigger interval of
    arrivals. Both are measured over the rescale's own window, which ends at the first return to the
    steady level, the next load change or the next execution of the job (``scaling.forecast.rescale_cost``).
    Idempotent; ``catch_up_s`` stays None until the backlog is back. Returns the cost (times on the
    epoch clock), None for an execution that did not succeed or has no snapshot yet."""
    now = now or timezone.now()
    if execution.finished_at is None or execution.status != Execution.Status.SUCCEEDED:
        return None
    job = execution.proposal.job
    window_s = float(job.policy.metric_window_s)
    # Clocks: started_at is the row's creation time, finished_at the runner's answer time as recorded.
    started = min(execution.started_at, execution.finished_at)
    rows = list(MetricSnapshot.objects.filter(
        job=job, batches__gt=0, collected_at__gte=started - timedelta(seconds=window_s),
        collected_at__lte=now).order_by("collected_at"))
    if not rows:
        return None
    before = [r for r in rows if r.collected_at <= started]
    tolerance = (before[-1] if before else rows[0]).arrival_rate_per_s * (rows[-1].trigger_interval_s or 1.0)
    following = (Execution.objects.filter(proposal__job=job, started_at__gt=started).exclude(pk=execution.pk)
                 .order_by("started_at").values_list("started_at", flat=True).first())
    cost = rescale_cost([LagSample(r.collected_at.timestamp(), float(r.backlog), r.arrival_rate_per_s) for r in rows],
                        started_at_s=started.timestamp(), finished_at_s=execution.finished_at.timestamp(),
                        steady_window_s=window_s, tolerance_records=tolerance,
                        until_s=following.timestamp() if following is not None else math.inf)
    fields = {k: None if v is None else round(v, 3)
              for k, v in (("added_lag_s", cost.added_lag_s), ("catch_up_s", cost.catch_up_s))}
    Execution.objects.filter(pk=execution.pk).update(**fields)
    execution.refresh_from_db()
    return cost


def record_open_costs(*, now: datetime | None = None) -> int:
    """Reconcile step: fill the cost of every succeeded execution of the last :data:`FOLLOW_S` whose
    catch-up is not known yet. Returns how many now have one."""
    now = now or timezone.now()
    done = 0
    for execution in Execution.objects.select_related("proposal__job__policy").filter(
            status=Execution.Status.SUCCEEDED, catch_up_s__isnull=True,
            finished_at__gte=now - timedelta(seconds=FOLLOW_S)):
        cost = execution_record_cost(execution, now=now)
        if cost is not None and cost.catch_up_s is not None:
            done += 1
    return done
