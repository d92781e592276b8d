"""The live loop's acceptance, on the loop harness (``tests/webapp/loop/harness.py``): the real services, driven
by ``scaling.sim`` on the demo-like topology in accelerated time, no Spark.

The stabilization interval is the web app's default (30 s), the metric window 45 s (three collects).
"""

from __future__ import annotations

import math
import re
from datetime import timedelta

import pytest
from rest_framework.authtoken.models import Token

from scaling.bench.run import oscillations
from scaling.sim.workloads import DAY_S, Trace, diurnal
from tests.webapp.factories import make_user
from tests.webapp.loop.harness import EPOCH, EXECUTORS_KNOB, LoopHarness, make_harness, steps
from webapp.jobs.models import Evaluation, EvaluationHold, MetricSnapshot
from webapp.jobs.selectors import policy_band
from webapp.proposals.holds import config_direction
from webapp.proposals.lifecycle import TransitionError
from webapp.proposals.models import AuditEvent, Execution, Proposal
from webapp.proposals.reasons import WithdrawReason
from webapp.proposals.services import proposal_approve

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("real_stabilization")]

STEP_AT_S = 600.0
TEN_MIN_S = 600.0


def approve_when_pending(operator, *, after_s: float = 0.0, evaluations: int = 2):
    """An action: a person approves the current revision of the pending proposal once it has been
    pending for ``evaluations`` beats (time to read it), from ``after_s`` on; once."""
    seen: dict[int, int] = {}

    def act(h: LoopHarness) -> None:
        if h.now_s < after_s:
            return
        pending = h.job.proposals.filter(status=Proposal.Status.PENDING).first()
        if pending is None:
            return
        seen[pending.pk] = seen.get(pending.pk, 0) + 1
        if seen[pending.pk] >= evaluations:
            proposal_approve(proposal=pending, actor=operator, revision=pending.revision)
            h.actions.remove(act)
    return act


#: Per scenario run in this session: the band and (proposal, cores from, to, predicted utilization) of
#: every executed plan. Test 7 reads it instead of running a scenario again.
EXECUTED_PLANS: dict[str, tuple[tuple[float, float], list[tuple]]] = {}


def record(name: str, h: LoopHarness) -> LoopHarness:
    EXECUTED_PLANS[name] = (policy_band(h.job.policy), [
        (p.pk, p.current_config[EXECUTORS_KNOB], p.proposed_config[EXECUTORS_KNOB], p.prediction.get("utilization"))
        for p in h.executed()])
    return h


def pending_per_tick(h: LoopHarness, since_s: float) -> list[int]:
    return [len(row["pending"]) for row in h.timeline if row["t_s"] >= since_s]


# --- scenarios (also run by test 7) ----------------------------------------------------------------

def step_up_held(monkeypatch) -> LoopHarness:
    """100 → 600 events/s at 10 min, held 10 min; manual mode, nobody approves."""
    return record("1-step-held", make_harness(monkeypatch, trace=steps((STEP_AT_S, 100),
                                                                       (STEP_AT_S + TEN_MIN_S, 600))).run())


def step_up_executed(monkeypatch) -> LoopHarness:
    """100 → 600 events/s; a person approves the proposal; then 10 more minutes at 600. Restarts are
    15 s, and a fresh JVM's tasks run 2 times slower for 40 s (longer than the stabilization)."""
    h = make_harness(monkeypatch, trace=steps((STEP_AT_S, 100), (STEP_AT_S + 3 * TEN_MIN_S, 600)),
                     warmup_s=40.0, warmup_factor=2.0)
    h.actions.append(approve_when_pending(make_user()))
    return record("2-step-executed", h.run())


def step_up_then_down(monkeypatch) -> LoopHarness:
    """2 cores at 600 events/s; 1200 from 10 min (a pending scale-up nobody approves); 100 from 15 min."""
    trace = steps((STEP_AT_S, 600), (STEP_AT_S + 300, 1200), (STEP_AT_S + 300 + TEN_MIN_S, 100))
    return record("3-step-up-then-down", make_harness(monkeypatch, trace=trace, start_cores=2).run())


def diurnal_trace(hours: float = 6.0, mean_per_s: float = 800.0) -> Trace:
    """The diurnal workload (``scaling.sim.workloads.diurnal``: lowest at midnight, 5 % noise) with its
    day compressed into ``hours``: one whole cycle, the rise, the peak and the fall, in 6 hours."""
    day = diurnal(mean_per_s=mean_per_s, amplitude=0.6, duration_s=DAY_S, step_s=5.0, noise=0.05, seed=13)
    every = round(DAY_S / (hours * 3600))
    return Trace("diurnal", day.step_s, day.rates_per_s[::every])


