"""The one place where the workflow's coded reasons become the sentences an operator reads: a
proposal's hold, a guardrail, a verification verdict, a retry decision, an audit event's reason, a
withdrawal, an evaluation's hold and a Spark answer the collector refused (a job's health reason). Pages,
admin and API call :func:`reason_text` (or :func:`withdrawal_text`, :func:`evaluation_hold_text`,
:func:`health_text`); nothing stores these sentences, nothing parses them back.

A template reads the reason's ``data`` (``webapp.proposals.codes``); a code this version does not
know renders as the code itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime

from django.utils import timezone

from scaling.forecast.prediction import VerdictReason
from scaling.values import reasons as plan_reasons
from scaling.values.reasons import PlanFormatError
from scaling.words.reason_text import LOAD_NAME, not_ready_text
from scaling.words.reason_text import reason_text as plan_reason_text
from sparkclient.collector.answers import AnswerRefusal
from sparkclient.contract.messages import RescalePath
from webapp.jobs.models import EvaluationHold
from webapp.jobs.runnerdown import RunnerDown
from webapp.proposals.codes import (
    LEGACY_TEXT,
    AuditReason,
    GuardrailCode,
    HoldCode,
    Reason,
    RetryCode,
    StandbySeen,
    StandbyWaitEnd,
    ThrottleCode,
)
from webapp.proposals.reasons import WithdrawReason

__all__ = ["PATH_TEXT", "TEMPLATES", "evaluation_hold_text", "health_note", "health_text", "path_text",
           "reason_text", "withdrawal_text"]


#: Each execution path in words (``sparkclient.contract.messages.RescalePath``).
PATH_TEXT = {
    RescalePath.NONE: "nothing to change",
    RescalePath.IN_PLACE: "executors changed in place",
    RescalePath.IN_PROCESS: "query restarted in the same driver",
    RescalePath.STATE_REPARTITION: "offline state repartition, then the query restarted in the same driver",
    RescalePath.DRIVER_RESTART: "new driver after the old one stopped",
    RescalePath.DRIVER_HANDOVER: "warm handover to a new driver",
}


def path_text(path: object) -> str:
    """An execution path in words; the value itself when it is not one, ``"–"`` when empty."""
    try:
        return PATH_TEXT[RescalePath(path)]
    except ValueError:
        return str(path) if path else "–"


def _applied(d: Mapping) -> str:
    return f"attempt {d.get('attempt')}: {path_text(d.get('path'))}, {_downtime(d)}"


def _minutes(seconds: float) -> str:
    seconds = max(0.0, float(seconds))
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def _plan_reason_words(reason: object) -> str:
    """A plan's reason inside an audit reason (``Reason.to_json``) in the plan's words
    (``scaling.words.reason_text``); a sentence stored before plan reasons were codes is itself."""
    if isinstance(reason, str):
        return reason
    try:
        return plan_reason_text(plan_reasons.Reason.from_json(reason))
    except PlanFormatError:
        return str(reason)


def _downtime(data: Mapping) -> str:
    seconds = data.get("downtime_s")
    return f"downtime {seconds:.1f} s" if isinstance(seconds, (int, float)) else "downtime not measured"


def _knobs(data: Mapping) -> str:
    return ", ".join(data.get("knobs") or ())


def _count(data: Mapping) -> int:
    return len(data.get("evaluations") or ())


def _short_stages(data: Mapping) -> str:
    return ", ".join(f"{s['vertex_id']} {round(s['realized_tpr'], 3):g} vs {round(s['predicted_tpr'], 3):g}"
                     for s in data.get("short") or ())


def _capacity_error(data: Mapping) -> str:
    """``capacity 681 rec/s realized vs 817 predicted: −16.7 %, outside ±10 %`` from a verdict's data
    (``error`` and ``tolerance`` shares, capacities in records/s)."""
    error, tolerance = float(data.get("error") or 0.0), float(data.get("tolerance") or 0.0)
    where = "within" if abs(error) <= tolerance else "outside"
    sign = "−" if error < 0 else "+"
    return (f"capacity {data.get('realized_capacity_per_s') or 0:,.0f} rec/s realized vs "
            f"{data.get('predicted_capacity_per_s') or 0:,.0f} predicted: {sign}{abs(error) * 100:.1f} %, "
            f"{where} ±{tolerance * 100:g} %")


def _not_ready_words(issue: Mapping) -> str:
    """A stored not-ready issue (``{code, data}``, ``scaling.values.readiness.SampleIssue``) in words; its code
    when this version cannot read it."""
    try:
        return not_ready_text(str(issue.get("code")), issue.get("data") or {})
    except (KeyError, TypeError, ValueError):
        return str(issue.get("code"))


def _measured(data: Mapping) -> str:
    """`` (capacity … outside ±10 %)`` when the verdict's data holds a capacity error, else ``""``."""
    return f" ({_capacity_error(data)})" if data.get("error") is not None else ""


