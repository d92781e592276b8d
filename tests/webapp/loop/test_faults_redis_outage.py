"""Faults: a real Celery worker (with its beat) and a real Redis that is stopped for 60 s
with a task in flight, then started again (empty: no persistence, the harshest case).

- the worker is alive throughout and afterwards (kombu's restore of unacknowledged messages used
  to crash it: ``AttributeError: 'NoneType' object has no attribute 'hostname'``);
- an approve during the outage answers 503 with a clear message and changes nothing (the
  dashboard: back to the proposal page with that message);
- no proposal is lost: the one in flight is taken over by the reconcile beat once Redis is back,
  and the one refused during the outage can be approved and executes;
- one rescale per approval: a runner whose result is lost with Redis is sent the next attempt with
  the same idempotency key and answers it with its first apply (a shorter outage).
"""

from __future__ import annotations

import os
import threading
import time

import pytest
from django.test import Client
from django.utils import timezone

from sparkclient.demo.processes import ProcessGroup
from sparkclient.demo.redisproc import free_port, start_redis
from tests.conftest import celery_use_broker
from tests.waiting import wait_for
from tests.webapp.factories import make_job, make_snapshots, make_user
from tests.webapp.fakerunner import FakeRunner
from webapp.celery import app as celery_app
from webapp.loop.evaluate import evaluation_run
from webapp.proposals.lifecycle import AttemptOutcome
from webapp.proposals.models import AuditEvent, Execution, Proposal
from webapp.proposals.services import proposal_approve

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(400), pytest.mark.workflow]

OUTAGE_S = 60.0


@pytest.fixture
def outage_redis(tmp_path, settings):
    """A Redis server of this test only (it is stopped and restarted on the same port)."""
    from webapp.jobs.redis import _client  # noqa: PLC0415 - the client cache of the settings under test

    port = free_port()
    server = {"now": start_redis(port=port, workdir=tmp_path / "redis")}
    settings.REDIS_URL = server["now"].url
    _client.cache_clear()
    previous = celery_app.conf.broker_url, celery_app.conf.result_backend
    celery_use_broker(server["now"].url)
    yield port, server
    server["now"].stop()
    celery_use_broker(*previous)  # the broker and the result backend
    _client.cache_clear()