AUTO_POLICY = {"mode": "auto", "guard_directions": "both", "guard_max_change_factor": 4.0, "utilization_max": 0.9}


def diurnal_auto(monkeypatch) -> LoopHarness:
    """Auto mode, 6 simulated hours of the diurnal workload."""
    return record("4-diurnal-auto", make_harness(monkeypatch, trace=diurnal_trace(), start_cores=1, policy=AUTO_POLICY,
                                                 warmup_s=45.0, warmup_factor=3.0).run())


# --- 1. stable proposals ------------------------------------------------------------------------------

def test_1_a_step_gives_one_pending_proposal_revised_at_most_twice(monkeypatch):
    h = step_up_held(monkeypatch)
    proposals = h.proposals()
    assert len(proposals) == 1, [(p.pk, p.status, p.proposed_config) for p in proposals]
    (proposal,) = proposals
    first_s = next(row["t_s"] for row in h.timeline if row["pending"])
    assert STEP_AT_S < first_s <= STEP_AT_S + 120
    assert set(pending_per_tick(h, first_s)) == {1}  # exactly one pending at every beat while the load holds
    assert proposal.status == Proposal.Status.PENDING and proposal.revision <= 3
    assert not Proposal.objects.filter(status=Proposal.Status.SUPERSEDED).exists()
    assert [r["revision"] for r in proposal.revisions] == list(range(1, proposal.revision))
    assert AuditEvent.objects.filter(proposal=proposal, action="revised").count() == proposal.revision - 1


# --- 2. no spiral after the restart ---------------------------------------------------------------

def seconds(h: LoopHarness, at) -> float:
    return (at - EPOCH).total_seconds()


def test_2_after_the_execution_as_predicted_no_further_scale_up_for_ten_minutes(monkeypatch):
    h = step_up_executed(monkeypatch)
    (proposal,) = h.executed()
    assert proposal.verification == Proposal.Verification.VERIFIED, proposal.verification_detail
    finished_s = seconds(h, proposal.execution.finished_at)
    assert h.trace.duration_s - finished_s >= TEN_MIN_S
    ups = [p for p in h.proposals() if p.pk != proposal.pk
           and config_direction(job=h.job, current=p.current_config, proposed=p.proposed_config) == "up"]
    assert ups == []
    assert len(h.sim.result.rescales) == 1
    after = [row for row in h.timeline if finished_s < row["t_s"] <= finished_s + TEN_MIN_S]
    assert len(after) >= 39 and {row["cores"] for row in after} == {proposal.proposed_config[EXECUTORS_KNOB]}
    assert all(row["evaluation"] is None or row["evaluation"][1] != "up" or row["evaluation"][2] for row in after)


def test_2_a_warm_up_longer_than_the_stabilization_waits_for_the_verification(monkeypatch):
    """Tasks of the fresh JVM run 4 times slower for 75 s: the windows right after the stabilization
    say "scale up"; the loop holds them until the verification measured the realized capacity."""
    h = make_harness(monkeypatch, trace=steps((STEP_AT_S, 100), (STEP_AT_S + 2 * TEN_MIN_S, 600)),
                     warmup_s=75.0, warmup_factor=4.0)
    h.actions.append(approve_when_pending(make_user()))
    h.run()
    (proposal,) = h.executed()
    held = Evaluation.objects.filter(job=h.job, hold=EvaluationHold.AWAITING_VERIFICATION)
    assert held.exists(), [row["evaluation"] for row in h.timeline]
    assert all(e.direction == "up" and e.decision == "scale" for e in held)
    assert len(h.sim.result.rescales) == 1 and not Proposal.objects.filter(job=h.job).exclude(pk=proposal.pk).filter(
        created_at__gt=proposal.execution.finished_at, proposed_config__gt={}).exclude(status="withdrawn").exists()


# --- 3. withdrawal and the held scale-down ------------------------------------------------------

