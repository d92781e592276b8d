"""The one place the coded reasons become words (``webapp.proposals.reason_text``): every code of
every family has a template, and each template reads its data (one rendering per template; the
rest of the tests assert codes)."""

import pytest

from scaling.forecast.prediction import VerdictReason
from tests.webapp.factories import reason_json
from webapp.jobs.models import EvaluationHold
from webapp.jobs.runnerdown import RunnerDown
from webapp.proposals.codes import LEGACY_TEXT, AuditReason, GuardrailCode, HoldCode, Reason, RetryCode, ThrottleCode
from webapp.proposals.reason_text import TEMPLATES, evaluation_hold_text, health_note, reason_text, withdrawal_text
from webapp.proposals.reasons import WithdrawReason


@pytest.mark.parametrize("code", [*AuditReason, *GuardrailCode, *HoldCode, *VerdictReason, *WithdrawReason,
                                  *RetryCode, *ThrottleCode, *RunnerDown],
                         ids=str)
def test_every_code_has_a_template_that_reads_missing_data(code):
    assert str(code) in TEMPLATES
    assert isinstance(reason_text(Reason(code).as_json()), str)


@pytest.mark.parametrize(("reason", "text"), [
    (reason_json(GuardrailCode.DIRECTIONS, direction="down", allowed="up"),
     "guardrail guard_directions: this is a scale-down, and only scale-ups are auto-approved"),
    (reason_json(GuardrailCode.MAX_EXECUTORS, executors=9, max=8),
     "guardrail guard_max_executors: 9 executors (cores) exceed the quota of 8"),
    (reason_json(GuardrailCode.MAX_CHANGE_FACTOR, knob="a_partitions", old=2, new=5, factor=2.5, max=2),
     "guardrail guard_max_change_factor: a_partitions 2 → 5 changes by a factor 2.5, more than 2"),
    (reason_json(GuardrailCode.EXCLUDED_PERIODS, period="00:00-00:10"),
     "guardrail guard_excluded_periods: inside the closed change window '00:00-00:10'"),
    (reason_json(HoldCode.SCALE_UP_BLOCK, knobs=["cores"], proposal=4),
     "ineffective-scale-up block: cores scaled up without effect (proposal #4); a person clears the block on "
     "the job page"),
    (reason_json(HoldCode.AUTO_APPROVE_SUSPENDED, reason="rollback of proposal 3"),
     "auto-approval is suspended for this job (rollback of proposal 3); a person must approve, or re-enable "
     "auto-approval"),
    (reason_json(HoldCode.EXECUTION_IN_FLIGHT, error="proposal 5 of the same job is executing"),
     "proposal 5 of the same job is executing"),
    (reason_json(VerdictReason.NO_BATCHES), "no micro-batch completed since the change"),
    (reason_json(VerdictReason.ARRIVAL_SHIFT, arrival_before=1000.0, arrival_after=2500.0),
     "arrival rate moved 1000 → 2500 rec/s: the prediction does not apply"),
    (reason_json(VerdictReason.RATE_SHORT, capacity_ratio=0.5,
        short=[{"vertex_id": "v1", "realized_tpr": 100.0, "predicted_tpr": 200.0}]),
     "capacity 50% of the prediction; true processing rate below the prediction: v1 100 vs 200"),
    (reason_json(VerdictReason.BACKLOG_GROWING, slope=42.0), "the backlog still grows by 42 rec/s after the change"),
    (reason_json(VerdictReason.LOAD_CHANGE, after_s=42.0),
     "the load changed 42 s after the change, before its backlog was back: the prediction does not apply"),
    (reason_json(VerdictReason.LOAD_CHANGE, after_s=42.0, error=0.5, tolerance=0.1, realized_capacity_per_s=1500.0,
        predicted_capacity_per_s=1000.0),
     "the load changed 42 s after the change, before its backlog was back: the prediction does not apply "
     "(capacity 1,500 rec/s realized vs 1,000 predicted: +50.0 %, outside ±10 %)"),
    (reason_json(VerdictReason.NOT_READY, samples=2, issues=[
        {"code": "sql-plan-unusable", "data": {"sources": 2, "source_stages": 1}},
        {"code": "from-a-later-version", "data": {}}]),
     "2 sample(s) of the window not ready (the SQL plan is unusable: 2 sources in the progress, 1 source stage(s) "
     "found; from-a-later-version): incomplete metrics judge nothing"),
    (reason_json(VerdictReason.NO_RATES), "no capacity to compare: the plan or the window has no rates"),
    (reason_json(VerdictReason.CAPACITY_SHORT, error=-0.167, tolerance=0.1, realized_capacity_per_s=681.0,
        predicted_capacity_per_s=817.0, short=[]),
     "capacity 681 rec/s realized vs 817 predicted: −16.7 %, outside ±10 %"),
    (reason_json(VerdictReason.CAPACITY_SHORT, error=-0.5, tolerance=0.1, realized_capacity_per_s=500.0,
        predicted_capacity_per_s=1000.0, short=[{"vertex_id": "v1", "realized_tpr": 100.0, "predicted_tpr": 200.0}]),
     "capacity 500 rec/s realized vs 1,000 predicted: −50.0 %, outside ±10 %; true processing rate below the "
     "prediction: v1 100 vs 200"),
    (reason_json(VerdictReason.CAPACITY_ABOVE, error=0.3, tolerance=0.1, realized_capacity_per_s=1300.0,
        predicted_capacity_per_s=1000.0),
     "capacity 1,300 rec/s realized vs 1,000 predicted: +30.0 %, outside ±10 %: the prediction does not describe "
     "the job"),
    (reason_json(VerdictReason.FEW_BATCHES, error=-0.2, tolerance=0.1, realized_capacity_per_s=800.0,
        predicted_capacity_per_s=1000.0, batches=2, min_batches=3),
     "capacity 800 rec/s realized vs 1,000 predicted: −20.0 %, outside ±10 %, on only 2 micro-batches (at least 3 "
     "to call it ineffective)"),
    (reason_json(VerdictReason.WITHIN_TOLERANCE, error=-0.05, tolerance=0.125, realized_capacity_per_s=950.0,
        predicted_capacity_per_s=1000.0, slope=-3.0),
     "capacity 950 rec/s realized vs 1,000 predicted: −5.0 %, within ±12.5 %; backlog trend -3 rec/s"),
    (reason_json(AuditReason.INCONCLUSIVE_VERIFICATION, proposal=3, verdict=reason_json(VerdictReason.NO_BATCHES)),
     "proposal #3 could not be verified (no micro-batch completed since the change): auto-approval waits until a "
     "person has looked and turns it back on"),
    (reason_json(VerdictReason.WITHIN_TOLERANCE, capacity_ratio=0.97, tolerance=0.2, slope=-3.0),
     "capacity 97% of the prediction (tolerance 20%); backlog trend -3 rec/s"),
    (reason_json(RetryCode.NO_RESTART), "restart strategy none: no retry"),
    (reason_json(RetryCode.RETRIES_SPENT, strategy="fixed-delay", attempts=2), "fixed-delay: 2 retries spent"),
    (reason_json(RetryCode.RETRY, strategy="exponential-delay", retry=2, attempts=3, delay_s=1.0),
     "exponential-delay: retry 2 of 3 in 1 s"),
    (reason_json(RetryCode.FAILURE_RATE_EXCEEDED, failures=4, interval_s=300.0, max_failures=3),
     "failure-rate: 4 failures within 300 s, more than 3"),
    (reason_json(RetryCode.FAILURE_RATE_RETRY, failures=2, interval_s=300.0, max_failures=3, delay_s=10.0),
     "failure-rate: 2 of at most 3 failures within 300 s; retry in 10 s"),
    (reason_json(RetryCode.REFUSED, failure="out-of-bounds"),
     "not retried: the runner refused it (out-of-bounds) and would refuse the same command again"),
    (reason_json(AuditReason.ATTEMPT_FAILED, error="runner down", retry=reason_json(RetryCode.NO_RESTART)),
     "runner down; restart strategy none: no retry"),
    (reason_json(AuditReason.ROLLBACK_OF, proposal=3,
                 cause=reason_json(AuditReason.EXECUTION_FAILED, attempts=2, error="boom")),
     "rollback of proposal 3: execution failed after 2 attempt(s): boom"),
    (reason_json(AuditReason.ROLLBACK_OF, proposal=3, cause=None), "rollback of proposal 3"),
    (reason_json(AuditReason.INEFFECTIVE_SCALE_UP, proposal=3, knobs=["cores"],
                 verdict=reason_json(VerdictReason.NO_RATES)),
     "proposal 3 was verified ineffective (no capacity to compare: the plan or the window has no rates): "
     "scale-ups of cores wait until a person clears the block"),
    (reason_json(AuditReason.NO_DECISION_IN_TIME, expires_at="2026-11-26T10:00:00+00:00"),
     "no decision before 2026-11-26 10:00:00 UTC (the policy's time to decide)"),
    (reason_json(RunnerDown.CRASH_LOOPING, exit_code=1, exception="ValueError", message="boom", crashes=3,
                 window_s=300.0, log_path="var/jobs/orders/driver.log"),
     "crash looping: 3 driver crashes within 5 min, the last ValueError: boom (exit code 1). Read the trace in "
     "var/jobs/orders/driver.log and fix the pipeline or what it reads; the runner keeps restarting it with a "
     "growing back-off"),
    (reason_json(RunnerDown.CRASHED, exit_code=-9, log_path="var/jobs/orders/driver.log"),
     "the driver crashed: no exception in its crash record or log (killed by signal 9, e.g. the kernel OOM "
     "killer); see var/jobs/orders/driver.log"),
    (reason_json("legacy-text", text="written before reasons had codes"), "written before reasons had codes"),
    (reason_json("some-future-code"), "some-future-code"),
    ({}, ""),
], ids=lambda v: v.get("code", "none") if isinstance(v, dict) else "")
def test_a_reason_renders_from_its_code_and_data(reason, text):
    assert reason_text(reason) == text


