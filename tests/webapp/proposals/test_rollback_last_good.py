"""An automatic rollback restores the newest configuration that ran successfully
(``webapp.proposals.rollback.last_good_config``), through ``webapp.loop.execute``."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from sparkclient.contract.messages import FailureCode, RescalePath, RescaleResult, ResultStatus
from tests.webapp.factories import CONFIG, make_job
from webapp.jobs.models import Job
from webapp.loop.execute import execution_record_result
from webapp.proposals.codes import Actor
from webapp.proposals.lifecycle import Status, transition
from webapp.proposals.models import Execution, Proposal

pytestmark = pytest.mark.django_db

A = dict(CONFIG)
B = {**A, "cores": 2, "enrich_partitions": 2}
C = {**A, "cores": 3, "enrich_partitions": 4}
D = {**A, "cores": 4, "enrich_partitions": 8}


def _answer(proposal: Proposal, at, *, succeeded: bool) -> None:
    """Execute ``proposal`` (executing, attempt 1 sent) and record the runner's answer at ``at``: its
    config applied, or refused for good (a code that is not retried)."""
    execution = Execution.objects.create(proposal=proposal, attempts=1, attempt_state="sent")
    exec_id = execution.exec_id(1)
    result = (RescaleResult(id=exec_id, status=ResultStatus.SUCCEEDED, path=RescalePath.IN_PROCESS, downtime_s=1.0,
                            knobs=proposal.proposed_config) if succeeded
              else RescaleResult.failed(exec_id, FailureCode.STATE_NOT_REPARTITIONABLE, "refused"))
    execution_record_result(execution_id=execution.pk, attempt=1, result=result, now=at)


def _scale(job: Job, current: dict, proposed: dict, created_at) -> Proposal:
    proposal = Proposal.objects.create(job=job, kind=Proposal.Kind.SCALE, status=Status.EXECUTING,
                                       current_config=current, proposed_config=proposed)
    Proposal.objects.filter(pk=proposal.pk).update(created_at=created_at)
    return Proposal.objects.get(pk=proposal.pk)


def test_an_automatic_rollback_after_two_successes_restores_the_newest_good_config(no_enqueue):
    job = make_job(name="three-steps")
    start = timezone.now() - timedelta(hours=1)
    for step, (current, proposed) in enumerate([(A, B), (B, C)]):
        _answer(_scale(job, current, proposed, start + timedelta(minutes=10 * step)),
                start + timedelta(minutes=10 * step + 1), succeeded=True)
    assert Job.objects.get(pk=job.pk).config == C
    failing = _scale(job, C, D, start + timedelta(minutes=20))
    _answer(failing, start + timedelta(minutes=21), succeeded=False)

    failing.refresh_from_db()
    assert failing.status == Status.ROLLING_BACK
    rollback = Proposal.objects.get(rollback_of=failing)
    assert (rollback.kind, rollback.status) == (Proposal.Kind.ROLLBACK, Status.APPROVED)
    assert rollback.proposed_config == C  # the newest good one; not B (the older success) nor A (the start)

    transition(proposal=rollback, target=Status.EXECUTING, actor=Actor.SYSTEM)
    _answer(rollback, start + timedelta(minutes=22), succeeded=True)
    assert Job.objects.get(pk=job.pk).config == C
    assert Proposal.objects.get(pk=rollback.pk).status == Status.SUCCEEDED
    assert Proposal.objects.get(pk=failing.pk).status == Status.ROLLED_BACK