def _rollback_of(data: Mapping) -> str:
    cause = reason_text(data.get("cause"))
    return f"rollback of proposal {data.get('proposal')}" + (f": {cause}" if cause else "")


#: The standby driver of a proposal, as auto-approval's wait saw it, in words.
STANDBY_SEEN_TEXT = {
    StandbySeen.READY: "ready", StandbySeen.STARTING: "starting", StandbySeen.FAILED: "failed to start",
    StandbySeen.ABSENT: "not reported by the runner yet",
    StandbySeen.UNREACHABLE: "unknown: Redis does not answer",
}

#: Why auto-approval stopped waiting for the standby driver, in words (``{waited}``: seconds waited).
STANDBY_WAIT_END_TEXT = {
    StandbyWaitEnd.READY: "approved once the standby driver was ready (after {waited}): the rescale hands over at once",
    StandbyWaitEnd.FAILED: "the standby driver failed to start (after {waited}): approved, the rescale starts its own",
    StandbyWaitEnd.BOUND: ("waited {waited} for the standby driver ({seen}), the most auto_approve_standby_wait_s "
                           "allows: approved, the rescale waits for its standby"),
}


def _seen(data: Mapping) -> str:
    seen = str(data.get("standby"))
    return STANDBY_SEEN_TEXT.get(seen, seen)


def _standby_wait(data: Mapping) -> str:
    return (f"auto-approval waits for the standby driver prepared for this change ({_seen(data)}; "
            f"{_minutes(data.get('waited_s') or 0)} of at most {_minutes(data.get('bound_s') or 0)}), so that the "
            f"rescale hands over at once; a person may approve now")


def _standby_wait_over(data: Mapping) -> str:
    template = STANDBY_WAIT_END_TEXT.get(str(data.get("end")), "approved after waiting {waited} for the standby driver")
    return "auto mode: inside every guardrail; " + template.format(waited=_minutes(data.get("waited_s") or 0),
                                                                   seen=_seen(data))


_Template = Callable[[Mapping], str]

_GUARDRAILS: dict[str, _Template] = {
    GuardrailCode.DIRECTIONS: lambda d: (
        f"guardrail guard_directions: this is a scale-{d.get('direction')}, and only "
        f"{'scale-ups' if d.get('allowed') == 'up' else 'scale-downs'} are auto-approved"),
    GuardrailCode.MAX_EXECUTORS: lambda d: (
        f"guardrail guard_max_executors: {d.get('executors')} executors (cores) exceed the quota of {d.get('max')}"),
    GuardrailCode.MAX_CHANGE_FACTOR: lambda d: (
        f"guardrail guard_max_change_factor: {d.get('knob')} {d.get('old')} → {d.get('new')} changes by a factor "
        f"{d.get('factor', 0):.2g}, more than {d.get('max', 0):g}"),
    GuardrailCode.EXCLUDED_PERIODS: lambda d: (
        f"guardrail guard_excluded_periods: inside the closed change window {d.get('period')!r}"),
}

_HOLDS: dict[str, _Template] = {
    HoldCode.SCALE_UP_BLOCK: lambda d: (
        f"ineffective-scale-up block: {_knobs(d)} scaled up without effect (proposal #{d.get('proposal')}); "
        f"a person clears the block on the job page"),
    HoldCode.AUTO_APPROVE_SUSPENDED: lambda d: (
        f"auto-approval is suspended for this job ({d.get('reason')}); a person must approve, or re-enable "
        f"auto-approval"),
    HoldCode.EXECUTION_IN_FLIGHT: lambda d: str(d.get("error", "another execution of the job is in flight")),
    HoldCode.STANDBY_WAIT: _standby_wait,
}

def _in_flight(data: Mapping) -> str:
    ids = data.get("in_flight") or ()
    return ", ".join(f"#{pk}" for pk in ids) or "none"


