"""An execution succeeds only when the new configuration has run, with real Spark: a pipeline whose query
raises at its first batch on the new configuration (:mod:`tests.sparkclient.runner.poison_pipeline`,
``poison=1``), rescaled through the warm handover (``cores`` 1 → 2: a new driver in local mode) and
through a restart of the query in the driver (``poison`` alone).

The real runner (``python -m sparkclient run``, a real ``redis-server``) runs the pipeline on
``poison=0``; the web app's execution steps run in the test's process on the Django test database:
``attempt_send`` sends the approved proposal's attempt, ``execution_poll`` (the reconcile beat's) records
the runner's answer. The runner's first-batch deadline is short (``--first-batch-timeout``); the job's
restart strategy is ``none``, so the first failure fails the execution and rolls the job back.
Every driver on the new configuration dies at its first batch; the execution must never be
"succeeded", must fail ``no-first-batch`` naming the query's exception once the deadline passed, and its
downtime is not measured.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from sparkclient.collector.progress import ran_a_batch, read_progress
from sparkclient.contract.control import read_status
from sparkclient.contract.messages import RescalePath
from sparkclient.demo.redisproc import free_port
from tests.repo import ROOT
from tests.sparkclient.runner.poison_pipeline import POISONED
from tests.waiting import runner_failure, stop_supervisor, wait_for
from webapp.jobs.services import job_register
from webapp.loop.execute import attempt_send
from webapp.loop.reconcile import execution_poll
from webapp.proposals.lifecycle import AttemptOutcome
from webapp.proposals.models import Execution, Proposal

pytestmark = [pytest.mark.spark, pytest.mark.django_db, pytest.mark.timeout(1500)]

JOB = "poison"
PIPELINE = "tests.sparkclient.runner.poison_pipeline:build"
OLD = {"cores": 1, "poison": 0}
#: The runner's first-batch deadline, seconds from the command: long enough for a standby's first batch
#: on a quiet host, short against the drivers' crash loop.
DEADLINE_S = 30.0
WARM_UP_BATCHES = 1


@pytest.fixture
def poison_runner(workflow_redis, redis_server, tmp_path, settings, monkeypatch):
    """The job registered (restart strategy ``none``), its runner started on ``OLD``; stopped after.
    Nothing is enqueued (the rollback's attempt is not sent: the test checks that it is started)."""
    settings.SCALER_EXECUTION_TIMEOUT_S = 600.0  # the runner's deadline answers first, never the lease
    monkeypatch.setattr("webapp.proposals.dispatch.send", lambda *args, **kwargs: None)
    port = free_port()
    job = job_register(name=JOB, config=dict(OLD), spark_ui_hosts=["127.0.0.1"],
                       spark_ui_ports=f"{port}-{port + 16}", policy={"restart_strategy": "none"})
    workdir = tmp_path / "job"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYSPARK_PYTHON": sys.executable}
    supervisor = subprocess.Popen(
        [sys.executable, "-m", "sparkclient", "run", "--pipeline", PIPELINE, "--job", JOB, "--redis-url",
         redis_server.url, "--workdir", str(workdir), "--ui-port", str(port), "--knob", "cores=1", "--knob", "poison=0",
         "--warm-up-batches", str(WARM_UP_BATCHES), "--first-batch-timeout", str(DEADLINE_S)],
        cwd=ROOT, env=env)
    try:
        yield job, supervisor, workflow_redis, workdir / "driver.log"
    finally:
        stop_supervisor(supervisor, timeout_s=180)
        print(f"driver log: {workdir / 'driver.log'}")


def _batches_of(client, run_id: str) -> int:
    return sum(1 for p in read_progress(client, JOB) if p.get("runId") == run_id and ran_a_batch(p))


def _supervisor_gone(supervisor, driver_log):
    def failed() -> str | None:
        if supervisor.poll() is None:
            return None
        tail = driver_log.read_text(errors="replace")[-4000:] if driver_log.exists() else "(no driver log)"
        return f"the supervisor exited with {supervisor.returncode}; driver log:\n{tail}"
    return failed


@pytest.mark.parametrize(("new", "path"), [({"cores": 2, "poison": 1}, RescalePath.DRIVER_HANDOVER),
                                           ({"cores": 1, "poison": 1}, RescalePath.IN_PROCESS)])
def test_a_query_that_dies_at_its_first_batch_on_the_new_configuration_fails_the_execution(poison_runner, new, path):
    job, supervisor, client, driver_log = poison_runner
    crashed = runner_failure(client, JOB, driver_log)
    status = wait_for(lambda: read_status(client, JOB).running and read_status(client, JOB), timeout_s=240,
                      what="the runner to run the pipeline", failed=crashed)
    wait_for(lambda: _batches_of(client, status.run_id) >= 2, timeout_s=120, what="two batches on the old "
             "configuration", failed=crashed)

    proposal = Proposal.objects.create(job=job, kind=Proposal.Kind.SCALE, status=Proposal.Status.APPROVED,
                                       current_config=dict(OLD), proposed_config=dict(new))
    asked = time.monotonic()
    execution = attempt_send(proposal_id=proposal.pk)
    assert execution is not None and execution.attempts == 1
    seen: list[str] = []

    def outcome() -> Execution | None:
        execution_poll(execution=Execution.objects.select_related("proposal__job").get(pk=execution.pk))
        row = Execution.objects.get(pk=execution.pk)
        seen.append(row.status)
        return row if row.status != Execution.Status.RUNNING else None

    done = wait_for(outcome, timeout_s=DEADLINE_S + 240, interval_s=1.0, what="the execution's outcome",
                    failed=_supervisor_gone(supervisor, driver_log))
    took_s = time.monotonic() - asked
    print(f"{path}: {done.status} after {took_s:.1f} s: {done.error}")
    assert Execution.Status.SUCCEEDED not in seen
    assert done.status == Execution.Status.FAILED, done.error
    assert (done.result["code"], done.result["path"]) == ("no-first-batch", path), done.result
    assert f"within {DEADLINE_S:.0f} s of the command" in done.error and POISONED in done.error, done.error
    assert took_s >= DEADLINE_S  # failed by the deadline, not by the first crash
    assert (done.downtime_s, done.pause_s, done.time_to_effect_s) == (None, None, None)
    assert [e.status for e in done.attempt_entries] == [AttemptOutcome.FAILED]
    # the rollback rules apply: the proposal rolls back to the configuration it came from
    proposal.refresh_from_db()
    assert proposal.status == Proposal.Status.ROLLING_BACK
    rollback = Proposal.objects.get(rollback_of=proposal)
    assert rollback.kind == Proposal.Kind.ROLLBACK and rollback.proposed_config == OLD
    job.refresh_from_db()
    assert job.config == OLD and job.scaler_state.get("restart_times_s", []) == []