def test_withdrawals_and_evaluation_holds_render_from_their_codes():
    assert withdrawal_text({"reason": WithdrawReason.INSIDE_BAND, "evaluations": [1, 2, 3]}) == (
        "3 evaluations in a row found the needed utilization inside the utilization band: no longer needed")
    assert evaluation_hold_text(EvaluationHold.SCALE_UP_BLOCKED, {"knobs": ["cores"], "proposal": 2}) == (
        "scale-ups of cores are blocked: proposal #2 was verified ineffective; a person clears the block on the "
        "job page")


@pytest.mark.parametrize(("stored", "expected"), [
    (None, None), ({}, None), ("", None), ({"data": {"x": 1}}, None), (7, None),
    ({"code": "comment", "data": {"text": "why"}}, Reason("comment", {"text": "why"})),
    ({"code": "comment", "data": ["not", "an", "object"]}, Reason("comment", {})),
    ({"code": "comment"}, Reason("comment", {})),
    ("free text", Reason(LEGACY_TEXT, {"text": "free text"})),
])
def test_a_stored_reason_reads_back_typed_or_as_none(stored, expected):
    assert Reason.from_json(stored) == expected


def test_a_typed_and_a_stored_reason_render_alike():
    reason = Reason("comment", {"text": "load fell"})
    assert reason_text(reason) == reason_text(reason.as_json()) == "load fell"


def test_the_overview_s_note_names_a_crash_loop_and_nothing_else():
    assert health_note(reason_json(RunnerDown.CRASH_LOOPING, exception="ValueError", message="boom")) == (
        "crash looping: ValueError: boom")
    assert health_note(reason_json(RunnerDown.CRASHED)) == "driver crashed: no exception named"
    assert health_note(reason_json(GuardrailCode.DIRECTIONS)) == health_note({}) == ""
