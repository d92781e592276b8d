"""Auto mode's approval of a change that needs a new driver waits for the standby prepared for it
(``webapp.loop.standby.standby_gate``, re-checked by the reconcile beat through
``webapp.loop.propose.auto_approve_waiting``): until it is ready or failed, for at most
``auto_approve_standby_wait_s``, whatever the runner or Redis says. Time is injected, never read."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest
import redis
from django.utils import timezone

from sparkclient.contract import keys
from sparkclient.contract.standby import StandbyAction, read_standby_request
from tests.webapp.factories import make_pending, make_user
from webapp.jobs.models import Job, JobPolicy
from webapp.loop import standby
from webapp.loop.propose import auto_approve_waiting
from webapp.loop.reconcile import workflow_reconcile
from webapp.proposals.codes import AuditAction, AuditReason, HoldCode, Reason, StandbySeen, StandbyWaitEnd
from webapp.proposals.lifecycle import Status
from webapp.proposals.models import AuditEvent, Proposal
from webapp.proposals.reason_text import reason_text
from webapp.proposals.services import proposal_approve

pytestmark = pytest.mark.django_db

LOCAL = "local@127.0.0.1"
BOUND_S = 120.0


def _auto_local(django_capture_on_commit_callbacks, **policy) -> Proposal:
    """A job in local mode and auto mode whose first evaluation proposed more cores (a new driver)."""
    proposal = make_pending(cluster=LOCAL, commits=django_capture_on_commit_callbacks,
                            **{"mode": JobPolicy.Mode.AUTO, "guard_max_change_factor": 100.0,
                               "auto_approve_standby_wait_s": BOUND_S, **policy})
    assert proposal.proposed_config["cores"] != proposal.current_config["cores"]
    return proposal


def _report(client, proposal: Proposal, state: str, **fields) -> None:
    """The runner's handover hash: a standby prepared for ``proposal`` with its knobs, in ``state``."""
    client.hset(keys.handover(proposal.job.name), mapping={
        "id": f"prepared-{proposal.pk}", "state": state, "proposal": str(proposal.pk), "prepared": "1",
        "knobs": json.dumps(proposal.proposed_config, sort_keys=True), **fields})


class _DownRedis:
    def __getattr__(self, name):
        def refuse(*args, **kwargs):
            raise redis.ConnectionError("Connection refused")
        return refuse


def _approval(proposal: Proposal) -> AuditEvent:
    return AuditEvent.objects.get(proposal=proposal, action=AuditAction.APPROVED)


def test_a_proposal_needing_a_new_driver_waits_for_its_standby_then_the_beat_approves_it(
        workflow_redis, enqueued, django_capture_on_commit_callbacks):
    proposal = _auto_local(django_capture_on_commit_callbacks)
    hold = Reason.from_json(proposal.hold_reason)
    assert proposal.status == Status.PENDING and hold.code == HoldCode.STANDBY_WAIT
    assert hold.data["standby"] == StandbySeen.ABSENT and hold.data["bound_s"] == BOUND_S
    assert not AuditEvent.objects.filter(proposal=proposal, action=AuditAction.AUTO_APPROVE_HELD).exists()
    assert read_standby_request(workflow_redis, proposal.job.name).action is StandbyAction.PREPARE
    assert enqueued == []

    since = datetime.fromisoformat(hold.data["since"])
    _report(workflow_redis, proposal, "starting")
    assert workflow_reconcile(now=since + timedelta(seconds=20))["auto_approved"] == 0
    proposal.refresh_from_db()
    assert proposal.hold_reason["data"]["standby"] == StandbySeen.STARTING
    assert proposal.hold_reason["data"]["since"] == hold.data["since"]  # the wait keeps its start

    _report(workflow_redis, proposal, "ready", ready_at="1040.0", spawned_at="1000.0")
    with django_capture_on_commit_callbacks(execute=True):
        assert workflow_reconcile(now=since + timedelta(seconds=41))["auto_approved"] == 1
    proposal.refresh_from_db()
    assert proposal.status == Status.APPROVED and proposal.hold_reason == {} and enqueued == [(proposal.pk,)]
    approval = _approval(proposal)
    assert approval.actor_name.startswith("policy:") and approval.actor_user is None
    assert approval.reason["code"] == AuditReason.STANDBY_WAIT_OVER
    assert approval.reason["data"]["end"] == StandbyWaitEnd.READY and approval.reason["data"]["waited_s"] == 41.0
    assert proposal.decided_at == since + timedelta(seconds=41)
    assert read_standby_request(workflow_redis, proposal.job.name).action is StandbyAction.PREPARE  # kept