def _ahead(data: Mapping) -> str:
    ids = data.get("ahead") or ()
    return f", and {len(ids)} approved before it waiting (proposal {_in_flight({'in_flight': ids})})" if ids else ""


def _at(value: object) -> str:
    return str(value or "")[:19].replace("T", " ") + " UTC" if value else "unknown"


_THROTTLES: dict[str, _Template] = {
    ThrottleCode.CLUSTER_BUSY: lambda d: (
        f"waiting for a slot on cluster {d.get('cluster')}: {len(d.get('in_flight') or ())} execution(s) in flight "
        f"(proposal {_in_flight(d)}){_ahead(d)}, at most {d.get('limit')} (SCALER_CLUSTER_MAX_IN_FLIGHT); it starts "
        f"when its turn comes and {d.get('cooldown_s', 0):g} s have passed since the last one finished "
        f"(SCALER_CLUSTER_COOLDOWN_S)"),
    ThrottleCode.CLUSTER_COOLDOWN: lambda d: (
        f"waiting for cluster {d.get('cluster')}'s cooldown: its last execution finished at "
        f"{_at(d.get('last_finished_at'))}, the next starts {d.get('cooldown_s', 0):g} s later "
        f"(SCALER_CLUSTER_COOLDOWN_S), at {_at(d.get('free_at'))}"),
}

_VERDICTS: dict[str, _Template] = {
    VerdictReason.NO_BATCHES: lambda d: "no micro-batch completed since the change",
    VerdictReason.FEW_BATCHES: lambda d: (
        f"{_capacity_error(d)}, on only {d.get('batches')} micro-batches (at least {d.get('min_batches')} "
        f"to call it ineffective)"),
    VerdictReason.ARRIVAL_SHIFT: lambda d: (
        f"arrival rate moved {d.get('arrival_before', 0):.0f} → {d.get('arrival_after', 0):.0f} rec/s: the "
        f"prediction does not apply" + _measured(d)),
    VerdictReason.NOT_READY: lambda d: (
        f"{d.get('samples')} sample(s) of the window not ready ("
        + "; ".join(_not_ready_words(issue) for issue in d.get("issues") or ())
        + "): incomplete metrics judge nothing" + _measured(d)),
    VerdictReason.LOAD_CHANGE: lambda d: (
        f"the load changed {d.get('after_s', 0):.0f} s after the change, before its backlog was back: the "
        f"prediction does not apply" + _measured(d)),
    VerdictReason.CAPACITY_SHORT: lambda d: _capacity_error(d) + (
        f"; true processing rate below the prediction: {_short_stages(d)}" if d.get("short") else ""),
    VerdictReason.CAPACITY_ABOVE: lambda d: f"{_capacity_error(d)}: the prediction does not describe the job",
    VerdictReason.RATE_SHORT: lambda d: (
        f"capacity {d.get('capacity_ratio', 0):.0%} of the prediction; true processing rate below the "
        f"prediction: {_short_stages(d)}"),
    VerdictReason.BACKLOG_GROWING: lambda d: (
        f"the backlog still grows by {d.get('slope', 0):.0f} rec/s after the change" + _measured(d)),
    VerdictReason.NO_RATES: lambda d: "no capacity to compare: the plan or the window has no rates",
    VerdictReason.WITHIN_TOLERANCE: lambda d: (
        f"{_capacity_error(d)}; backlog trend {d.get('slope', 0):+.0f} rec/s"
        if d.get("error") is not None else
        f"capacity {d.get('capacity_ratio', 0):.0%} of the prediction (tolerance {d.get('tolerance', 0):.0%}); "
        f"backlog trend {d.get('slope', 0):+.0f} rec/s"),
}

_WITHDRAWALS: dict[str, _Template] = {
    WithdrawReason.CONFIG_CHANGED: lambda d: (
        f"the running configuration changed underneath it: it was proposed for {d.get('proposed_for')}, the job "
        f"now runs {d.get('running')}"),
    WithdrawReason.KNOB_PINNED: lambda d: (
        f"it changes {_knobs(d)}, which the checkpoint pins (its state cannot be repartitioned offline): the "
        f"runner would refuse it"),
    WithdrawReason.INSIDE_BAND: lambda d: (
        f"{_count(d)} evaluations in a row found the {LOAD_NAME} inside the utilization band: no longer needed"),
    WithdrawReason.OPPOSITE: lambda d: f"{_count(d)} evaluations in a row pointed the other way ({d.get('direction')})",
    WithdrawReason.NOT_SUPPORTED: lambda d: (
        f"{_count(d)} evaluations in a row no longer supported it (inside the band or pointing the other way)"),
}

