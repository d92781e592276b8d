""""Why no proposal?": the reasons a job has no pending proposal, as codes with data; the words an
operator reads are rendered from them here (once each, with local times and "in N min"), and nothing
parses a sentence the model wrote.

Derived from what is stored: the job's health and last error, its policy, the newest snapshot and
the newest evaluation (``Evaluation.job_plan``, the stored ``scaling.values.plan.JobPlan``); the plan's own
reasons are worded by ``scaling.words.reason_text``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING

from django.conf import settings
from django.utils import timezone

from scaling.forecast.bounds import CoresBound
from scaling.forecast.job_figures import plan_band
from scaling.policy.periods import active_period
from scaling.values import reasons as plan_reasons
from scaling.values.reasons import Decision
from scaling.words.reason_text import LOAD_NAME, band_text, finding_text, reason_text
from webapp.jobs.models import Evaluation, Job, MetricSnapshot
from webapp.jobs.selectors import policy_band, window_coverage
from webapp.proposals.holds import held_scale_down
from webapp.proposals.predictions import plan_cores
from webapp.proposals.reason_text import evaluation_hold_text, health_text

if TYPE_CHECKING:
    from sparkclient.contract.binding import StageBinding

#: A snapshot older than this many collect intervals is stale.
STALE_INTERVALS = 4


class Why(StrEnum):
    """Why a job has no pending proposal (``Reason.code``; stable for tests and the API)."""

    ADVISOR = "advisor"      # advisor mode: proposals are never executed
    BUSY = "busy"            # data: proposal, status (an execution is under way)
    MISSING = "missing"      # data: error (no snapshot yet), or errors (of the last snapshot)
    STALE = "stale"          # data: age_s, collected_at, error
    WINDOW = "window"        # data: covered_s, window_s, left_s
    DELAYED = "delayed"      # data: cores, due_at, in_s, interval_s (FLINK-36018)
    HELD = "held"            # data: hold, detail (webapp.proposals.reasons.EvaluationHold)
    EXCLUDED = "excluded"    # data: period
    BOUNDS = "bounds"        # data: load, low, high, unbound, cores, min_cores, bound (CoresBound.to_dict)
    LIMITS = "limits"        # data: limits (the plan's ``PlanLimit`` values)
    UNBOUND = "unbound"      # data: stages (position, stage name, knob or None) the plan may not change
    FINDINGS = "findings"    # data: findings (the plan's ``scaling.values.findings.Finding``: a pinned bottleneck)
    OTHER = "other"          # data: decision, reasons (the plan's ``Reason`` values, or none yet)


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min {seconds % 60} s" if seconds % 60 else f"{seconds // 60} min"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


def _in(seconds: float) -> str:
    """"in N min" (or seconds, or hours) from now."""
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"in {seconds:.0f} s"
    if seconds < 7200:
        return f"in {seconds / 60:.0f} min"
    if seconds < 172800:
        return f"in {seconds / 3600:.0f} h"
    return f"in {seconds / 86400:.0f} days"


def _clock(at: datetime) -> str:
    """A time in the server's local time zone (``TIME_ZONE``) with the zone's name; the date only
    when it is not today."""
    local = timezone.localtime(at)
    day = "" if local.date() == timezone.localdate() else f"{local:%Y-%m-%d} "
    return f"{day}{local:%H:%M:%S} {local.tzname()}"


def _cores(n) -> str:
    return f"{n} core{'s' if n != 1 else ''}"


def render(code: Why, data: dict) -> str:
    """The sentence for one reason."""
    if code == Why.ADVISOR:
        return ("advisor mode: the autoscaler only advises; proposals are shown but never executed, "
                "and none is pending now")
    if code == Why.BUSY:
        return f"proposal #{data['proposal']} is {data['status']}: evaluation pauses until its execution finishes"
    said = f": {data['error']}" if data.get("error") else ""
    if code == Why.MISSING:
        if "errors" in data:
            return "metrics are missing from the last snapshot: " + "; ".join(data["errors"])
        return f"metrics are missing: no snapshot was collected yet{said}"
    if code == Why.STALE:
        return (f"metrics are stale: the last snapshot is {_duration(data['age_s'])} old "
                f"(collected at {_clock(data['collected_at'])}){said}")
    if code == Why.WINDOW:
        return (f"the metric window is not yet full: {data['covered_s']:.0f} of {data['window_s']:.0f} s collected, "
                f"about {_duration(data['left_s'])} left")
    if code == Why.DELAYED:
        return (f"a scale-down to {_cores(data['cores'])} is delayed until {_clock(data['due_at'])} "
                f"({_in(data['in_s'])}; FLINK-36018 scale-down interval {_duration(data['interval_s'])}); "
                f"an operator can apply it now")
    if code == Why.HELD:
        return evaluation_hold_text(data["hold"], data["detail"])
    if code == Why.EXCLUDED:
        named = f": {data['period']}" if data.get("period") else ""
        return f"an excluded period is in force{named}; the plan is computed but not executed"
    if code == Why.BOUNDS:
        band, load = band_text(data["low"], data["high"]), data.get("load")
        if isinstance(load, (int, float)) and not data["low"] <= load <= data["high"]:
            # Outside the band, yet nothing to change: the plan is already the running configuration.
            side = "below" if load < data["low"] else "above"
            why = ("stages not bound to their knobs are left as they run" if data.get("unbound")
                   else _at_bound(side, data))
            return (f"{LOAD_NAME} {load:.2f} is {side} the utilization band {band}, but the plan equals the running "
                    f"configuration ({why})")
        load_text = f"{LOAD_NAME} {load:.2f}" if isinstance(load, (int, float)) else f"the {LOAD_NAME}"
        return f"every vertex is within its bounds: {load_text} is inside the utilization band {band}"
    if code == Why.UNBOUND:
        stages = [f"stage {item['position']} ({item['stage']})"
                  + (f" and knob {item['knob']!r}" if item.get("knob") else "") for item in data["stages"]]
        return (", ".join(stages) + (" are" if len(stages) > 1 else " is") + " not bound (see the binding problem "
                "under Running configuration): the plan cannot change what Spark runs there")
    if code == Why.LIMITS:
        texts = [reason_text(plan_reasons.Reason(item.code, item.vertex_id, item.data)) for item in data["limits"]]
        return "what the plan cannot meet: " + "; ".join(texts) if texts else "the plan names limits it cannot meet"
    if code == Why.FINDINGS:
        return "what cores cannot fix: " + "; ".join(map(finding_text, data["findings"]))
    text = "; ".join(map(reason_text, data["reasons"])) or "no evaluation has run yet for the current configuration"
    return f"last evaluation ({data['decision']}): {text}"


def _at_bound(side: str, data: dict) -> str:
    """Which bound holds the plan where it runs: the effective most cores and its source above the
    band (``scaling.forecast.bounds``), the policy's ``min_cores`` below it."""
    bound, cores = data.get("bound"), data.get("cores")
    if side == "above" and bound and cores is not None and cores >= bound["cores"]:
        return f"already at the most cores it may have: {bound['text']}"
    if side == "below" and cores is not None and cores <= data.get("min_cores", 0):
        return f"already at the policy's least cores, {_cores(data['min_cores'])}"
    if bound:
        return f"no change of the stages or cores within the bounds helps; the most cores: {bound['text']}"
    return "already at a bound"


