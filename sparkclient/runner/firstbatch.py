"""A rescale that restarted the query is finished by the first batch after the restart.

:class:`FirstBatchWatch` holds the one rescale a driver waits on (the driver runs one rescale at a
time) and writes its result: succeeded with its downtime and pause when a batch of a new run
completes, failed when none completes within :data:`FIRST_BATCH_TIMEOUT_S`, or when the driver stops
first. Thread-safe: the progress listener, the control thread and the main loop all call it.

Downtime = end of the first batch after the restart minus end of the last batch before the stop, s;
pause = start of that first batch minus the same end (the time no batch ran). Without a last batch
before the stop, both count from when the command was taken. The result also carries the end of that
first batch (``first_batch_at``, epoch s): the end of a rescale's time to effect.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from sparkclient.collector.batchwindow import progress_time_s
from sparkclient.collector.progress import batch_end_epoch_s
from sparkclient.contract.messages import FailureCode, RescalePath, RescaleResult, ResultStatus, StandbyUse

__all__ = ["FIRST_BATCH_TIMEOUT_S", "AwaitedRescale", "FirstBatchWatch"]

#: How long a rescale waits for the first batch on its configuration before failing, seconds from the
#: command (the default of ``run --first-batch-timeout``).
FIRST_BATCH_TIMEOUT_S = 180.0
#: The causes a failure names at most (the latest ones), and the characters of each.
MAX_CAUSES, MAX_CAUSE_CHARS = 3, 300


@dataclass(frozen=True)
class AwaitedRescale:
    """A rescale waiting for its first batch: its command ``id``, ``path``, the ``knobs`` it
    applied, ``requested_at`` (epoch s), ``last_batch_end`` (epoch s of the last batch before the
    stop, or None), ``old_run_id`` (the stopped run, whose late progress does not count; None when
    a new driver waits), ``deadline`` (epoch s: ``requested_at`` plus the timeout), ``standby`` (the
    standby driver it runs on, reported with its success; None: not known) and ``causes`` (what
    failed the queries that ran it before, oldest first)."""

    id: str
    path: RescalePath
    knobs: dict[str, int]
    requested_at: float
    last_batch_end: float | None
    old_run_id: str | None
    deadline: float
    standby: StandbyUse | None = StandbyUse.NONE
    causes: tuple[str, ...] = ()


class FirstBatchWatch:
    """The rescale the driver waits on; results go to ``write_result``."""

    def __init__(self, write_result: Callable[[RescaleResult], None],
                 timeout_s: float = FIRST_BATCH_TIMEOUT_S) -> None:
        self._write_result = write_result
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._awaited: AwaitedRescale | None = None

    @property
    def waiting(self) -> bool:
        """Whether a rescale waits for its first batch."""
        return self._awaited is not None

    def expect(self, *, command_id: str, path: RescalePath, knobs: dict[str, int], requested_at: float,
               last_batch_end: float | None, old_run_id: str | None,
               standby: StandbyUse | None = StandbyUse.NONE, causes: tuple[str, ...] = ()) -> None:
        """Wait for the first batch of a run other than ``old_run_id``, until ``timeout_s`` after
        ``requested_at`` (epoch s); ``standby``: the standby driver the rescale runs on (``none``: this
        driver); ``causes``: what failed the queries that ran it before."""
        with self._lock:
            self._awaited = AwaitedRescale(command_id, RescalePath(path), dict(knobs), requested_at, last_batch_end,
                                           old_run_id, requested_at + self.timeout_s, standby, tuple(causes))

    def forget(self) -> None:
        """Stop waiting, writing nothing (the caller reports the rescale itself)."""
        with self._lock:
            self._awaited = None

    def on_batch(self, progress: dict[str, Any]) -> AwaitedRescale | None:
        """A batch completed (``progress``: its progress dict). Writes the awaited rescale's success,
        with its downtime, pause and first batch's end, and returns it; None when nothing waited on this batch."""
        with self._lock:
            awaited = self._awaited
            if awaited is None or progress.get("runId") == awaited.old_run_id:
                return None
            self._awaited = None
        first_end = batch_end_epoch_s(progress)
        try:
            first_start = progress_time_s(progress)
        except ValueError:
            first_start = first_end
        since = awaited.last_batch_end or awaited.requested_at
        self._write_result(RescaleResult(id=awaited.id, status=ResultStatus.SUCCEEDED, path=awaited.path,
                                         downtime_s=max(0.0, first_end - since),
                                         pause_s=max(0.0, first_start - since), knobs=awaited.knobs,
                                         first_batch_at=first_end, standby=awaited.standby))
        return awaited

    def check_timeout(self) -> AwaitedRescale | None:
        """Fail the awaited rescale when its deadline passed with no batch (``no-first-batch``, naming
        the causes of the queries that failed on it); returns it, None when nothing failed."""
        with self._lock:
            awaited = self._awaited
            if awaited is None or time.time() < awaited.deadline:
                return None
            self._awaited = None
        died = f"; its query failed: {'; then: '.join(awaited.causes)}" if awaited.causes else ""
        self._write_result(RescaleResult.failed(
            awaited.id, FailureCode.NO_FIRST_BATCH, f"no batch completed on the new configuration within "
            f"{self.timeout_s:.0f} s of the command{died}", path=awaited.path, knobs=awaited.knobs))
        return awaited

    def carry_over(self, cause: str) -> AwaitedRescale | None:
        """The query failed (``cause``, its exception) and the driver dies: stop waiting, writing
        nothing, and return the awaited rescale with ``cause`` added (the latest :data:`MAX_CAUSES`),
        for the next driver to finish (``sparkclient.runner.driver``); None when nothing waited."""
        with self._lock:
            awaited, self._awaited = self._awaited, None
        if awaited is None:
            return None
        return replace(awaited, causes=(*awaited.causes, cause[:MAX_CAUSE_CHARS])[-MAX_CAUSES:])

    def abandon(self) -> None:
        """The driver is stopping: fail an in-process rescale, or a "nothing to change" waiting for this
        run's first batch, still waiting; a driver-restart or handover rescale stays pending
        (``ss:runner:{job}:pending``): the next driver finishes it."""
        with self._lock:
            awaited, self._awaited = self._awaited, None
        waits_here = (RescalePath.NONE, RescalePath.IN_PROCESS, RescalePath.STATE_REPARTITION)
        if awaited is not None and awaited.path in waits_here:
            self._write_result(RescaleResult.failed(awaited.id, FailureCode.DRIVER_STOPPED,
                                                    "the driver stopped before the first batch after the restart",
                                                    path=awaited.path, knobs=awaited.knobs))