def test_the_worker_survives_a_60_s_redis_outage_with_a_task_in_flight(outage_redis, settings, tmp_path):
    from django.db import connection  # noqa: PLC0415 - the test database exists only inside the test

    port, server = outage_redis
    url = server["now"].url
    settings.SCALER_EXECUTION_TIMEOUT_S = 20
    settings.SCALER_EXECUTION_LEASE_MARGIN_S = 2
    env = {**os.environ, "REDIS_URL": url, "CELERY_BROKER_URL": url, "CELERY_RESULT_BACKEND": url,
           "DATABASE_URL": f"sqlite:///{connection.settings_dict['NAME']}", "PYTHONUNBUFFERED": "1",
           "SCALER_COLLECT_INTERVAL_S": "3600", "SCALER_RECONCILE_INTERVAL_S": "1",
           "SCALER_EXECUTION_TIMEOUT_S": "20", "SCALER_EXECUTION_LEASE_MARGIN_S": "2", "SCALER_STABILIZATION_S": "0"}
    group = ProcessGroup(log_dir=tmp_path / "logs", env=env)
    in_flight_job, later_job = make_job("inflight", restart_strategy="fixed-delay", restart_attempts=3,
                                        restart_delay_s=0.5), make_job("later")
    for job in (in_flight_job, later_job):
        make_snapshots(job)
        evaluation_run(job=job)
    first, second = in_flight_job.proposals.get(), later_job.proposals.get()
    operator = make_user()
    client = Client()
    client.force_login(operator)
    # The runner never answers the first command: the task waits for it while Redis goes away.
    silent = FakeRunner(url, in_flight_job.name, answer=lambda command, i: None)
    silent.start()
    try:
        worker = group.start("worker", ["python", "-m", "celery", "-A", "webapp", "worker", "-B", "-P", "threads",
                                        "-c", "2", "--loglevel", "INFO", "-s", str(tmp_path / "beat-schedule")])
        proposal_approve(proposal=first, actor=operator)
        wait_for(lambda: silent.commands, timeout_s=60, what="the worker to send attempt 1", group=group,
                 interval_s=0.2)
        assert Execution.objects.get(proposal=first).attempt_state == "sent"
        silent.stop()  # before Redis goes: its thread would die on the closed connection
        server["now"].stop()
        down_at = time.monotonic()

        # During the outage: an approve answers 503, fast, and leaves the proposal pending.
        started = time.monotonic()
        response = client.post(f"/api/proposals/{second.pk}/approve/")
        took = time.monotonic() - started
        print(f"\napprove during the outage: {response.status_code} in {took:.1f} s")
        assert response.status_code == 503, response.content
        assert "Redis" in response.json()["detail"] and "try again" in response.json()["detail"]
        assert response.json()["code"] == "redis_unavailable" and str(port) not in response.content.decode()
        assert Proposal.objects.get(pk=second.pk).status == "pending"
        assert not AuditEvent.objects.filter(proposal=second, action="approved").exists()
        page = client.post(f"/proposals/{second.pk}/decide/", {"action": "approve"})
        assert page.status_code == 302 and page["Location"] == f"/proposals/{second.pk}/"
        assert Proposal.objects.get(pk=second.pk).status == "pending"

        while time.monotonic() - down_at < OUTAGE_S:
            assert worker.process.poll() is None, (f"the worker died during the outage:\n"
                                                   f"{worker.log_path.read_text()[-4000:]}")
            time.sleep(1.0)
        server["now"] = start_redis(port=port, workdir=tmp_path / "redis")
        back_at = timezone.now()
        print(f"Redis down for {time.monotonic() - down_at:.1f} s")
    finally:
        silent.stop()
    runner = FakeRunner(url, in_flight_job.name)
    runner.start()
    later_runner = FakeRunner(url, later_job.name)
    later_runner.start()
    try:
        # No proposal lost: the in-flight one is taken over by the reconcile beat and executes.
        wait_for(lambda: Proposal.objects.get(pk=first.pk).status == "succeeded", timeout_s=120,
                 what="the in-flight proposal to succeed after the outage", group=group, interval_s=0.5)
        # ... by the beat, which resumed: the takeover happened after Redis came back.
        assert AuditEvent.objects.filter(proposal=first, action="reconciled", actor_name="system:reconcile",
                                         at__gte=back_at).exists()
        # The one refused during the outage is still there to approve, and runs.
        response = client.post(f"/api/proposals/{second.pk}/approve/")
        assert response.status_code == 200, response.content
        wait_for(lambda: Proposal.objects.get(pk=second.pk).status == "succeeded", timeout_s=60,
                 what="the proposal approved after the outage to succeed", group=group, interval_s=0.5)
        assert worker.process.poll() is None
        log = worker.log_path.read_text()
        assert "Unrecoverable error" not in log, log[-4000:]
    finally:
        runner.stop()
        later_runner.stop()
        group.stop()