# (standby as the runner reports it, seconds waited) → (status, hold or approval code, its data)
CASES = [
    ("ready", 30, Status.APPROVED, StandbyWaitEnd.READY),
    ("ready", 120, Status.APPROVED, StandbyWaitEnd.READY),
    ("starting", 30, Status.PENDING, StandbySeen.STARTING),
    ("starting", 120, Status.APPROVED, StandbyWaitEnd.BOUND),
    ("failed", 30, Status.APPROVED, StandbyWaitEnd.FAILED),
    ("failed", 120, Status.APPROVED, StandbyWaitEnd.FAILED),
    ("absent", 30, Status.PENDING, StandbySeen.ABSENT),
    ("absent", 120, Status.APPROVED, StandbyWaitEnd.BOUND),
    ("redis-down", 30, Status.PENDING, StandbySeen.UNREACHABLE),
    ("redis-down", 120, Status.APPROVED, StandbyWaitEnd.BOUND),
]


@pytest.mark.parametrize(("seen", "waited_s", "status", "code"), CASES,
                         ids=[f"{c[0]}-{'past' if c[1] >= BOUND_S else 'within'}" for c in CASES])
def test_the_wait_ends_when_ready_or_failed_or_past_its_bound(seen, waited_s, status, code, workflow_redis, enqueued,
                                                              monkeypatch, django_capture_on_commit_callbacks):
    proposal = _auto_local(django_capture_on_commit_callbacks)
    since = datetime.fromisoformat(proposal.hold_reason["data"]["since"])
    if seen == "redis-down":
        monkeypatch.setattr(standby, "get_redis", _DownRedis)
    elif seen != "absent":
        _report(workflow_redis, proposal, seen)
    with django_capture_on_commit_callbacks(execute=True):
        approved = auto_approve_waiting(now=since + timedelta(seconds=waited_s))
    assert approved == (status == Status.APPROVED)
    proposal.refresh_from_db()
    assert proposal.status == status
    if status == Status.PENDING:
        assert proposal.hold_reason["code"] == HoldCode.STANDBY_WAIT
        assert proposal.hold_reason["data"] == {"since": since.isoformat(), "waited_s": float(waited_s),
                                                "bound_s": BOUND_S, "standby": code}
        assert enqueued == []
    else:
        reason = _approval(proposal).reason
        assert reason["code"] == AuditReason.STANDBY_WAIT_OVER and reason["data"]["end"] == code
        assert reason["data"]["since"] == since.isoformat() and reason["data"]["waited_s"] == float(waited_s)
        assert proposal.hold_reason == {} and enqueued == [(proposal.pk,)]


def test_a_standby_prepared_for_other_knobs_is_not_waited_for_as_ready(workflow_redis, enqueued,
                                                                       django_capture_on_commit_callbacks):
    proposal = _auto_local(django_capture_on_commit_callbacks)
    _report(workflow_redis, proposal, "ready")
    workflow_redis.hset(keys.handover(proposal.job.name), "knobs",
                        json.dumps({**proposal.proposed_config, "cores": 7}))  # an earlier revision's
    assert standby.standby_seen(proposal) is StandbySeen.ABSENT


def test_a_person_approves_while_it_waits_and_the_beat_leaves_it(workflow_redis, enqueued,
                                                                 django_capture_on_commit_callbacks):
    proposal = _auto_local(django_capture_on_commit_callbacks)
    proposal_approve(proposal=proposal, actor=make_user())
    assert auto_approve_waiting(now=timezone.now() + timedelta(seconds=300)) == 0
    approval = _approval(proposal)
    assert approval.actor_user is not None and approval.reason.get("code") != AuditReason.STANDBY_WAIT_OVER