_RETRIES: dict[str, _Template] = {
    RetryCode.NO_RESTART: lambda d: "restart strategy none: no retry",
    RetryCode.RETRIES_SPENT: lambda d: f"{d.get('strategy')}: {d.get('attempts')} retries spent",
    RetryCode.RETRY: lambda d: (
        f"{d.get('strategy')}: retry {d.get('retry')} of {d.get('attempts')} in {d.get('delay_s', 0):g} s"),
    RetryCode.FAILURE_RATE_EXCEEDED: lambda d: (
        f"failure-rate: {d.get('failures')} failures within {d.get('interval_s', 0):g} s, more than "
        f"{d.get('max_failures')}"),
    RetryCode.FAILURE_RATE_RETRY: lambda d: (
        f"failure-rate: {d.get('failures')} of at most {d.get('max_failures')} failures within "
        f"{d.get('interval_s', 0):g} s; retry in {d.get('delay_s', 0):g} s"),
    RetryCode.REFUSED: lambda d: (
        f"not retried: the runner refused it ({d.get('failure')}) and would refuse the same command again"),
}

_AUDIT: dict[str, _Template] = {
    AuditReason.COMMENT: lambda d: str(d.get("text", "")),
    LEGACY_TEXT: lambda d: str(d.get("text", "")),
    AuditReason.REGISTRATION_EDITED: lambda d: "registration edited",
    AuditReason.POLICY_EDITED: lambda d: "policy edited",
    AuditReason.REREGISTERED: lambda d: "the job was re-registered",
    AuditReason.PLAN_REASONS: lambda d: "; ".join(map(_plan_reason_words, d.get("reasons") or ())),
    AuditReason.RECOMMENDATION_CHANGED: lambda d: (
        f"revision {d.get('revision')}: the recommendation changed by more than {d.get('min_change', 0):.0%} "
        f"(evaluation {d.get('evaluation')})"),
    AuditReason.SUPERSEDED_BY: lambda d: f"superseded by proposal {d.get('proposal')}",
    AuditReason.SUPERSEDED_BY_HELD: lambda d: "superseded by a held scale-down applied now",
    AuditReason.MEMORY_ADDED: lambda d: (
        "approved with the memory recommendation: "
        + "; ".join(_plan_reason_words(item.get("reason")) for item in d.get("added") or [d])),
    AuditReason.INSIDE_GUARDRAILS: lambda d: "auto mode: inside every guardrail",
    AuditReason.STANDBY_WAIT_OVER: _standby_wait_over,
    AuditReason.NO_DECISION_IN_TIME: lambda d: (
        f"no decision before {str(d.get('expires_at', ''))[:19].replace('T', ' ')} UTC (the policy's time to decide)"),
    AuditReason.RESUMED_BY_PERSON: lambda d: "re-enabled by a person",
    AuditReason.CLEARED_BY: lambda d: f"cleared by {d.get('actor')}",
    AuditReason.INEFFECTIVE_SCALE_UP: lambda d: (
        f"proposal {d.get('proposal')} was verified ineffective ({reason_text(d.get('verdict'))}): scale-ups of "
        f"{_knobs(d)} wait until a person clears the block"),
    AuditReason.INCONCLUSIVE_VERIFICATION: lambda d: (
        f"proposal #{d.get('proposal')} could not be verified ({reason_text(d.get('verdict'))}): auto-approval "
        f"waits until a person has looked and turns it back on"),
    AuditReason.ROLLED_BACK_BY: lambda d: f"rolled back by {d.get('actor')}",
    AuditReason.ROLLBACK_OF: _rollback_of,
    AuditReason.EXECUTION_STARTED: lambda d: f"execution of {d.get('kind')} proposal",
    AuditReason.LATE_SUCCESS: lambda d: (
        f"attempt {d.get('attempt')} succeeded after it had timed out: not sending attempt {d.get('attempt', 0) + 1}"),
    AuditReason.ATTEMPT_SENT: lambda d: f"attempt {d.get('attempt')}: sent to the runner of {d.get('job')}",
    AuditReason.CONFIG_APPLIED: _applied,
    AuditReason.CONFIG_APPLIED_REPLAYED: lambda d: (
        f"{_applied(d)} (its answer was "
        f"lost; the runner answered attempt {d.get('answered_by')} with it and did not apply it again)"),
    AuditReason.ATTEMPT_SUCCEEDED: lambda d: f"attempt {d.get('attempt')} succeeded",
    AuditReason.RESTORED_BY: lambda d: f"configuration restored by proposal {d.get('proposal')}",
    AuditReason.ATTEMPT_FAILED: lambda d: f"{d.get('error') or 'failed'}; {reason_text(d.get('retry'))}",
    AuditReason.ATTEMPT_UNANSWERED: lambda d: (
        f"attempt {d.get('attempt')}: no answer, outcome unknown (the next attempt carries the same idempotency "
        f"key: a runner that applied it answers with that apply); {reason_text(d.get('retry'))}"),
    AuditReason.ATTEMPTS_FAILED: lambda d: f"{d.get('attempts')} attempt(s) failed, last: {d.get('error')}",
    AuditReason.EXECUTION_FAILED: lambda d: (
        f"execution failed after {d.get('attempts')} attempt(s): {d.get('error')}"),
    AuditReason.ROLLBACK_FAILED: lambda d: f"rollback proposal {d.get('proposal')} failed: {d.get('error')}",
    AuditReason.LEASE_NO_ANSWER: lambda d: (
        f"lease expired during attempt {d.get('attempt')} without an answer from the runner within "
        f"{d.get('lease_s', 0):.0f} s: its outcome is unknown"),
    AuditReason.LEASE_ANSWERED: lambda d: (
        f"lease expired during attempt {d.get('attempt')}; the runner had answered {d.get('status')}: recording it"),
    AuditReason.RUNNER_ANSWERED: lambda d: f"the runner answered attempt {d.get('attempt')}: {d.get('status')}",
    AuditReason.LEASE_REQUEUED: lambda d: (
        f"lease expired before attempt {d.get('attempt', 0) + 1} started: enqueued it again"),
    AuditReason.APPROVAL_REQUEUED: lambda d: (
        "approved but not started within the lease: enqueued its execution again"),
}


