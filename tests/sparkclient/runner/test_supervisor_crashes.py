"""The supervisor's crash handling (:meth:`sparkclient.runner.supervisor.Supervisor.run`) on a real
``redis-server``, with drivers that are small Python processes writing a crash record and exiting 1
(no Spark): each crash is reported with its exit code, exception, message and log, the back-off doubles,
and the third crash of the window is ``crash_looping``, after which the supervisor keeps restarting. A
rescale left pending rides along the loop until as many drivers started on it crashed
(:class:`sparkclient.runner.supervisor.PendingCrashes`)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading

import pytest

from sparkclient.contract import control, keys
from sparkclient.contract.messages import FailureCode, RunnerState
from sparkclient.runner import supervisor as supervisor_module
from sparkclient.runner.arguments import add_run_arguments
from sparkclient.runner.driverlog import CRASH_FILE
from sparkclient.runner.supervisor import PendingCrashes, Supervisor

JOB = "crashy"
DIES = ("import json, pathlib, sys; "
        "pathlib.Path(sys.argv[1]).write_text(json.dumps({'exception': 'ValueError', 'message': 'boom'})); "
        "sys.exit(1)")


@pytest.fixture
def supervisor(redis_server, redis_client, tmp_path, monkeypatch):
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    args = parser.parse_args(["--pipeline", "tests.sparkclient.runner.crash_pipeline:build", "--job", JOB,
                              "--redis-url", redis_server.url, "--workdir", str(tmp_path), "--crash-loop-crashes",
                              "3", "--crash-loop-window-s", "600", "--crash-backoff-s", "0.1"])
    args.capacity = 1
    sup = Supervisor(args)
    spawned: list[int] = []
    pending_seen: list[bool] = []  # whether a rescale was pending as each driver started
    before_death: list = []  # called with the number of the driver (1-based) before it dies

    def spawn(standby=None):
        spawned.append(1)
        pending_seen.append(bool(redis_client.get(keys.runner_pending(JOB))))
        for hook in before_death:
            hook(len(spawned))
        return subprocess.Popen([sys.executable, "-c", DIES, str(tmp_path / CRASH_FILE)], start_new_session=True)

    monkeypatch.setattr(sup, "_spawn", spawn)
    waits: list[float] = []
    real_wait = sup.stopping.wait

    pending_at_wait: list[bool] = []  # whether a rescale is still pending at each back-off

    def wait(timeout):  # the back-offs asked for; the fourth crash stops the supervisor
        waits.append(timeout)
        pending_at_wait.append(bool(redis_client.get(keys.runner_pending(JOB))))
        if len(waits) == 4:
            sup.stopping.set()
        return real_wait(0)

    monkeypatch.setattr(sup.stopping, "wait", wait)
    sup.pending_seen, sup.before_death, sup.pending_at_wait = pending_seen, before_death, pending_at_wait
    return sup, waits, spawned


def test_three_crashes_in_the_window_are_a_loop_named_by_its_exception(supervisor, redis_client, tmp_path,
                                                                      monkeypatch):
    sup, waits, spawned = supervisor
    states: list[tuple[str, int]] = []
    real_write = control.write_status

    def write(client, job, update):
        if update.crashes:
            states.append((update.state, update.crashes))
        real_write(client, job, update)

    monkeypatch.setattr(supervisor_module.control, "write_status", write)
    thread = threading.Thread(target=sup.run)
    thread.start()
    thread.join(timeout=120)
    monkeypatch.undo()
    assert states == [("failed", 1), ("failed", 2), ("crash_looping", 3), ("crash_looping", 4)]
    assert waits == [0.1, 0.2, 0.4, 0.8] and len(spawned) == 4  # the loop keeps restarting, backing off
    status = control.read_status(redis_client, JOB)
    assert status.state == RunnerState.STOPPED
    assert (status.exit_code, status.exception, status.exception_message) == (1, "ValueError", "boom")
    assert status.log_path == str(tmp_path / "driver.log") and status.crash_window_s == 600


def _pend(client, command_id: str) -> None:
    client.set(keys.runner_pending(JOB), json.dumps({"id": command_id, "path": "driver-restart", "knobs": {}}))


def test_a_pending_rescale_rides_along_until_as_many_drivers_started_on_it_crashed(supervisor, redis_client):
    sup, _waits, spawned = supervisor
    _pend(redis_client, "heap-1")  # recorded before the first driver: every driver starts on it
    thread = threading.Thread(target=sup.run)
    thread.start()
    thread.join(timeout=120)
    # three drivers on it crashed (the rule's 3): failed after the third, not after the second
    assert sup.pending_at_wait == [True, True, False, False]
    assert sup.pending_seen == [True, True, True, False] and len(spawned) == 4
    result = control.get_result(redis_client, JOB, "heap-1")
    assert result is not None and result.code == FailureCode.DRIVER_CRASHED and "ValueError: boom" in result.error


def test_the_driver_that_recorded_a_pending_rescale_does_not_count_against_it(supervisor, redis_client):
    sup, _waits, spawned = supervisor
    # the first driver records the rescale while it runs (an out-of-memory driver handing its heap
    # command to the next one) and dies: it rides along to the three drivers after it, and fails only
    # once those three crashed
    sup.before_death.append(lambda n: _pend(redis_client, "heap-1") if n == 1 else None)
    thread = threading.Thread(target=sup.run)
    thread.start()
    thread.join(timeout=120)
    assert sup.pending_seen == [False, True, True, True] and len(spawned) == 4
    assert sup.pending_at_wait == [True, True, True, False]
    assert control.get_result(redis_client, JOB, "heap-1").code == FailureCode.DRIVER_CRASHED


@pytest.mark.parametrize(("starts", "failed_after"), [
    (["x", "x", "x"], [False, False, True]),         # N drivers on it: failed at the N-th
    (["x", "x"], [False, False]),                     # N-1: not yet
    (["", "x", "x", "x"], [False, False, False, True]),  # the one running when it was recorded does not count
    (["x", "x", "y", "y", "y"], [False, False, False, False, True]),  # a new pending starts its own count
])
def test_pending_crashes_count_the_drivers_started_on_each_pending_rescale(starts, failed_after):
    pending = PendingCrashes(3)
    failed = []
    for pending_id in starts:
        pending.driver_started(pending_id)
        failed.append(bool(pending.crashed()))
    assert failed == failed_after
