"""A rescale succeeds only by a batch on its configuration, and fails past its deadline from the command,
however many drivers its query killed meanwhile (``sparkclient.runner.firstbatch``, the driver's
``_carry_over`` and ``_resume_pending``), on a real ``redis-server``, Spark left out."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pytest

from sparkclient.contract import control
from sparkclient.contract.messages import FailureCode, RescalePath, ResultStatus
from sparkclient.runner.arguments import add_run_arguments
from sparkclient.runner.driver import Driver
from sparkclient.runner.firstbatch import FIRST_BATCH_TIMEOUT_S, FirstBatchWatch
from sparkclient.runner.handover import read_pending
from sparkclient.runner.supervisor import driver_command

JOB = "orders"
OLD, NEW = {"p": 1}, {"p": 2}
TIMEOUT_S = 60.0
DIED = "org.apache.spark.SparkRuntimeException: [USER_RAISED_EXCEPTION] poisoned"


class _Applied:
    def answer(self, command, running):
        return None

    def record(self, key, knobs, result):
        pass


def _driver(client, workdir) -> Driver:
    """A driver on ``NEW`` with Spark left out: Redis, its first-batch watch and command bookkeeping."""
    driver = object.__new__(Driver)
    driver.job, driver.client, driver.values, driver.standby = JOB, client, dict(NEW), None
    driver.workdir, driver._log_from, driver._pending_id = workdir, 0, None
    driver.applied, driver._in_flight = _Applied(), {}
    driver.first_batch = FirstBatchWatch(driver._write_result, TIMEOUT_S)
    return driver


def _batch(run_id: str, start: str = "2026-12-02T16:00:10.000Z") -> dict:
    """A progress of ``run_id`` whose batch ran from ``start`` for 1 s."""
    return {"runId": run_id, "timestamp": start, "durationMs": {"addBatch": 500, "triggerExecution": 1000}}


def _restarted_in_process(driver: Driver, *, requested_at: float, last_end: float | None = None) -> None:
    driver._in_flight["c1"] = ("k1", dict(NEW))
    driver.first_batch.expect(command_id="c1", path=RescalePath.IN_PROCESS, knobs=NEW, requested_at=requested_at,
                              last_batch_end=last_end, old_run_id="old")


@pytest.mark.parametrize(("age_s", "failed"), [(TIMEOUT_S - 30, False), (TIMEOUT_S + 1, True)])
def test_the_deadline_counts_from_the_command_not_from_the_driver_that_waits(redis_client, tmp_path, age_s, failed):
    """A query that died at its first batch on the new configuration: the rescale rides along to the
    next driver, and fails there once the command is older than its timeout, naming what killed it."""
    first = _driver(redis_client, tmp_path)
    _restarted_in_process(first, requested_at=time.time() - age_s, last_end=time.time() - age_s - 1)
    first._carry_over(RuntimeError(f"query q terminated: {DIED}"))
    pending = read_pending(redis_client, JOB)
    assert (pending["id"], pending["path"], pending["knobs"]) == ("c1", RescalePath.IN_PROCESS, NEW)
    assert pending["causes"] == [f"RuntimeError: query q terminated: {DIED}"]
    assert control.get_result(redis_client, JOB, "c1") is None  # never an answer from the dying driver

    second = _driver(redis_client, tmp_path)
    second._resume_pending()
    result = control.get_result(redis_client, JOB, "c1")
    if not failed:
        assert result is None and second.first_batch.waiting and read_pending(redis_client, JOB) is not None
        return
    assert (result.status, result.code, result.path) == (ResultStatus.FAILED, FailureCode.NO_FIRST_BATCH,
                                                         RescalePath.IN_PROCESS)
    assert "within 60 s of the command" in result.error and DIED in result.error
    assert read_pending(redis_client, JOB) is None and not second.first_batch.waiting


def test_the_next_drivers_first_batch_finishes_it_measured_from_the_last_batch_on_the_old_configuration(
        redis_client, tmp_path):
    first = _driver(redis_client, tmp_path)
    last_end = 1_796_227_200.0  # 2026-12-02T16:00:00Z, the batch starts 10 s later
    _restarted_in_process(first, requested_at=time.time(), last_end=last_end)
    first._carry_over(RuntimeError(DIED))
    second = _driver(redis_client, tmp_path)
    second._resume_pending()
    second.query = None
    second._on_progress(_batch("run-2"))
    result = control.get_result(redis_client, JOB, "c1")
    assert result.succeeded and result.knobs == NEW
    assert (result.pause_s, result.downtime_s) == (10.0, 11.0)  # from the old configuration's last batch
    assert read_pending(redis_client, JOB) is None


def test_a_stopped_driver_still_fails_the_rescale_it_restarted_in_process(redis_client, tmp_path):
    """Stopped, not crashed: no driver follows, so the stop answers it (the web app's back-off decides)."""
    driver = _driver(redis_client, tmp_path)
    _restarted_in_process(driver, requested_at=time.time())
    driver.first_batch.abandon()
    assert control.get_result(redis_client, JOB, "c1").code is FailureCode.DRIVER_STOPPED
    assert read_pending(redis_client, JOB) is None


@pytest.mark.parametrize(("flag", "timeout_s"), [([], FIRST_BATCH_TIMEOUT_S), (["--first-batch-timeout", "20"], 20.0)])
def test_the_first_batch_timeout_flag_reaches_the_driver(flag, timeout_s):
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    args = parser.parse_args(["--pipeline", "mod:build", "--job", "j", *flag])
    args.capacity = 2
    cmd, _env = driver_command(args, Path("/tmp/j"))
    assert parser.parse_args(cmd[cmd.index("--pipeline"):]).first_batch_timeout == timeout_s
    with pytest.raises(SystemExit):
        parser.parse_args(["--pipeline", "mod:build", "--job", "j", "--first-batch-timeout", "0"])