_SPARK_ANSWERS: dict[str, _Template] = {  # a job's health reason (sparkclient.collector.answers)
    AnswerRefusal.TOO_LARGE: lambda d: (
        f"the Spark UI's answer to /{d.get('endpoint')} was refused past its limit of "
        f"{(d.get('limit_bytes') or 0) / 2**20:,.0f} MiB, and no more of it was read: nothing was collected. A "
        "driver that keeps fewer jobs and stages (spark.ui.retainedJobs, spark.ui.retainedStages) answers less"),
    AnswerRefusal.TOO_SLOW: lambda d: (
        f"the Spark UI did not finish its answer to /{d.get('endpoint')} within the {d.get('bound')}'s deadline of "
        f"{d.get('deadline_s', 0):g} s (an overloaded or sick driver, or a trickle): nothing was collected"),
}


def _killed(d: Mapping) -> str:
    """What killed the driver: ``ValueError: boom (exit code 1)``."""
    code = d.get("exit_code") or 0
    exit_text = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
    if d.get("exception"):
        return f"{d['exception']}: {d.get('message') or '(no message)'} ({exit_text})"
    oom = ", e.g. the kernel OOM killer" if code == -9 else ""
    return f"no exception in its crash record or log ({exit_text}{oom})"


def _restart(d: Mapping) -> str:
    at = d.get("restart_at")
    if not at:
        return ""
    return f"; the runner starts it again at {timezone.localtime(datetime.fromtimestamp(at, UTC)):%H:%M:%S}"


def _remedy(d: Mapping) -> str:
    """What to do about a crash loop: a larger heap for a driver out of memory, else fix the pipeline."""
    if "OutOfMemoryError" in str(d.get("exception") or "") or d.get("exit_code") == -9:
        return ("give the driver more memory (the job's memory knob; a pending heap rescale is applied by the next "
                "driver)")
    return "fix the pipeline or what it reads"


