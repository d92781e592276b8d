""""Why no proposal?": the reasons a job has no pending proposal, in words an operator can act on.

Derived from what is stored: the job's health and last error, its policy, the newest snapshot and
the newest evaluation (``Evaluation.plan`` is the serialized ``scaling.JobPlan``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone as dt_timezone

from django.conf import settings
from django.utils import timezone

from webapp.jobs.models import Evaluation, Job, MetricSnapshot
from webapp.jobs.selectors import policy_band, window_coverage

#: A snapshot older than this many collect intervals is stale.
STALE_INTERVALS = 4



@dataclass(frozen=True)
class Reason:
    """One reason: ``code`` is stable (tests, API), ``text`` is what the page shows."""

    code: str  # window | bounds | delayed | excluded | advisor | missing | stale | busy | other
    text: str


def _clock(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, tz=dt_timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


def why_no_proposal(*, job: Job, snapshot: MetricSnapshot | None, evaluation: Evaluation | None,
                    busy: object | None = None, now: datetime | None = None) -> list[Reason]:
    """Why ``job`` has no pending proposal, most important first. ``busy`` is an approved or executing
    proposal (evaluations pause while one runs). Never empty."""
    now = now or timezone.now()
    policy = job.policy
    reasons: list[Reason] = []
    if policy.mode == "advisor":
        reasons.append(Reason("advisor", "advisor mode: the autoscaler only advises; proposals are shown "
                                         "but never executed, and none is pending now"))
    if busy is not None:
        reasons.append(Reason("busy", f"proposal #{busy.pk} is {busy.get_status_display()}: evaluation "
                                      f"pauses until its execution finishes"))
    stale_after_s = STALE_INTERVALS * settings.SCALER_COLLECT_INTERVAL_S
    spark_said = f": {job.last_error}" if job.last_error else ""
    if snapshot is None:
        reasons.append(Reason("missing", f"metrics are missing: no snapshot was collected yet{spark_said}"))
        return reasons
    age_s = (now - snapshot.collected_at).total_seconds()
    if age_s > stale_after_s or job.health == Job.Health.DOWN:
        reasons.append(Reason("stale", f"metrics are stale: the last snapshot is {_duration(age_s)} old "
                                       f"(collected {snapshot.collected_at:%H:%M:%S}){spark_said}"))
    if snapshot.errors:
        reasons.append(Reason("missing", "metrics are missing from the last snapshot: "
                                         + "; ".join(str(e) for e in snapshot.errors)))
    window_s = policy.metric_window_s
    covered_s = window_coverage(jobs=[job], now=now)[job.pk]
    if covered_s < 0.9 * window_s and age_s <= stale_after_s:
        left_s = 0.9 * window_s - covered_s
        reasons.append(Reason("window", f"the metric window is not yet full: {covered_s:.0f} of {window_s:.0f} s "
                                        f"collected, about {_duration(left_s)} left"))
    if evaluation is not None and not (job.config_changed_at and evaluation.created_at < job.config_changed_at):
        reasons.extend(_evaluation_reasons(job, evaluation, now))
    if not reasons:
        reasons.append(Reason("other", "no evaluation has run yet for the current configuration"))
    return reasons


def _evaluation_reasons(job: Job, evaluation: Evaluation, now: datetime) -> list[Reason]:
    from scaling.periods import active_period  # noqa: PLC0415
    from webapp.proposals.reasons import hold_text  # noqa: PLC0415
    from webapp.proposals.holds import held_scale_down  # noqa: PLC0415

    plan = evaluation.plan or {}
    out: list[Reason] = []
    texts = list(evaluation.reasons or plan.get("reasons") or [])
    held = held_scale_down(job=job, now=now)
    if held is not None:
        cores = f"{held['cores']} core{'s' if held['cores'] != 1 else ''}"
        out.append(Reason("delayed", f"a scale-down to {cores} is delayed until "
                                     f"{held['due_at']:%Y-%m-%d %H:%M:%S} UTC (FLINK-36018 scale-down interval "
                                     f"{_duration(held['interval_s'])}); an operator can apply it now"))
    if evaluation.hold:
        out.append(Reason("held", hold_text(evaluation.hold, evaluation.hold_detail)))
    if plan.get("executable") is False:
        period = active_period(tuple(job.policy.excluded_periods or ()), now.timestamp())
        named = f": {period}" if period else ""
        out.append(Reason("excluded", f"an excluded period is in force{named}; the plan is computed but not executed"))
    if evaluation.decision == "no-change" and not out:
        low, high = policy_band(job.policy)
        load = plan.get("load")
        detail = "; ".join(texts)
        band = f"[{low:.2f}, {high:.2f}]"
        if isinstance(load, (int, float)) and not low <= load <= high:
            # Outside the band, yet nothing to change: the plan is already the running configuration
            # (for example at the minimum cores, or at a bound of the policy).
            side = "below" if load < low else "above"
            text = (f"load {load:.2f} is {side} the utilization band {band}, but the plan equals the running "
                    f"configuration (already at a bound of the policy)")
        else:
            load_text = f"load {load:.2f}" if isinstance(load, (int, float)) else "the load"
            text = f"every vertex is within its bounds: {load_text} is inside the utilization band {band}"
        out.append(Reason("bounds", text + (f" ({detail})" if detail else "")))
    elif not out and texts:
        out.append(Reason("other", f"last evaluation ({evaluation.decision}): " + "; ".join(texts)))
    return out
