"""The expected time to effect of a warm handover follows the standby driver prepared for the proposal
(``webapp.dashboard.numbers.expected_time_to_effect``): onto a ready one, the median of this job's
handovers onto a ready one (else the bench's 3.68 s); onto one still starting, what is left of its start
measured on the job's host plus the handover onto a ready one; otherwise the median of those that started
their standby at the approval; with none of these, "not measured", never the bench's pause."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from html import unescape

import pytest
from django.utils import timezone

from scaling.forecast.rescale_cost import BENCH_READY_HANDOVER_S, EffectSource, StandbyReadiness
from sparkclient.contract import keys
from sparkclient.contract.messages import RescalePath, RescaleResult, ResultStatus, StandbyUse
from sparkclient.contract.standby import HandoverState, StandbyStatus
from sparkclient.runner.handover import HandoverStep, keep_ready_s, mark, open_prepared
from tests.webapp.dashboard_factories import make_succeeded
from tests.webapp.factories import make_job, make_pending, make_snapshots, make_user
from webapp.api.serializers import ExecutionSerializer
from webapp.dashboard.numbers import expected_time_to_effect, time_to_effect_text
from webapp.jobs.models import Job
from webapp.loop.evaluate import evaluation_run
from webapp.loop.execute import execution_record_result
from webapp.proposals.codes import StandbySeen
from webapp.proposals.models import Execution, Proposal, result_json
from webapp.proposals.services import proposal_approve

pytestmark = pytest.mark.django_db

#: This job's handovers, by the standby the runner reported: seconds from the approval to the first batch.
READY_S, STARTED_S = (18.0, 4.0, 6.0), (50.0, 60.0, 40.0)
#: Never counted: a handover claimed while its standby was still starting, and one from an older runner.
OTHER = ((StandbyUse.STARTING, 25.0), (None, 30.0))


def _handover(proposal: Proposal, standby: StandbyUse | None, took_s: float) -> None:
    done = make_succeeded(proposal.job, path="driver-handover")
    result = RescaleResult(id=f"proposal-{done.pk}-attempt-1", status=ResultStatus.SUCCEEDED,
                           path=RescalePath.DRIVER_HANDOVER, knobs=done.proposed_config, standby=standby)
    Execution.objects.filter(proposal=done).update(time_to_effect_s=took_s, result=result_json(result),
                                                   finished_at=done.decided_at + timedelta(minutes=1))


def _pending_with(history: str) -> Proposal:
    """A pending cores change (a warm handover) of a job whose earlier handovers are ``history``:
    ``none``, ``ready`` (onto a ready standby), ``started`` (standby started at the approval) or ``both``."""
    proposal = make_pending()
    for standby, took_s in OTHER:
        _handover(proposal, standby, took_s)
    for kind, times in ((StandbyUse.READY, READY_S), (StandbyUse.STARTED, STARTED_S)):
        if history in (kind.value, "both"):
            for took_s in times:
                _handover(proposal, kind, took_s)
    Job.objects.filter(pk=proposal.job_id).update(config=proposal.current_config)
    return Proposal.objects.select_related("job").get(pk=proposal.pk)


READY_MEDIAN = (EffectSource.MEASURED, 6.0, 3)
COLD_MEDIAN = (EffectSource.MEASURED, 50.0, 3)
BENCH_READY = (EffectSource.BENCH_READY, BENCH_READY_HANDOVER_S, 0)
NOT_MEASURED = (EffectSource.NOT_MEASURED, None, 0)


@pytest.mark.parametrize("seen, readiness, expected", [
    # the standby as seen: ready, starting, none (absent or failed), unknown (Redis unreadable)
    (StandbySeen.READY, StandbyReadiness.READY,
     {"both": READY_MEDIAN, "ready": READY_MEDIAN, "started": BENCH_READY, "none": BENCH_READY}),
    *[(seen, readiness, {"both": COLD_MEDIAN, "ready": NOT_MEASURED, "started": COLD_MEDIAN, "none": NOT_MEASURED})
      for seen, readiness in ((StandbySeen.STARTING, StandbyReadiness.STARTING),
                              (StandbySeen.ABSENT, StandbyReadiness.ABSENT),
                              (StandbySeen.FAILED, StandbyReadiness.FAILED),
                              (StandbySeen.UNREACHABLE, StandbyReadiness.UNKNOWN))]])
@pytest.mark.parametrize("history", ["both", "ready", "started", "none"])
def test_the_expectation_takes_the_handovers_onto_a_standby_like_this_one(seen, readiness, expected, history):
    effect = expected_time_to_effect(_pending_with(history), seen=seen, ready_s=())  # no start measured
    assert (effect.path, effect.standby) == ("driver-handover", readiness)
    assert (effect.source, effect.seconds, effect.samples) == expected[history]


def test_a_path_without_a_new_driver_ignores_the_standby():
    proposal = _pending_with("both")
    proposal.proposed_config = {**proposal.current_config, "parts": proposal.current_config.get("parts", 2) + 1}
    effect = expected_time_to_effect(proposal, seen=StandbySeen.READY)
    assert (effect.path, effect.standby, effect.source) == ("in-process", None, EffectSource.BENCH)


# --- the sentences the page renders --------------------------------------------------------------------

SPAN = "from the approval to the first batch on the new configuration (warm handover to a new driver; "


@pytest.mark.parametrize("seen, history, sentence", [
    (StandbySeen.READY, "both", "about 6 s " + SPAN + "the standby driver prepared for this proposal is ready, so the "
     "approval hands over at once; median of this job's 3 handovers onto a ready standby driver)"),
    (StandbySeen.READY, "started", "about 3.7 s " + SPAN + "the standby driver prepared for this proposal is ready, "
     "so the approval hands over at once; no handover onto a ready standby driver measured for this job yet: the "
     "time to effect the README's bench-rescale measured for a handover onto a prepared standby driver on a quiet "
     "2-core machine)"),
    (StandbySeen.STARTING, "both", "up to about 50 s " + SPAN + "the standby driver prepared for this proposal is "
     "still starting, so the approval waits for the rest of its start; median of this job's 3 handovers that "
     "started their standby driver at the approval)"),
    (StandbySeen.ABSENT, "both", "about 50 s " + SPAN + "no standby driver is prepared for this proposal, so the "
     "approval starts one; median of this job's 3 handovers that started their standby driver at the approval)"),
    (StandbySeen.UNREACHABLE, "ready", "not measured (warm handover to a new driver; the standby driver's state "
     "could not be read, so it is taken to start at the approval; no standby driver's start has been measured on "
     "this job's host yet, and no handover that started its standby driver at the approval measured for this job "
     "yet; the README's bench-rescale measured a start of 38 s on a quiet 2-core machine, and a loaded host takes "
     "longer)"),
])
def test_the_sentence_states_the_figure_the_standby_and_the_source(seen, history, sentence):
    assert time_to_effect_text(expected_time_to_effect(_pending_with(history), seen=seen, ready_s=())) == sentence


def test_the_page_reads_the_standby_from_the_runners_report(client, workflow_redis, enqueued):
    """One read of the handover hash the page reads already; a standby prepared for other knobs is none."""
    proposal = _pending_with("both")
    client.force_login(make_user("op"))

    def shown() -> tuple[str, str, str]:
        html = unescape(client.get(f"/proposals/{proposal.pk}/").content.decode())
        tag = re.search(r'<p id="time-to-effect" data-source="([^"]*)" data-standby="([^"]*)">([^<]*)</p>', html)
        return tag.group(1), tag.group(2), tag.group(3)

    def standby(state: str, knobs: dict) -> None:
        workflow_redis.hset(keys.handover(proposal.job.name), mapping={
            "id": "prepared-x", "state": state, "proposal": str(proposal.pk), "prepared": "1",
            "knobs": json.dumps(knobs, sort_keys=True)})

    assert shown()[:2] == ("measured", "absent") and "about 50 s" in shown()[2]
    standby("ready", proposal.proposed_config)
    assert shown()[:2] == ("measured", "ready") and shown()[2].startswith("Expected time to effect: about 6 s ")
    standby("ready", {**proposal.proposed_config, "cores": 7})  # an earlier revision's: not claimed
    assert shown()[:2] == ("measured", "absent")


def test_the_runners_standby_is_stored_with_the_execution_and_counted(no_enqueue):
    """The runner's ``standby`` lands in ``Execution.result`` (and the API's execution), and the next
    proposal's expectation counts that handover onto a ready standby only while its standby is ready."""
    job = make_job(name="warm", metric_window_s=45)
    make_snapshots(job)
    evaluation_run(job=job)
    proposal = job.proposals.get()
    proposal_approve(proposal=proposal, actor=make_user(username="operator-warm"))
    approved = timezone.now() - timedelta(seconds=30)
    Proposal.objects.filter(pk=proposal.pk).update(status=Proposal.Status.EXECUTING, decided_at=approved)
    approved_at = approved.timestamp()
    execution = Execution.objects.create(proposal=proposal, attempts=1, attempt_state="sent")
    execution_record_result(execution_id=execution.pk, attempt=1, result=RescaleResult(
        id=execution.exec_id(1), status=ResultStatus.SUCCEEDED, path=RescalePath.DRIVER_HANDOVER,
        knobs=proposal.proposed_config, first_batch_at=approved_at + 4.0, standby=StandbyUse.READY))
    execution.refresh_from_db()
    assert execution.result["standby"] == "ready" and execution.rescale_result.standby is StandbyUse.READY
    assert ExecutionSerializer(execution).data["result"]["standby"] == "ready"
    later = Proposal.objects.create(job=job, status=Proposal.Status.PENDING, current_config=proposal.proposed_config,
                                    proposed_config={**proposal.proposed_config,
                                                     "cores": proposal.proposed_config["cores"] + 1})
    ready = expected_time_to_effect(later, seen=StandbySeen.READY)
    assert (ready.source, ready.seconds, ready.samples) == (EffectSource.MEASURED, pytest.approx(4.0, abs=0.01), 1)
    assert expected_time_to_effect(later, seen=StandbySeen.STARTING, ready_s=()).source == EffectSource.NOT_MEASURED


