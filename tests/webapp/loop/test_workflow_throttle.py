"""The per-cluster execution limit, with real Celery worker processes (no eager mode) sharing a file SQLite
database with the test, a real Redis, and fake runners on the control channel instead of Spark:
with a limit of 1 execution per cluster, two jobs on one cluster approved at the same moment
execute one after the other, and the waiting one says why (``ThrottleCode``)."""

from __future__ import annotations

import os
import threading

import pytest

from sparkclient.demo.processes import ProcessGroup
from tests.waiting import wait_for
from tests.webapp.factories import make_pending, make_user
from tests.webapp.fakerunner import FakeRunner
from webapp.proposals.codes import AuditAction, ThrottleCode
from webapp.proposals.models import AuditEvent, Execution, Proposal
from webapp.proposals.services import proposal_approve

pytestmark = [pytest.mark.workflow, pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]

CLUSTER = "spark://shared-master:7077"
RUNNER_DELAY_S = 2.0
COOLDOWN_S = 1.0


@pytest.fixture
def processes(workflow_redis, redis_server, celery_broker, tmp_path):
    """Workers and beat share the test's SQLite file and Redis; one execution per cluster."""
    from django.db import connection

    env = {**os.environ, "REDIS_URL": redis_server.url, "CELERY_BROKER_URL": redis_server.url,
           "CELERY_RESULT_BACKEND": redis_server.url,
           "DATABASE_URL": f"sqlite:///{connection.settings_dict['NAME']}", "PYTHONUNBUFFERED": "1",
           "SCALER_COLLECT_INTERVAL_S": "3600", "SCALER_RECONCILE_INTERVAL_S": "0.2", "SCALER_STABILIZATION_S": "0",
           "SCALER_EXECUTION_TIMEOUT_S": "30", "SCALER_CLUSTER_MAX_IN_FLIGHT": "1",
           "SCALER_CLUSTER_COOLDOWN_S": str(COOLDOWN_S)}
    group = ProcessGroup(log_dir=tmp_path / "logs", env=env)
    yield group
    group.stop()


def test_two_jobs_approved_at_once_on_one_cluster_execute_one_after_the_other(processes, redis_server, tmp_path):
    proposals = [make_pending("job-a", cluster=CLUSTER), make_pending("job-b", cluster=CLUSTER)]
    runners = {p.pk: FakeRunner(redis_server.url, p.job.name, delay_s=RUNNER_DELAY_S) for p in proposals}
    users = [make_user(username=f"op-{p.pk}") for p in proposals]
    for runner in runners.values():
        runner.start()
    try:
        # Two workers of two threads each, one of them with the beat: four threads may take a slot.
        for name, beat in (("w1", True), ("w2", False)):
            args = ["python", "-m", "celery", "-A", "webapp", "worker", "-P", "threads", "-c", "2",
                    "--loglevel", "INFO", "-n", f"{name}@%h"]
            processes.start(name, args + (["-B", "-s", str(tmp_path / "beat-schedule")] if beat else []))
        wait_for(lambda: all(" ready." in child.log_path.read_text() for child in processes.children),
                 timeout_s=90, what="both workers ready", group=processes)
        barrier = threading.Barrier(len(proposals))

        def approve(i: int) -> None:
            barrier.wait()
            proposal_approve(proposal=proposals[i], actor=users[i])

        threads = [threading.Thread(target=approve, args=(i,)) for i in range(len(proposals))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

        # While one executes, the other waits and says why.
        waiting = wait_for(lambda: Proposal.objects.filter(pk__in=[p.pk for p in proposals])
                           .exclude(waiting={}).first(), timeout_s=60, what="a proposal waiting for the cluster",
                           group=processes, interval_s=0.1)
        assert waiting.status == "approved" and waiting.waiting["code"] == ThrottleCode.CLUSTER_BUSY
        first = next(p for p in proposals if p.pk != waiting.pk)
        assert waiting.waiting["data"]["cluster"] == CLUSTER and waiting.waiting["data"]["in_flight"] == [first.pk]
        assert "waiting for a slot on cluster" in waiting.waiting_text

        wait_for(lambda: Proposal.objects.filter(pk__in=[p.pk for p in proposals], status="succeeded").count() == 2,
                 timeout_s=120, what="both executions to succeed", group=processes)
    finally:
        for runner in runners.values():
            runner.stop()

    # One after the other: the second runner got its command after the first one answered, and
    # after the cooldown; the recorded executions do not overlap.
    a, b = runners[first.pk], runners[waiting.pk]
    assert len(a.commands) == 1 and len(b.commands) == 1
    assert b.received_at[0] >= a.answered_at[0] + COOLDOWN_S
    ran_first, ran_second = (Execution.objects.get(proposal_id=pk) for pk in (first.pk, waiting.pk))
    assert ran_first.finished_at <= ran_second.started_at
    print(f"\nfirst answered -> second received: {b.received_at[0] - a.answered_at[0]:.2f} s "
          f"(cooldown {COOLDOWN_S} s)")
    # The audit trail keeps why it waited; it no longer waits.
    held = list(AuditEvent.objects.filter(proposal_id=waiting.pk, action=AuditAction.EXECUTION_THROTTLED)
                .order_by("at", "id").values_list("reason__code", flat=True))
    assert held and held[0] == ThrottleCode.CLUSTER_BUSY and set(held) <= set(ThrottleCode)
    assert Proposal.objects.get(pk=waiting.pk).waiting == {}
    assert not AuditEvent.objects.filter(proposal_id=first.pk, action=AuditAction.EXECUTION_THROTTLED).exists()