_RUNNER: dict[str, _Template] = {  # a job's health reason (webapp.jobs.runnerdown)
    RunnerDown.CRASHED: lambda d: (
        f"the driver crashed: {_killed(d)}{_restart(d)}; see {d.get('log_path') or 'the driver log'}"),
    RunnerDown.CRASH_LOOPING: lambda d: (
        f"crash looping: {d.get('crashes')} driver crashes within {_minutes(d.get('window_s') or 0)}, "
        f"the last {_killed(d)}. Read the trace in {d.get('log_path') or 'the driver log'} and "
        f"{_remedy(d)}; the runner keeps restarting it with a growing back-off{_restart(d)}"),
}


def _merge(*families: dict[str, _Template]) -> dict[str, _Template]:
    merged: dict[str, _Template] = {}
    for family in families:
        clash = set(merged) & set(family)
        if clash:
            raise ValueError(f"reason codes used by two families: {sorted(clash)}")
        merged.update({str(code): template for code, template in family.items()})
    return merged


#: Every coded reason's template, by code (the codes are unique across the families).
TEMPLATES: dict[str, _Template] = _merge(_GUARDRAILS, _HOLDS, _THROTTLES, _VERDICTS, _WITHDRAWALS, _RETRIES, _AUDIT,
                                        _SPARK_ANSWERS, _RUNNER)


def reason_text(reason: Reason | Mapping | str | None) -> str:
    """The sentence for a reason, typed or as stored (``{"code": str, "data": dict}``, read with
    :meth:`Reason.from_json`); ``""`` for none. A plain string (a free text stored inside another JSON
    value before reasons had codes) is itself."""
    parsed = reason if isinstance(reason, Reason) else Reason.from_json(reason)
    if parsed is None:
        return ""
    template = TEMPLATES.get(str(parsed.code))
    return template(parsed.data) if template else str(parsed.code)


def health_text(health_reason: object, last_error: str) -> str:
    """``Job.health_reason`` in words when it is a refused Spark answer's or a crashed runner's, else
    ``Job.last_error``."""
    reason = Reason.from_json(health_reason) if isinstance(health_reason, Mapping) else None
    coded = reason is not None and (str(reason.code) in _SPARK_ANSWERS or str(reason.code) in _RUNNER)
    return reason_text(reason) if coded else last_error


def health_note(health_reason: object) -> str:
    """A crashed runner's reason in a few words (the overview's row): ``crash looping: ValueError: boom``;
    ``""`` for any other reason."""
    reason = Reason.from_json(health_reason) if isinstance(health_reason, Mapping) else None
    if reason is None or str(reason.code) not in _RUNNER:
        return ""
    what = "crash looping" if reason.code == RunnerDown.CRASH_LOOPING else "driver crashed"
    d = reason.data
    killed = f"{d['exception']}: {str(d.get('message') or '')[:120]}" if d.get("exception") else "no exception named"
    return f"{what}: {killed}"


def withdrawal_text(withdrawal: Mapping) -> str:
    """The sentence for ``Proposal.withdrawal`` (``{"reason": WithdrawReason, ...data}``)."""
    reason = withdrawal.get("reason")
    template = _WITHDRAWALS.get(str(reason))
    return template(withdrawal) if template else f"withdrawn ({reason})"


def evaluation_hold_text(hold: str, detail: Mapping) -> str:
    """The sentence for ``Evaluation.hold`` (:class:`EvaluationHold`) with its ``hold_detail``."""
    if hold == EvaluationHold.AWAITING_VERIFICATION:
        return (f"no scale-up while proposal #{detail.get('proposal')} is being verified (due in "
                f"{_minutes(detail.get('due_in_s', 0))}): right after a restart the backlog of the downtime and "
                f"the warm-up batches of a fresh JVM are expected")
    if hold == EvaluationHold.RESTART_CATCH_UP:
        return (f"no scale-up: proposal #{detail.get('proposal')} realized the predicted capacity "
                f"({detail.get('capacity_per_s', 0):,.0f} rec/s for {detail.get('arrival_per_s', 0):,.0f} rec/s "
                f"arriving), and the backlog of its restart drains as predicted (catch-up ends in "
                f"{_minutes(detail.get('catch_up_left_s', 0))})")
    if hold == EvaluationHold.SCALE_UP_BLOCKED:
        return (f"scale-ups of {_knobs(detail)} are blocked: proposal #{detail.get('proposal')} was verified "
                f"ineffective; a person clears the block on the job page")
    if hold == EvaluationHold.SAMPLES_NOT_READY:
        codes = ", ".join(str(c) for c in detail.get("codes", ())) or "?"
        return f"no scale-down: metrics of the window are not ready ({codes})"
    return hold