def test_3_a_step_back_withdraws_the_scale_up_and_the_job_page_shows_the_held_scale_down(monkeypatch, client):
    h = step_up_then_down(monkeypatch)
    (proposal,) = h.proposals()
    assert proposal.status == Proposal.Status.WITHDRAWN
    assert proposal.withdrawal["reason"] in (WithdrawReason.OPPOSITE, WithdrawReason.NOT_SUPPORTED)
    assert len(proposal.withdrawal["evaluations"]) == h.job.policy.withdraw_after_evaluations
    event = AuditEvent.objects.get(proposal=proposal, action="withdrawn")
    assert event.after["withdrawal"] == proposal.withdrawal
    assert event.reason["code"] == proposal.withdrawal["reason"]
    down_s = STEP_AT_S + 300
    withdrawn_s = seconds(h, event.at)
    assert down_s < withdrawn_s <= down_s + 120
    with pytest.raises(TransitionError):
        proposal_approve(proposal=proposal, actor=make_user(), revision=proposal.revision)
    operator = make_user("op2")
    client.force_login(operator)
    html = client.get(f"/jobs/{h.job.pk}/").content.decode()
    held = re.search(r'<p id="held"[^>]*>(.*?)</p>', html, re.S)
    assert held, html
    text = re.sub(r"\s+", " ", held.group(1)).strip()
    first_held = next(e for e in Evaluation.objects.filter(job=h.job).order_by("created_at") if e.held_scale_down)
    due = first_held.created_at + timedelta(seconds=h.job.policy.scale_down_interval_s)
    in_min = math.ceil((due - h.now).total_seconds() / 60)
    assert text == f"scale-down to 1 core held until {due:%H:%M} (in {in_min} min), scale-down interval 60 min"
    assert 'id="apply-scale-down"' in html
    response = client.post(f"/jobs/{h.job.pk}/scale-down/apply/")
    applied = h.job.proposals.get(status=Proposal.Status.PENDING)
    assert response.status_code == 302 and response["Location"] == f"/proposals/{applied.pk}/"
    assert applied.proposed_config[EXECUTORS_KNOB] == 1 and applied.prediction["cores_new"] == 1
    assert AuditEvent.objects.filter(proposal=applied, action="proposed", actor_name="op2",
                                     actor_user__username="op2").exists()


# --- 4. auto mode, a diurnal workload ------------------------------------------------------------------

@pytest.mark.slow  # six simulated hours through the real services: ~25 s on 2 cores (README quick loop leaves it out)
def test_4_auto_mode_six_hours_of_diurnal_load_never_above_capacity_nor_oscillating(monkeypatch):
    h = diurnal_auto(monkeypatch)
    result = h.sim.result
    down = [False] * len(result.t_s)
    for r in result.rescales:
        for i, t in enumerate(result.t_s):
            if r.at_s <= t <= r.at_s + r.downtime_s + h.settings.collect_interval_s:
                down[i] = True
    over = [(t, load, cap) for t, load, cap, d in zip(result.t_s, result.load_per_s, result.capacity_per_s, down)
            if not d and load > cap]
    assert over == [], f"{len(over)} beats above capacity, first {over[:3]}"
    assert result.rescales, "the diurnal ramp needs scale-ups"
    assert oscillations(result, 3 * h.job.policy.metric_window_s) == 0
    assert_no_scale_up_after_an_ineffective_verdict(h)


def assert_no_scale_up_after_an_ineffective_verdict(h: LoopHarness) -> None:
    for event in AuditEvent.objects.filter(job=h.job, action="scale_up_blocked"):
        cleared = AuditEvent.objects.filter(job=h.job, action="scale_up_block_cleared", at__gt=event.at).first()
        for p in h.executed():
            if p.execution.started_at > event.at and (cleared is None or p.execution.started_at < cleared.at):
                raised = [k for k in event.after["knobs"] if p.proposed_config.get(k, 0) > p.current_config.get(k, 0)]
                assert not raised, (p.pk, raised)


def test_4_an_ineffective_scale_up_blocks_auto_mode_until_a_person_clears_it(monkeypatch, client):
    """The demo's spiral: 8 configured cores on a 2-core host. The scale-up beyond 2 cores is verified
    ineffective; auto mode proposes and approves no further scale-up until a person clears the block."""
    h = spiral_blocked(monkeypatch)
    blocked = AuditEvent.objects.filter(job=h.job, action="scale_up_blocked")
    assert blocked.count() == 1, [(p.pk, p.status, p.verification, p.proposed_config) for p in h.proposals()]
    ineffective = Proposal.objects.get(pk=blocked.get().proposal_id)
    assert ineffective.verification == Proposal.Verification.INEFFECTIVE
    assert len(h.executed()) == 1  # nothing after it: 1 → 2 → 4 → 8 does not happen
    assert_no_scale_up_after_an_ineffective_verdict(h)
    holds = Evaluation.objects.filter(job=h.job, hold=EvaluationHold.SCALE_UP_BLOCKED)
    assert holds.exists() and all(set(e.hold_detail["knobs"]) <= set(blocked.get().after["knobs"]) for e in holds)
    operator = make_user("op2")
    client.force_login(operator)
    html = client.get(f"/jobs/{h.job.pk}/").content.decode()
    assert 'id="scale-up-block"' in html and 'id="clear-block"' in html
    assert client.post(f"/jobs/{h.job.pk}/scale-up-block/clear/", {"comment": "host grew"}).status_code == 302
    h.job.refresh_from_db()
    assert h.job.scale_up_block == {}
    event = AuditEvent.objects.get(job=h.job, action="scale_up_block_cleared")
    assert (event.actor_name, event.reason, event.before["proposal"]) == (
        "op2", {"code": "comment", "data": {"text": "host grew"}}, ineffective.pk)


