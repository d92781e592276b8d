"""The four states an operator audits afterwards, built on the loop harness (``tests/webapp/loop/harness.py``):
the real services (evaluation, proposal, approval, execution, rollback, verification) on a simulated
job whose run ends now, so the pages read it as a live job.

Each builder returns the job and the proposal the pages are about. The load steps from 100 to 600
events/s after five minutes; the proposal that follows is decided as the state says.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.webapp.factories import make_user
from tests.webapp.loop import harness as loop_harness
from webapp.jobs.models import Job, MetricSnapshot
from webapp.loop.verify import proposal_verify
from webapp.proposals.models import Proposal
from webapp.proposals.rollback import proposal_rollback
from webapp.proposals.services import proposal_approve

STEP_AT_S = 300.0
#: Long enough for a proposal, its approval, its execution and its verification (30 s of
#: stabilization, then the policy's verification windows) at the 600 events/s step.
RUN_S = STEP_AT_S + 20 * 60.0
#: Auto mode as ``tests/webapp/loop/test_loop_acceptance.py`` runs it.
AUTO_POLICY = {"mode": "auto", "guard_directions": "both", "guard_max_change_factor": 4.0, "utilization_max": 0.9}
#: Zero-batch windows appended after the run of the inconclusive state (a stalled query).
STALL_WINDOWS = 6


def _run_step_trace(name: str, *, policy: dict | None = None, actions=(),
                    tail_s: float = 0.0) -> loop_harness.LoopHarness:
    """Run the harness over the step trace so that its last beat is ``tail_s`` before now; the clock,
    the dispatch and the control channel are the harness's only while it runs."""
    patch = pytest.MonkeyPatch()
    try:
        patch.setattr(loop_harness, "EPOCH", timezone.now() - timedelta(seconds=RUN_S + tail_s))
        harness = loop_harness.make_harness(patch, trace=loop_harness.steps((STEP_AT_S, 100), (RUN_S, 600)),
                                            policy=policy, name=name, downtime_s=15.0)
        harness.actions.extend(actions)
        harness.run()
    finally:
        patch.undo()
    Job.objects.filter(pk=harness.job.pk).update(health=Job.Health.RUNNING)
    return harness


def _approve_first_pending(operator):
    """An action: the operator approves the first pending proposal after two beats of reading it."""
    seen: list[int] = []

    def act(h: loop_harness.LoopHarness) -> None:
        pending = h.job.proposals.filter(status=Proposal.Status.PENDING).first()
        if pending is None:
            return
        seen.append(pending.pk)
        if seen.count(pending.pk) >= 2:
            proposal_approve(proposal=pending, actor=operator, revision=pending.revision)
            h.actions.remove(act)
    return act


def _roll_back_once_verified(operator):
    """An action: the operator rolls back the first executed scale-up once it is verified."""
    def act(h: loop_harness.LoopHarness) -> None:
        done = h.job.proposals.filter(status=Proposal.Status.SUCCEEDED, kind=Proposal.Kind.SCALE).exclude(
            verification="").first()
        if done is not None:
            proposal_rollback(proposal=done, actor=operator, reason="the bill doubled")
            h.actions.remove(act)
    return act


def _executed(h: loop_harness.LoopHarness) -> Proposal:
    (proposal,) = [p for p in h.proposals() if p.kind == Proposal.Kind.SCALE and hasattr(p, "execution")
                   and p.execution.status == "succeeded"][:1]
    return proposal


def approved() -> tuple[Job, Proposal]:
    """A person approved the scale-up; it executed and was verified."""
    h = _run_step_trace("approved", actions=[_approve_first_pending(make_user("operator"))])
    proposal = _executed(h)
    assert proposal.verification == Proposal.Verification.VERIFIED, proposal.verification_detail
    return h.job, proposal


def rolled_back() -> tuple[Job, Proposal]:
    """A person approved the scale-up, it executed and was verified, then a person rolled it back;
    the rollback executed. The proposal is the rollback."""
    operator = make_user("operator")
    h = _run_step_trace("rolled-back", actions=[_approve_first_pending(operator), _roll_back_once_verified(operator)])
    rollback = h.job.proposals.get(kind=Proposal.Kind.ROLLBACK)
    assert rollback.status == Proposal.Status.SUCCEEDED and rollback.rollback_of.status == "rolled_back", \
        (rollback.status, rollback.rollback_of.status)
    return h.job, rollback


def auto_approved() -> tuple[Job, Proposal]:
    """Auto mode approved the scale-up; it executed and was verified."""
    make_user("operator")
    h = _run_step_trace("auto-approved", policy=AUTO_POLICY)
    proposal = _executed(h)
    assert proposal.decided_by is None and proposal.verification, (proposal.decided_by, proposal.verification)
    return h.job, proposal


def inconclusive() -> tuple[Job, Proposal]:
    """A person approved the scale-up and it executed; then the query completed no batch for a minute
    and a half (Spark answers, the windows count no batch), so its verification is inconclusive: no
    batch to compare. The job's newest window has no batch either."""
    window_s = 15.0
    h = _run_step_trace("inconclusive", policy={"verification_windows": 60},  # not verified while the harness runs
             actions=[_approve_first_pending(make_user("operator"))], tail_s=STALL_WINDOWS * window_s)
    proposal = _executed(h)
    assert proposal.verification == Proposal.Verification.NONE
    now = timezone.now()
    last = MetricSnapshot.objects.filter(job=h.job).order_by("collected_at").last()
    for i in range(STALL_WINDOWS):
        collected_at = now - timedelta(seconds=window_s * (STALL_WINDOWS - 1 - i))
        MetricSnapshot.objects.create(job=h.job, collected_at=collected_at, run_id=last.run_id, config=last.config,
                                      window_s=window_s, batches=0, backlog=last.backlog, executors=last.executors,
                                      cores=last.cores, trigger_interval_s=last.trigger_interval_s)
    verified = proposal_verify(proposal=proposal, now=now)
    assert verified.verification == Proposal.Verification.INCONCLUSIVE, verified.verification_detail
    assert verified.verification_detail["batches"] == 0
    return h.job, verified


STATES = {"approved": approved, "rolled-back": rolled_back, "auto-approved": auto_approved,
          "inconclusive": inconclusive}