def test_no_wait_when_the_bound_is_zero_or_no_new_driver_is_needed(workflow_redis, enqueued,
                                                                   django_capture_on_commit_callbacks):
    proposal = _auto_local(django_capture_on_commit_callbacks, auto_approve_standby_wait_s=0)
    assert proposal.status == Status.APPROVED
    assert _approval(proposal).reason["code"] == AuditReason.INSIDE_GUARDRAILS
    Job.objects.filter(pk=proposal.job_id).update(cluster="spark://10.0.0.1:7077")  # executors change in place
    proposal.job.refresh_from_db()
    assert standby.standby_gate(proposal=proposal, bound_s=BOUND_S, now=timezone.now()) == (None, None)


def test_a_job_taken_out_of_auto_mode_drops_the_wait(workflow_redis, enqueued, django_capture_on_commit_callbacks):
    proposal = _auto_local(django_capture_on_commit_callbacks)
    JobPolicy.objects.filter(job=proposal.job).update(mode=JobPolicy.Mode.MANUAL)
    assert auto_approve_waiting(now=timezone.now() + timedelta(seconds=300)) == 0
    proposal.refresh_from_db()
    assert proposal.status == Status.PENDING and proposal.hold_reason == {}


@pytest.mark.parametrize("end", list(StandbyWaitEnd))
def test_the_wait_and_its_end_are_worded_from_their_codes(end):
    data = {"since": "2026-11-26T20:00:00+00:00", "waited_s": 41.0, "bound_s": 120.0, "standby": "starting"}
    assert reason_text(Reason(HoldCode.STANDBY_WAIT, data)) == (
        "auto-approval waits for the standby driver prepared for this change (starting; 41 s of at most 2 min), "
        "so that the rescale hands over at once; a person may approve now")
    words = reason_text(Reason(AuditReason.STANDBY_WAIT_OVER, {**data, "end": end.value}))
    assert words.startswith("auto mode: inside every guardrail; ") and "41 s" in words
    assert ("auto_approve_standby_wait_s" in words) == (end is StandbyWaitEnd.BOUND)


def test_the_proposal_page_says_auto_mode_waits_not_a_person(client, workflow_redis, enqueued,
                                                             django_capture_on_commit_callbacks):
    proposal = _auto_local(django_capture_on_commit_callbacks)
    client.force_login(make_user())
    page = client.get(f"/proposals/{proposal.pk}/").content.decode()
    assert f'id="hold" data-code="{HoldCode.STANDBY_WAIT}"' in page
    assert "Auto-approval waits for the standby driver" in page and "Waiting for a person" not in page
    job_page = client.get(f"/jobs/{proposal.job_id}/").content.decode()
    assert "Auto-approval waits for the standby driver" in job_page and "Waiting for a person" not in job_page


def test_a_proposal_held_while_auto_approval_was_suspended_is_taken_up_once_a_person_resumes_it(
        workflow_redis, enqueued, django_capture_on_commit_callbacks):
    """Held under a suspension, the proposal stays held while it lasts (one audit, not one per beat);
    once a person resumes auto-approval the next beat takes it up again: here into the standby wait."""
    proposal = _auto_local(django_capture_on_commit_callbacks)
    JobPolicy.objects.filter(job=proposal.job).update(auto_approve_suspended=True,
                                                      auto_approve_suspended_reason="rollback of proposal 1")
    Proposal.objects.filter(pk=proposal.pk).update(hold_reason=Reason(
        HoldCode.AUTO_APPROVE_SUSPENDED, {"reason": "rollback of proposal 1"}).as_json())
    held_audits = AuditEvent.objects.filter(proposal=proposal, action=AuditAction.AUTO_APPROVE_HELD).count()
    assert auto_approve_waiting(now=timezone.now()) == 0
    proposal.refresh_from_db()
    assert proposal.hold_reason["code"] == HoldCode.AUTO_APPROVE_SUSPENDED
    assert AuditEvent.objects.filter(proposal=proposal, action=AuditAction.AUTO_APPROVE_HELD).count() == held_audits

    JobPolicy.objects.filter(job=proposal.job).update(auto_approve_suspended=False, auto_approve_suspended_reason="")
    _report(workflow_redis, proposal, "ready")
    assert auto_approve_waiting(now=timezone.now()) == 1
    proposal.refresh_from_db()
    assert proposal.status == Status.APPROVED
    assert _approval(proposal).reason["code"] == AuditReason.STANDBY_WAIT_OVER
