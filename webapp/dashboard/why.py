""""Why no proposal?": the reasons a job has no pending proposal, in words an operator can act on.

Derived from what is stored: the job's health and last error, its policy, the newest snapshot and
the newest evaluation (``Evaluation.plan`` is the serialized ``scaling.JobPlan``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone as dt_timezone

from django.conf import settings
from django.utils import timezone

from webapp.jobs.models import Evaluation, Job, MetricSnapshot
from webapp.jobs.selectors import policy_band, window_coverage

#: A snapshot older than this many collect intervals is stale.
STALE_INTERVALS = 4

_HELD = re.compile(r"held until t=([0-9.]+) s")
_PERIOD = re.compile(r"excluded period ('[^']*'|\"[^\"]*\")")


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
        reasons.extend(_evaluation_reasons(job, evaluation))
    if not reasons:
        reasons.append(Reason("other", "no evaluation has run yet for the current configuration"))
    return reasons


def _evaluation_reasons(job: Job, evaluation: Evaluation) -> list[Reason]:
    plan = evaluation.plan or {}
    out: list[Reason] = []
    texts = list(evaluation.reasons or plan.get("reasons") or [])
    for text in texts:
        if held := _HELD.search(text):
            out.append(Reason("delayed", f"a scale-down is delayed until {_clock(float(held.group(1)))} "
                                         f"(FLINK-36018): {text}"))
        elif period := _PERIOD.search(text):
            out.append(Reason("excluded", f"an excluded period is in force: {period.group(1).strip(chr(39) + chr(34))}"
                                          f"; the plan is computed but not executed"))
    if plan.get("executable") is False and not any(r.code == "excluded" for r in out):
        out.append(Reason("excluded", "an excluded period is in force: the plan is computed but not executed"))
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


def proposal_forecast(*, proposal, snapshot: MetricSnapshot | None, source_ids: set[str],
                      measured_downtimes_s: list[float], configured_restart_s: float) -> dict:
    """What the proposal page predicts from the plan: utilization and batch ratio after the change, the
    catch-up time of the current backlog and the expected downtime.

    Micro-batch model (ARCHITECTURE.md): stages share the cores, so the core-seconds each source record
    costs add up over the vertices, ``c = Σ_v λ_v / TPR_v / Σ_sources λ_s``; the job's capacity is
    ``cores × (1 − overhead) / c`` source records per second.
    """
    plan = proposal.plan or {}
    vertices = plan.get("vertices", [])
    cores_now = plan.get("executors_current") or proposal.current_config.get("cores") or 1
    cores_new = plan.get("executors_proposed") or proposal.proposed_config.get("cores") or cores_now
    per_executor = plan.get("cores_per_executor") or 1
    cores_now, cores_new = cores_now * per_executor, cores_new * per_executor
    overhead = plan.get("overhead_fraction") or 0.0

    def number(value):
        return value if isinstance(value, (int, float)) else None

    busy_at_target = 0.0
    source_rate = 0.0
    for v in vertices:
        tpr, target = number(v.get("true_processing_rate")), number(v.get("target_data_rate")) or 0.0
        if tpr:
            busy_at_target += target / tpr
    sources = source_ids or ({vertices[0]["vertex_id"]} if vertices else set())
    for v in vertices:
        if v["vertex_id"] in sources:
            source_rate += number(v.get("target_data_rate")) or 0.0
    forecast: dict = {"cores_now": cores_now, "cores_new": cores_new,
                      "utilization_now": number(plan.get("utilization")),
                      "utilization_after": round(busy_at_target / cores_new, 3) if cores_new else None,
                      "batch_ratio_now": number(plan.get("batch_ratio")), "batch_ratio_after": None,
                      "catch_up_s": None, "catch_up_text": "", "backlog": snapshot.backlog if snapshot else None}
    r_now = forecast["batch_ratio_now"]
    if r_now is not None and cores_new:
        # The task part of the batch shrinks with the cores; the overhead part does not.
        forecast["batch_ratio_after"] = round(overhead + max(0.0, r_now - overhead) * cores_now / cores_new, 3)
    if busy_at_target > 0 and source_rate > 0 and snapshot is not None:
        cost_core_s = busy_at_target / source_rate
        capacity = cores_new * (1.0 - overhead) / cost_core_s
        spare = capacity - snapshot.arrival_rate_per_s
        forecast["capacity_after_per_s"] = round(capacity, 1)
        if snapshot.backlog <= 0:
            forecast["catch_up_text"] = "no backlog to catch up"
            forecast["catch_up_s"] = 0.0
        elif spare <= 0:
            forecast["catch_up_text"] = (f"never: capacity {capacity:,.0f} rec/s is below the arrival rate "
                                         f"{snapshot.arrival_rate_per_s:,.0f} rec/s")
        else:
            forecast["catch_up_s"] = snapshot.backlog / spare
            forecast["catch_up_text"] = (f"{_duration(forecast['catch_up_s'])} for {snapshot.backlog:,} records "
                                         f"({spare:,.0f} rec/s spare capacity)")
    if measured_downtimes_s:
        ordered = sorted(measured_downtimes_s)
        median = ordered[len(ordered) // 2]
        forecast["downtime_s"] = median
        forecast["downtime_text"] = (f"{median:.1f} s (median of {len(ordered)} measured restart"
                                     f"{'s' if len(ordered) != 1 else ''} of this job)")
    else:
        forecast["downtime_s"] = configured_restart_s
        forecast["downtime_text"] = f"{configured_restart_s:.1f} s (configured; no restart measured yet)"
    return forecast