# --- a standby still warming up --------------------------------------------------------------------------

#: Starts of this job's standbys measured on its host, seconds from process start to ready (median 50 s).
STARTS_S = (40.0, 60.0, 50.0)


@pytest.mark.parametrize("history", ["both", "ready", "none"])
@pytest.mark.parametrize("running_s", [0.0, 10.0, 49.0, 80.0])
def test_a_standby_still_warming_up_adds_what_is_left_of_its_measured_start(history, running_s):
    proposal = _pending_with(history)
    now = 1_000_000.0
    status = StandbyStatus(state=HandoverState.STARTING, proposal=str(proposal.pk), spawned_at=now - running_s)
    effect = expected_time_to_effect(proposal, seen=StandbySeen.STARTING, status=status, ready_s=STARTS_S, now=now)
    left = max(0.0, 50.0 - running_s)
    onto_ready = 6.0 if history in ("both", "ready") else BENCH_READY_HANDOVER_S
    assert (effect.warm_up_s, effect.ready_s, effect.standby) == (left, 50.0, StandbyReadiness.STARTING)
    assert effect.seconds == pytest.approx(left + onto_ready) and effect.seconds >= left
    # the boundary: the same standby once ready adds nothing of its start
    ready = expected_time_to_effect(proposal, seen=StandbySeen.READY, status=status, ready_s=STARTS_S, now=now)
    assert (ready.warm_up_s, ready.seconds) == (None, onto_ready)