def test_a_redis_outage_during_an_execution_applies_the_rescale_once(outage_redis, settings, tmp_path):
    """The runner applies attempt 1 and its result is lost with Redis (stopped, then started empty);
    after the lease the beat sends attempt 2 with the same idempotency key: the runner answers with
    its first apply from its key store, and the execution records attempt 1 as the applied one."""
    from django.db import connection  # noqa: PLC0415 - the test database exists only inside the test

    port, server = outage_redis
    url = server["now"].url
    settings.SCALER_EXECUTION_TIMEOUT_S = 6
    settings.SCALER_EXECUTION_LEASE_MARGIN_S = 2
    env = {**os.environ, "REDIS_URL": url, "CELERY_BROKER_URL": url, "CELERY_RESULT_BACKEND": url,
           "DATABASE_URL": f"sqlite:///{connection.settings_dict['NAME']}", "PYTHONUNBUFFERED": "1",
           "SCALER_COLLECT_INTERVAL_S": "3600", "SCALER_RECONCILE_INTERVAL_S": "1",
           "SCALER_EXECUTION_TIMEOUT_S": "6", "SCALER_EXECUTION_LEASE_MARGIN_S": "2", "SCALER_STABILIZATION_S": "0"}
    group = ProcessGroup(log_dir=tmp_path / "logs", env=env)
    job = make_job("once", restart_strategy="fixed-delay", restart_attempts=3, restart_delay_s=0.5)
    make_snapshots(job)
    evaluation_run(job=job)
    proposal = job.proposals.get()
    restart = {"status": "succeeded", "path": "driver-handover", "downtime_s": 7.5, "pause_s": 4.25}
    workdir, hold = tmp_path / "runner", threading.Event()
    runner = FakeRunner(url, job.name, answer=lambda command, i: restart, workdir=workdir, hold=hold)
    runner.start()
    try:
        worker = group.start("worker", ["python", "-m", "celery", "-A", "webapp", "worker", "-B", "-P", "threads",
                                        "-c", "2", "--loglevel", "INFO", "-s", str(tmp_path / "beat-schedule")])
        proposal_approve(proposal=proposal, actor=make_user())
        wait_for(lambda: runner.applied, timeout_s=60, what="the runner to apply attempt 1", group=group,
                 interval_s=0.1)
        server["now"].stop()  # the runner applied it; its result is written while Redis is away
        hold.set()
        wait_for(lambda: runner.lost, timeout_s=30, what="the runner's result to be lost", interval_s=0.1)
        time.sleep(5.0)
        assert worker.process.poll() is None, worker.log_path.read_text()[-4000:]
        server["now"] = start_redis(port=port, workdir=tmp_path / "redis")  # back, empty
        wait_for(lambda: Proposal.objects.get(pk=proposal.pk).status == "succeeded", timeout_s=120,
                 what="the proposal to succeed after the outage", group=group, interval_s=0.5)
    finally:
        runner.stop()
        group.stop()
    execution = Execution.objects.get(proposal=proposal)
    first, lost = runner.applied[0], runner.lost[0]
    print(f"\nattempts {execution.attempts}, applied attempt {execution.applied_attempt}, "
          f"commands {[c['id'] for c in runner.commands]}, applied {[c.id for c in runner.applied]}")
    # The runner applied the rescale exactly once; attempt 2 was answered from its key store.
    assert len(runner.applied) == 1 and first.id == execution.exec_id(1)
    assert [c["id"] for c in runner.commands] == [execution.exec_id(1), execution.exec_id(2)]
    assert [r.replay_of for r in runner.replays] == [first.id]
    assert first.idempotency_key == execution.idempotency_key
    # The execution records attempt 1, the real restart: its path, pause, downtime and time.
    assert (execution.attempts, execution.applied_attempt) == (2, 1)
    assert (execution.path, execution.pause_s, execution.downtime_s) == ("driver-handover", 4.25, 7.5)
    assert abs(execution.finished_at.timestamp() - lost.completed_at) < 0.01
    assert [(e.attempt, e.status) for e in execution.attempt_entries] == [(1, AttemptOutcome.SUCCEEDED),
                                                                          (2, AttemptOutcome.REPLAYED)]
    # The audit shows one applied attempt and no attempt failed because its result was lost.
    actions = list(AuditEvent.objects.filter(proposal=proposal).values_list("action", flat=True))
    assert actions.count("config_changed") == 1 and "attempt_failed" not in actions
    assert AuditEvent.objects.get(proposal=proposal, action="config_changed").reason["data"]["attempt"] == 1
