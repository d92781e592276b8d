"""Approval and execution with real Celery worker processes (no eager mode) sharing a file SQLite
database with the test, a real Redis, and a fake runner on the control channel instead of Spark.

2. A worker killed during an execution: after a new worker starts and the reconcile beat runs,
   the execution is completed (or rolled back), never stuck, and the audit trail says what happened.
3. The runner refuses the configuration: back-off retries, automatic rollback, suspension of
   auto-approval, and the audit events, in order.

And a worker is free while an execution waits for its runner (the execute
task sends and returns; the reconcile beat records the answer).
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from sparkclient.contract.control import write_result
from sparkclient.contract.messages import RescalePath, RescaleResult, ResultStatus
from sparkclient.demo.processes import ProcessGroup
from tests.waiting import wait_for
from tests.webapp.factories import make_job, make_snapshots, make_user
from tests.webapp.fakerunner import FakeRunner
from webapp.jobs.models import Job, JobPolicy
from webapp.loop.evaluate import evaluation_run
from webapp.proposals.lifecycle import AttemptOutcome
from webapp.proposals.models import AuditEvent, Execution, Proposal
from webapp.proposals.services import auto_approve_resume, proposal_approve

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]

RECONCILE_TASK = "webapp.loop.tasks.workflow_reconcile"
TERMINAL = {"succeeded", "failed", "rolled_back", "rejected", "expired", "superseded"}


@pytest.fixture
def processes(workflow_redis, redis_server, celery_broker, settings, tmp_path):
    """A ProcessGroup whose children share the test's SQLite file and Redis; the test process
    enqueues on the same broker."""
    from django.db import connection

    settings.SCALER_EXECUTION_TIMEOUT_S = 3
    settings.SCALER_EXECUTION_LEASE_MARGIN_S = 1
    env = {**os.environ, "REDIS_URL": redis_server.url, "CELERY_BROKER_URL": redis_server.url,
           "CELERY_RESULT_BACKEND": redis_server.url,
           "DATABASE_URL": f"sqlite:///{connection.settings_dict['NAME']}", "PYTHONUNBUFFERED": "1",
           "SCALER_COLLECT_INTERVAL_S": "3600", "SCALER_RECONCILE_INTERVAL_S": "0.2",
           "SCALER_EXECUTION_TIMEOUT_S": "3", "SCALER_EXECUTION_LEASE_MARGIN_S": "1", "SCALER_STABILIZATION_S": "0"}
    group = ProcessGroup(log_dir=tmp_path / "logs", env=env)
    yield group
    group.stop()


def worker(group: ProcessGroup, name: str, *, beat: bool, tmp_path, concurrency: int = 2,
           extra_env: dict[str, str] | None = None):
    args = ["python", "-m", "celery", "-A", "webapp", "worker", "-P", "threads", "-c", str(concurrency),
            "--loglevel", "INFO",
            "-n", f"{name}@%h"]
    if beat:
        args += ["-B", "-s", str(tmp_path / f"{name}-beat-schedule")]
    return group.start(name, args, extra_env=extra_env)




def trail(job: Job) -> list[tuple[int | None, str, str]]:
    return list(AuditEvent.objects.filter(job=job).order_by("at", "id")
                .values_list("proposal_id", "action", "actor_name"))


@pytest.mark.workflow
def test_a_worker_is_free_while_an_execution_waits_for_its_runner(processes, redis_server, celery_broker,
                                                                   settings, tmp_path):
    """One worker with one slot and no beat: it sends the attempt, returns, and runs the next task
    (a reconcile beat) while the runner has not answered; once it answers, a beat records it."""
    from webapp.celery import app as celery_app

    # A runner that takes long (the 240 s default): the lease outlives the test.
    settings.SCALER_EXECUTION_TIMEOUT_S = 300
    job = make_job(metric_window_s=45)
    make_snapshots(job)
    evaluation_run(job=job)
    proposal = job.proposals.get()
    runner = FakeRunner(redis_server.url, job.name, answer=lambda command, i: None)  # silent until told
    runner.start()
    try:
        worker(processes, "single", beat=False, tmp_path=tmp_path, concurrency=1,
               extra_env={"SCALER_EXECUTION_TIMEOUT_S": "300"})
        proposal_approve(proposal=proposal, actor=make_user())
        wait_for(lambda: runner.commands, timeout_s=60, what="the worker to send attempt 1", group=processes,
                 interval_s=0.2)
        # The runner has not answered, and the worker's only slot is free: it runs another task.
        counts = celery_app.send_task(RECONCILE_TASK).get(timeout=60)
        assert counts["recorded"] == 0 and counts["reconciled"] == 0  # nothing to record yet
        execution = Execution.objects.get(proposal=proposal)
        assert execution.status == "running" and execution.attempt_state == "sent"
        assert Proposal.objects.get(pk=proposal.pk).status == "executing"
        # The runner answers; the next beat records it.
        command = runner.commands[0]
        write_result(runner.client, job.name, RescaleResult(
            id=command["id"], status=ResultStatus.SUCCEEDED, path=RescalePath.IN_PROCESS, downtime_s=0.4,
            knobs=command["knobs"]))
        counts = celery_app.send_task(RECONCILE_TASK).get(timeout=60)
    finally:
        runner.stop()
    assert counts["recorded"] == 1
    assert Proposal.objects.get(pk=proposal.pk).status == "succeeded"
    execution.refresh_from_db()
    assert execution.status == "succeeded" and execution.path == "in-process" and execution.attempts == 1
    assert Job.objects.get(pk=job.pk).config == proposal.proposed_config


@pytest.mark.workflow
def test_a_worker_killed_during_an_execution_is_reconciled_by_the_next_beat(processes, redis_server, tmp_path):
    job = make_job(metric_window_s=45, restart_strategy="fixed-delay", restart_attempts=2, restart_delay_s=0.5)
    make_snapshots(job)
    evaluation_run(job=job)
    proposal = job.proposals.get()
    # The runner never answers the first command (its worker is about to die); it applies the next.
    runner = FakeRunner(redis_server.url, job.name,
                        answer=lambda command, i: None if i == 0 else {"status": "succeeded", "downtime_s": 0.7})
    runner.start()
    try:
        first = worker(processes, "worker-a", beat=False, tmp_path=tmp_path)
        proposal_approve(proposal=proposal, actor=make_user())
        wait_for(lambda: runner.commands, timeout_s=60, what="worker A to send attempt 1", group=processes,
                 interval_s=0.2)
        assert Execution.objects.get(proposal=proposal).attempt_state == "sent"
        os.killpg(first.process.pid, signal.SIGKILL)  # mid-execution: attempt 1 is unanswered
        first.process.wait(timeout=10)
        processes.children.remove(first)
        killed_at = time.monotonic()

        worker(processes, "worker-b", beat=True, tmp_path=tmp_path)
        final = wait_for(lambda: (s := Proposal.objects.get(pk=proposal.pk).status) in TERMINAL and s,
                         timeout_s=60, what="the execution to complete or roll back", group=processes,
                         interval_s=0.2)
        print(f"\nworker killed; proposal {final} {time.monotonic() - killed_at:.1f} s later")
    finally:
        runner.stop()
    assert final == "succeeded"
    execution = Execution.objects.get(proposal=proposal)
    assert execution.status == "succeeded" and execution.attempts == 2
    assert [e.status for e in execution.attempt_entries] == [AttemptOutcome.UNANSWERED, AttemptOutcome.SUCCEEDED]
    assert execution.applied_attempt == 2  # this runner keeps no keys: it applied attempt 2
    assert [c["id"] for c in runner.commands] == [f"proposal-{proposal.pk}-attempt-1",
                                                  f"proposal-{proposal.pk}-attempt-2"]
    events = [(action, actor) for pk, action, actor in trail(job) if pk == proposal.pk]
    assert events == [
        ("proposed", "policy:ds2"), ("approved", "operator"), ("executing", "system"), ("attempt_started", "system"),
        ("reconciled", "system:reconcile"), ("attempt_unanswered", "system"), ("attempt_started", "system"),
        ("config_changed", "system"), ("succeeded", "system")]
    reconciled = AuditEvent.objects.get(proposal=proposal, action="reconciled")
    assert reconciled.reason == {"code": "lease_expired_without_answer", "data": {"attempt": 1, "lease_s": 4.0}}
    assert Job.objects.get(pk=job.pk).config["cores"] == proposal.proposed_config["cores"]


@pytest.mark.workflow
def test_a_refused_configuration_is_retried_with_back_off_then_rolled_back_and_auto_approval_suspended(
        processes, redis_server, tmp_path):
    job = make_job(metric_window_s=45, mode="auto", guard_max_change_factor=8, restart_strategy="exponential-delay",
                   restart_attempts=2, restart_delay_s=0.5, restart_backoff_multiplier=2.0, restart_max_delay_s=10)
    original = dict(job.config)

    def refuse_new_configs(command: dict, index: int) -> dict:
        if command["config"]["cores"] == original["cores"]:
            return {"status": "succeeded", "path": "in-process", "downtime_s": 0.5}
        return {"status": "failed", "path": "none",
                "error": f"runner refuses cores={command['config']['cores']}: only {original['cores']} core(s) here"}

    runner = FakeRunner(redis_server.url, job.name, answer=refuse_new_configs)
    runner.start()
    try:
        worker(processes, "worker", beat=True, tmp_path=tmp_path)
        make_snapshots(job)
        evaluation_run(job=job)  # auto mode, inside the guardrails: approved by the policy, no click
        proposal = job.proposals.get(kind="scale")
        wait_for(lambda: Proposal.objects.get(pk=proposal.pk).status == "rolled_back", timeout_s=60,
                 what="the automatic rollback", group=processes, interval_s=0.2)
    finally:
        runner.stop()

    # Back-off retries: 3 attempts, the gaps growing 0.5 s then 1 s (exponential-delay).
    execution = Execution.objects.get(proposal=proposal)
    assert execution.status == "failed" and execution.attempts == 3
    assert [e.retry.delay_s for e in execution.attempt_entries] == [0.5, 1.0, None]
    sent = runner.received_at
    assert len(runner.commands) == 4  # three refused attempts, then the rollback
    gaps = [sent[1] - sent[0], sent[2] - sent[1]]
    assert gaps[0] >= 0.5 and gaps[1] >= 1.0, gaps  # each retry waited its delay; no upper bound (a busy machine)
    # The rollback: through the same execution path, to the last configuration that succeeded.
    rollback = Proposal.objects.get(kind="rollback")
    assert rollback.rollback_of == proposal and rollback.status == "succeeded"
    assert rollback.proposed_config == original
    restored = Job.objects.get(pk=job.pk).config
    assert all(runner.commands[3]["config"][k] == restored[k] == v for k, v in original.items())
    # Auto-approval suspended until a person re-enables it.
    policy = JobPolicy.objects.get(job=job)
    suspended = AuditEvent.objects.get(job=job, action="auto_approve_suspended").reason
    assert policy.auto_approve_suspended and suspended["code"] == "rollback_of"
    assert suspended["data"]["proposal"] == proposal.pk and suspended["data"]["cause"]["code"] == "execution_failed"
    # The audit trail, in order.
    p, r = proposal.pk, rollback.pk
    assert trail(job) == [
        (p, "proposed", "policy:ds2"), (p, "approved", "policy:ds2"), (p, "executing", "system"),
        (p, "attempt_started", "system"), (p, "attempt_failed", "system"),
        (p, "attempt_started", "system"), (p, "attempt_failed", "system"),
        (p, "attempt_started", "system"), (p, "attempt_failed", "system"),
        (p, "failed", "system"), (p, "rolling_back", "system"), (None, "auto_approve_suspended", "system"),
        (r, "proposed", "system"), (r, "approved", "system"), (r, "executing", "system"),
        (r, "attempt_started", "system"), (r, "config_changed", "system"), (r, "succeeded", "system"),
        (p, "rolled_back", "system")]
    failed = list(AuditEvent.objects.filter(proposal=proposal, action="attempt_failed").order_by("id"))
    assert {e.reason["code"] for e in failed} == {"attempt_failed"}
    assert "runner refuses cores=" in failed[0].reason["data"]["error"]
    assert [e.after["retry_in_s"] for e in failed] == [0.5, 1, None]
    assert [e.reason["data"]["retry"]["code"] for e in failed] == ["retry", "retry", "retries_spent"]

    # While suspended, even a proposal inside the guardrails waits for a person ...
    later = job.proposals.model.objects.filter(job=job).count()
    Job.objects.filter(pk=job.pk).update(config_changed_at=None)
    job.refresh_from_db()
    make_snapshots(job, backlog_step=5000)
    evaluation_run(job=job)
    held = Proposal.objects.filter(job=job).order_by("-id").first()
    assert Proposal.objects.filter(job=job).count() == later + 1
    assert held.status == "pending" and held.hold_reason["code"] == "auto_approval_suspended"
    # ... until a person turns auto-approval back on.
    auto_approve_resume(job=job, actor=make_user("olga"))
    assert not JobPolicy.objects.get(job=job).auto_approve_suspended
    assert AuditEvent.objects.filter(job=job, action="auto_approve_resumed", actor_user__username="olga",
                                     actor_name="olga").exists()