@pytest.mark.parametrize("history, expected", [
    ("ready", (50.0, EffectSource.MEASURED, 56.0)),  # its whole measured start, then the handover onto it
    ("both", (None, EffectSource.MEASURED, 50.0)),  # handovers that started their standby measured all of it
])
def test_no_standby_prepared_takes_its_whole_measured_start_unless_handovers_measured_it(history, expected):
    effect = expected_time_to_effect(_pending_with(history), seen=StandbySeen.ABSENT, ready_s=STARTS_S)
    assert (effect.warm_up_s, effect.source, effect.seconds) == expected


def test_the_warm_up_sentence_names_what_is_left_its_measured_start_and_the_handover():
    proposal = _pending_with("ready")
    status = StandbyStatus(state=HandoverState.STARTING, proposal=str(proposal.pk), spawned_at=100.0)
    text = time_to_effect_text(expected_time_to_effect(proposal, seen=StandbySeen.STARTING, status=status,
                                                       ready_s=STARTS_S, now=112.0))
    assert text == ("about 44 s " + SPAN + "the standby driver prepared for this proposal is still starting, so the "
                    "approval waits for the rest of its start: 38 s left of its start, measured at 50 s on this "
                    "job's host (median of its standbys' newest starts), then 6 s for the handover onto a ready "
                    "standby (median of this job's 3 handovers onto a ready standby driver))")
    late = time_to_effect_text(expected_time_to_effect(proposal, seen=StandbySeen.STARTING, status=status,
                                                       ready_s=STARTS_S, now=200.0))
    assert "it has already run longer than its start, measured at 50 s" in late and late.startswith("about 6 s ")


def test_the_page_counts_the_standbys_start_down_from_what_the_runner_measured(client, workflow_redis, enqueued):
    """The standby's own stamps and measured starts, as the runner writes them, reach the page; a later
    render expects less; once the standby says ready, the start is no longer added."""
    proposal = _pending_with("ready")
    job = proposal.job.name
    client.force_login(make_user("op"))
    for took_s in STARTS_S:  # earlier standbys of this job, measured as they said ready
        workflow_redis.hset(keys.handover(job), mapping={"spawned_at": "1000.0", "ready_at": repr(1000.0 + took_s)})
        assert keep_ready_s(workflow_redis, job) == took_s
    open_prepared(workflow_redis, job, "prepared-w", str(proposal.pk), proposal.proposed_config)

    def shown() -> tuple[str, float | None, str]:
        html = unescape(client.get(f"/proposals/{proposal.pk}/").content.decode())
        tag = re.search(r'<p id="time-to-effect" data-source="[^"]*" data-standby="([^"]*)"'
                        r'(?: data-warm-up-s="([^"]*)")?>([^<]*)</p>', html)
        return tag.group(1), float(tag.group(2)) if tag.group(2) else None, tag.group(3)

    first = shown()
    assert first[0] == "starting" and 45.0 <= first[1] <= 50.0, first
    assert "left of its start, measured at 50 s on this job's host" in first[2]
    spawned = float(workflow_redis.hget(keys.handover(job), "spawned_at"))
    workflow_redis.hset(keys.handover(job), "spawned_at", repr(spawned - 20.0))  # 20 s further into its start
    later = shown()
    assert later[0] == "starting" and later[1] <= first[1] - 19.0, (first, later)
    mark(workflow_redis, job, HandoverStep.READY, state=HandoverState.READY)
    assert shown()[:2] == ("ready", None)

