"""The supervisor's crash handling (:meth:`sparkclient.runner.supervisor.Supervisor.run`) on a real
``redis-server``, with drivers that are small Python processes writing a crash record and exiting 1
(no Spark): each crash is reported with its exit code, exception, message and log, the back-off doubles,
and the third crash of the window is ``crash_looping``, after which the supervisor keeps restarting."""

from __future__ import annotations

import argparse
import subprocess
import sys
import threading

import pytest

from sparkclient.contract import control
from sparkclient.contract.messages import RunnerState
from sparkclient.runner import supervisor as supervisor_module
from sparkclient.runner.arguments import add_run_arguments
from sparkclient.runner.driverlog import CRASH_FILE
from sparkclient.runner.supervisor import Supervisor

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

    def spawn(standby=None):
        spawned.append(1)
        return subprocess.Popen([sys.executable, "-c", DIES, str(tmp_path / CRASH_FILE)], start_new_session=True)

    monkeypatch.setattr(sup, "_spawn", spawn)
    waits: list[float] = []
    real_wait = sup.stopping.wait

    def wait(timeout):  # the back-offs asked for; the fourth crash stops the supervisor
        waits.append(timeout)
        if len(waits) == 4:
            sup.stopping.set()
        return real_wait(0)

    monkeypatch.setattr(sup.stopping, "wait", wait)
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
