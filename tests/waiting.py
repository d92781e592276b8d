"""Polling for tests that drive real processes (Spark, Celery workers, a browser)."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from sparkclient.contract.control import read_status
from sparkclient.contract.messages import RunnerState
from sparkclient.runner.driverlog import query_failure

T = TypeVar("T")

#: Every wait's ``timeout_s`` and every hang guard (tests/conftest.py) is sized for a quiet host and
#: multiplied by this: on a shared 2-core host (load average 5-8, a CPU burner beside) the Spark phase
#: took 2.5x its quiet time. A wait ends as soon as what it waits for comes, so this costs a quiet host nothing.
BUSY_HOST_FACTOR = 3


def wait_for(predicate: Callable[[], T], *, timeout_s: float, what: str, interval_s: float = 0.5,
             group=None, failed: Callable[[], str | None] | None = None) -> T:
    """Call ``predicate`` every ``interval_s`` seconds until it returns something truthy; return that.

    Args:
        group: a ``sparkclient.demo.processes.ProcessGroup`` whose children must stay alive; the first that
            exits fails the wait at once, with the end of its log.
        failed: says why the wait can no longer succeed (e.g. :func:`runner_failure`), None while it can;
            a message fails the wait at once with it.

    Raises:
        AssertionError: ``timeout_s`` times :data:`BUSY_HOST_FACTOR` passed (the message names ``what``), a
            child exited, or ``failed`` spoke.
    """
    started = time.monotonic()
    deadline = started + timeout_s * BUSY_HOST_FACTOR
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            print(f"{what}: {time.monotonic() - started:.1f} s")  # measured waits show with -s
            return value
        reason = failed() if failed is not None else None
        if reason:
            raise AssertionError(f"{reason}\n(while waiting for {what})")
        if group is not None and group.dead():
            dead = group.dead()[0]
            raise AssertionError(f"{dead.name} exited with {dead.process.returncode} while waiting for {what}; "
                                 f"log:\n{dead.log_path.read_text()[-3000:]}")
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s * BUSY_HOST_FACTOR:.0f} s waiting for {what}")


def wait_while_progressing(measure: Callable[[], float | None], *, target: float, what: str, stall_s: float,
                           interval_s: float = 2.0, rising: bool = False) -> float:
    """Poll ``measure`` until it reaches ``target`` (falls to it, or rises to it with ``rising``),
    for as long as it keeps moving towards it: the wait is bounded by progress, not by a wall-clock
    limit a slow machine misses. Progress is a sample closer to ``target`` than the one before.

    Returns the value that reached ``target``. ``None`` samples (nothing measured yet) are not progress.

    Raises:
        AssertionError: ``stall_s`` seconds passed with no progress (the message names ``what`` and
            the samples seen).
    """
    started = last_progress = time.monotonic()
    previous: float | None = None
    samples: list[float] = []
    while True:
        value = measure()
        if value is not None:
            samples.append(value)
            if (value >= target) if rising else (value <= target):
                print(f"{what}: {time.monotonic() - started:.1f} s")
                return value
            if previous is not None and ((value > previous) if rising else (value < previous)):
                last_progress = time.monotonic()
            previous = value
        if time.monotonic() - last_progress > stall_s:
            raise AssertionError(f"no progress for {stall_s:.0f} s waiting for {what} (target {target}); "
                                 f"last samples: {samples[-10:]}")
        time.sleep(interval_s)


def runner_failure(client, job: str, driver_log: Path) -> Callable[[], str | None]:
    """For ``wait_for(failed=...)``: once the runner of ``job`` reports a crashed driver (state ``failed``
    or ``crash_looping``),
    the driver's own error, the cause its log names (:func:`sparkclient.runner.driverlog.query_failure`)
    and the log's last 3,000 characters."""
    def failed() -> str | None:
        status = read_status(client, job)
        if status.state not in (RunnerState.FAILED, RunnerState.CRASH_LOOPING):
            return None
        cause = query_failure(driver_log)
        tail = driver_log.read_text(errors="replace")[-3000:] if driver_log.exists() else "(no driver log)"
        return (f"the driver of {job} crashed: {status.error or 'no error reported'}"
                + (f"\nits query failed with {cause}" if cause else "") + f"\ndriver log ({driver_log}):\n{tail}")
    return failed


def run_while_progressing(args: list[str], *, what: str, stall_s: float, cwd: Path,
                          interval_s: float = 1.0) -> subprocess.CompletedProcess:
    """Run ``args`` to its end for as long as it keeps writing (to its standard output or error): a
    command bounded by its progress, not by a wall-clock limit a busy host misses.

    Returns:
        The finished process, its ``stdout`` and ``stderr`` as text.

    Raises:
        AssertionError: ``stall_s`` seconds without a byte of output; the command is killed and the
            message names ``what`` and the end of its error output.
    """
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        process = subprocess.Popen(args, cwd=cwd, stdout=out, stderr=err, text=True)
        written, last_progress = 0, time.monotonic()
        try:
            while process.poll() is None:
                size = os.fstat(out.fileno()).st_size + os.fstat(err.fileno()).st_size
                if size > written:
                    written, last_progress = size, time.monotonic()
                elif time.monotonic() - last_progress > stall_s:
                    process.kill()
                    process.wait()
                    err.seek(0)
                    raise AssertionError(f"{what}: no output for {stall_s:.0f} s; killed. Its stderr ends:\n"
                                         f"{err.read()[-3000:]}")
                time.sleep(interval_s)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(args, process.returncode, out.read(), err.read())


def stop_supervisor(supervisor: subprocess.Popen, *, timeout_s: float) -> None:
    """End a runner's supervisor as an operator does: SIGTERM (it stops its driver and Spark), then,
    after ``timeout_s`` seconds, SIGKILL to its process group."""
    if supervisor.poll() is None:
        supervisor.send_signal(signal.SIGTERM)
    try:
        supervisor.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(supervisor.pid, signal.SIGKILL)