# --- 5. approving an outdated revision ---------------------------------------------------------------

def test_5_approving_revision_1_after_revision_2_exists_gets_409_with_revision_2(monkeypatch, client):
    h = step_up_held(monkeypatch)
    (proposal,) = h.proposals()
    assert proposal.revision >= 2, "the step scenario revises its first proposal once the window is full"
    current = proposal.revision
    operator = make_user("op2")
    token = Token.objects.create(user=operator)
    response = client.post(f"/api/proposals/{proposal.pk}/approve/", {"revision": 1}, content_type="application/json",
                           HTTP_AUTHORIZATION=f"Token {token.key}")
    assert response.status_code == 409
    body = response.json()
    assert body["current_revision"] == current and body["proposal"]["revision"] == current
    assert f"revision 1 is outdated, the current revision is {current}" in body["detail"]
    client.force_login(operator)
    page = client.post(f"/proposals/{proposal.pk}/decide/", {"action": "approve", "revision": "1"})
    assert page.status_code == 409
    html = page.content.decode()
    assert f"the current revision is {current}" in html and f'data-revision="{current}"' in html
    assert f"Approve revision {current}" in html
    proposal.refresh_from_db()
    assert proposal.status == Proposal.Status.PENDING
    ok = client.post(f"/api/proposals/{proposal.pk}/approve/", {"revision": current}, content_type="application/json",
                     HTTP_AUTHORIZATION=f"Token {token.key}")
    assert ok.status_code == 200 and ok.json()["status"] == "approved"
    assert AuditEvent.objects.get(proposal=proposal, action="approved").after == {"status": "approved",
                                                                                  "revision": current}


# --- 6. predicted beside realized -------------------------------------------------------------------------

def cell(html: str, cell_id: str) -> str:
    match = re.search(rf'id="{cell_id}"[^>]*>(.*?)</td>', html, re.S)
    assert match, cell_id
    return re.sub(r"\s+", " ", match.group(1)).strip()


def test_6_the_proposal_page_shows_the_stored_prediction_beside_the_realized_values(monkeypatch, client):
    h = step_up_executed(monkeypatch)
    (proposal,) = h.executed()
    predicted, realized = proposal.prediction, proposal.verification_detail["realized"]
    client.force_login(make_user("op2"))
    html = client.get(f"/proposals/{proposal.pk}/").content.decode()
    assert cell(html, "capacity") == f"{predicted['capacity_per_s']:,.0f} rec/s"
    assert cell(html, "realized-capacity") == f"{realized['capacity_per_s']:,.0f} rec/s"
    assert re.search(rf"→ {predicted['utilization'] * 100:.0f} % on \d+ cores?, at the target rate",
                     cell(html, "utilization"))
    assert cell(html, "realized-utilization").startswith(f"{realized['utilization'] * 100:.0f} %")
    # Realized as predicted (the harness's capacity is the model's): at the arrival rate the realized
    # utilization is the predicted one, though the measured busy share still carries the catch-up.
    assert realized["utilization"] == pytest.approx(predicted["utilization"], abs=0.1)
    assert cell(html, "batch-ratio").endswith(f"→ {predicted['batch_ratio']:.2f} predicted")
    assert cell(html, "realized-batch-ratio") == f"{realized['batch_ratio']:.2f}"
    assert cell(html, "catch-up").startswith(
        f"{round(predicted['catch_up_s'])} s after the first batch on the new configuration, to drain "
        f"{predicted['restart_backlog']:,}")
    # One catch-up: the realized one is the execution's, as its line states it.
    execution = Execution.objects.get(proposal=proposal)
    stated = re.search(r'id="execution-catch-up">(.*?)</span>', html).group(1)
    if execution.catch_up_s is None:
        not_yet = "not yet: the backlog is still above its level before the rescale"
        assert cell(html, "realized-catch-up") == stated == not_yet
    else:
        since_start = f"{round(execution.catch_up_s)} s from the start of the rescale"
        assert cell(html, "realized-catch-up").endswith(f"({since_start})")
        assert stated.startswith(since_start)
    assert cell(html, "downtime").startswith(f"{round(predicted['downtime_s'])} s (configured")
    assert cell(html, "realized-downtime") == "15 s"
    assert 'data-verdict="verified"' in html
    # Frozen: newer metrics and measured restarts do not change what the approver was shown.
    before = {key: cell(html, key) for key in ("capacity", "utilization", "batch-ratio", "catch-up", "downtime")}
    latest = MetricSnapshot.objects.filter(job=h.job).order_by("-collected_at").first()
    MetricSnapshot.objects.filter(pk=latest.pk).update(backlog=10_000_000, arrival_rate_per_s=5_000.0)
    Execution.objects.filter(pk=proposal.execution.pk).update(downtime_s=99.0)
    again = client.get(f"/proposals/{proposal.pk}/").content.decode()
    assert {key: cell(again, key) for key in before} == before