@dataclass(frozen=True)
class Reason:
    """One reason: ``code`` is stable (tests, API), ``data`` its numbers; ``text`` is what the page shows."""

    code: Why
    data: dict = field(default_factory=dict)

    @property
    def text(self) -> str:
        return render(self.code, self.data)


def why_no_proposal(*, job: Job, snapshot: MetricSnapshot | None, evaluation: Evaluation | None,
                    busy: object | None = None, now: datetime | None = None,
                    unbound: Sequence[StageBinding] = (), stage_names: Mapping[int, str] | None = None,
                    bound: CoresBound | None = None) -> list[Reason]:
    """Why ``job`` has no pending proposal, most important first. ``busy`` is an approved or executing
    proposal (evaluations pause while one runs); ``unbound``: the stage bindings that are a problem
    (``StageBinding.problem``), named by ``stage_names`` (position -> stage name); ``bound``: the
    effective most cores (``webapp.loop.bounds``), named where the plan is held at it. Never empty."""
    now = now or timezone.now()
    policy = job.policy
    reasons: list[Reason] = []
    if policy.mode == "advisor":
        reasons.append(Reason(Why.ADVISOR))
    if busy is not None:
        reasons.append(Reason(Why.BUSY, {"proposal": busy.pk, "status": busy.get_status_display()}))
    stale_after_s = STALE_INTERVALS * settings.SCALER_COLLECT_INTERVAL_S
    if snapshot is None:
        reasons.append(Reason(Why.MISSING, {"error": health_text(job.health_reason, job.last_error)}))
        return reasons
    age_s = (now - snapshot.collected_at).total_seconds()
    if age_s > stale_after_s or job.health == Job.Health.DOWN:
        reasons.append(Reason(Why.STALE, {"age_s": age_s, "collected_at": snapshot.collected_at,
                                          "error": health_text(job.health_reason, job.last_error)}))
    if snapshot.errors:
        reasons.append(Reason(Why.MISSING, {"errors": [str(e) for e in snapshot.errors]}))
    window_s = policy.metric_window_s
    covered_s = window_coverage(jobs=[job], now=now)[job.pk]
    if covered_s < 0.9 * window_s and age_s <= stale_after_s:
        reasons.append(Reason(Why.WINDOW, {"covered_s": covered_s, "window_s": window_s,
                                           "left_s": 0.9 * window_s - covered_s}))
    if evaluation is not None and not (job.config_changed_at and evaluation.created_at < job.config_changed_at):
        names = stage_names or {}
        stages = [{"position": b.position, "stage": names.get(b.position, f"stage {b.position}"), "knob": b.knob}
                  for b in unbound]
        reasons.extend(_evaluation_reasons(job, evaluation, now, stages, bound))
    if not reasons:
        reasons.append(Reason(Why.OTHER, {"decision": "none", "reasons": ()}))
    return reasons


