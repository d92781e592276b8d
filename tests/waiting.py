"""Polling for tests that drive real processes (Spark, Celery workers, a browser)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(predicate: Callable[[], T], *, timeout_s: float, what: str, interval_s: float = 0.5,
             group=None) -> T:
    """Call ``predicate`` every ``interval_s`` seconds until it returns something truthy; return that.

    Args:
        group: a ``sparkclient.demo.processes.ProcessGroup`` whose children must stay alive; the first that
            exits fails the wait at once, with the end of its log.

    Raises:
        AssertionError: ``timeout_s`` passed (the message names ``what``), or a child exited.
    """
    started = time.monotonic()
    deadline = started + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            print(f"{what}: {time.monotonic() - started:.1f} s")  # measured waits show with -s
            return value
        if group is not None and group.dead():
            dead = group.dead()[0]
            raise AssertionError(f"{dead.name} exited with {dead.process.returncode} while waiting for {what}; "
                                 f"log:\n{dead.log_path.read_text()[-3000:]}")
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")


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