# --- 7. the predicted utilization of every executed plan -----------------------------------------------

def spiral_blocked(monkeypatch) -> LoopHarness:
    """Auto mode, 100 → 1000 events/s on a 2-core host configured for more (the demo's spiral)."""
    return record("4-spiral-blocked", make_harness(monkeypatch, trace=steps((300, 100), (300 + 3 * TEN_MIN_S, 1000)),
                                                   start_cores=2, host_cores=2, policy=AUTO_POLICY).run())


SCENARIOS = {"1-step-held": step_up_held, "2-step-executed": step_up_executed, "3-step-up-then-down": step_up_then_down,
             "4-diurnal-auto": diurnal_auto, "4-spiral-blocked": spiral_blocked}
#: Scenarios of six simulated hours (~25 s each on 2 cores): ``slow``, out of the README's quick loop.
SLOW_SCENARIOS = {"4-diurnal-auto"}


def _scenario_marks(name: str) -> list:
    return [pytest.mark.slow] if name in SLOW_SCENARIOS else []


@pytest.mark.parametrize("scenario", [pytest.param(name, marks=_scenario_marks(name)) for name in SCENARIOS])
def test_7_every_executed_plan_predicts_a_utilization_inside_the_band(monkeypatch, scenario):
    if scenario not in EXECUTED_PLANS:  # run alone: run the scenario here
        SCENARIOS[scenario](monkeypatch)
    (low, high), executed = EXECUTED_PLANS[scenario]
    outside = [plan for plan in executed if not low <= (plan[3] or 0.0) <= high]
    assert outside == [], f"band [{low}, {high}]: (proposal, cores from, to, predicted utilization) {outside}"


# --- 8. a pipeline without an executors knob -------------------------------------------------------------

def test_8_a_job_without_an_executors_knob_is_never_planned_at_other_cores(monkeypatch, client):
    """The pipeline declares no executors knob and runs on 1 core; the load steps 100 -> 600 events/s.
    Every plan keeps 1 core (its predictions are for 1 core), the plans that cannot keep up say so
    (``cores-not-adjustable``), no proposal carries a cores value, and the job page shows the reason."""
    h = make_harness(monkeypatch, trace=steps((STEP_AT_S, 100), (STEP_AT_S + TEN_MIN_S, 600)), cores_knob=False)
    h.actions.append(approve_when_pending(make_user()))
    h.run()
    evaluations = list(Evaluation.objects.filter(job=h.job).order_by("created_at"))
    assert evaluations
    assert {(e.plan["executors_current"], e.plan["executors_proposed"]) for e in evaluations} == {(1, 1)}
    fixed = [e for e in evaluations if any(item["code"] == "cores-not-adjustable" for item in e.plan["limits"])]
    assert fixed, [e.reasons for e in evaluations[-3:]]
    limit = next(item for item in fixed[-1].plan["limits"] if item["code"] == "cores-not-adjustable")
    assert limit["data"]["cores"] == 1 and limit["data"]["cores_needed"] > 1
    assert all(EXECUTORS_KNOB not in p.proposed_config for p in h.proposals())
    assert all(p.prediction.get("cores_new", 1) == 1 for p in h.proposals())
    assert {row["cores"] for row in h.timeline} == {1} and {c.cores for c in h.sim.result.rescales} <= {1}
    client.force_login(make_user("op3"))
    html = client.get(f"/jobs/{h.job.pk}/").content.decode()
    assert "cores-not-adjustable" in html, html