def _evaluation_reasons(job: Job, evaluation: Evaluation, now: datetime, unbound: list[dict],
                        bound: CoresBound | None) -> list[Reason]:
    plan = evaluation.job_plan
    out: list[Reason] = []
    held = held_scale_down(job=job, now=now)
    if held is not None:
        out.append(Reason(Why.DELAYED, {"cores": held["cores"], "due_at": held["due_at"], "in_s": held["in_s"],
                                        "interval_s": held["interval_s"]}))
    if evaluation.hold:
        out.append(Reason(Why.HELD, {"hold": evaluation.hold, "detail": evaluation.hold_detail}))
    if plan is not None and not plan.executable:
        out.append(Reason(Why.EXCLUDED, {"period": active_period(tuple(job.policy.excluded_periods or ()),
                                                                 now.timestamp())}))
    if evaluation.decision == Decision.NO_CHANGE and not out:
        low, high = plan_band(plan, policy_band(job.policy))
        load = plan.load if plan is not None else None
        outside = load is not None and not low <= load <= high
        named = unbound if outside else []
        cores = plan_cores(plan)[0] if plan is not None and plan.executors_current is not None else None
        out.append(Reason(Why.BOUNDS, {"load": load, "low": low, "high": high, "unbound": bool(named), "cores": cores,
                                       "min_cores": job.policy.min_cores,
                                       "bound": bound.to_dict() if bound is not None else None}))
        if named:
            out.append(Reason(Why.UNBOUND, {"stages": named}))
        if plan is not None and plan.limits and outside:
            # Out of the band with nothing to change: say what the plan cannot meet (a skewed stage,
            # the executors' maximum, a catch-up out of reach) rather than only "at a bound".
            out.append(Reason(Why.LIMITS, {"limits": plan.limits}))
    elif not out and (said := evaluation.reason_values or (plan.reasons if plan is not None else ())):
        out.append(Reason(Why.OTHER, {"decision": evaluation.decision, "reasons": said}))
    if plan is not None and plan.findings:
        out.append(Reason(Why.FINDINGS, {"findings": plan.findings}))
    return out
