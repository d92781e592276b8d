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
        group: a ``webapp.processes.ProcessGroup`` whose children must stay alive; the first that
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
