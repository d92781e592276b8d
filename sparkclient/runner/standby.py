"""The standby driver: started by the supervisor when a command needs a new driver, or prepared before
the command while the web app's proposal is pending (:mod:`sparkclient.contract.standby`).

:class:`StandbyKeeper` is the supervisor's side. Each tick it follows, in this order:

1. a command's request (the handover hash ``requested`` with the command's id): the standby
   it holds for other knob values is stopped, and one is started for the command;
2. the web app's request (``ss:runner:{job}:standby``): ``prepare`` with knob values other than the
   running ones starts a prepared standby (:func:`sparkclient.runner.handover.open_prepared`);
   a prepared standby that no command claimed is stopped when the request is cancelled, expires,
   or asks for other knob values (the next tick prepares the new one). A prepare whose standby
   failed is not tried again.

A standby that exits before it took over is reported ``failed`` on its hash (when the hash still
names it). Stopping a standby ends its process group (its JVM too) without waiting in the tick.

:class:`StandbyCost` is the standby's side: what its process group costs while it waits, resident
memory (MB) and CPU (% of one core, since the last reading), from psutil.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable

import psutil
import redis

from sparkclient.contract import keys
from sparkclient.contract.messages import ProtocolError
from sparkclient.contract.spec import KnobError, PipelineSpec, validate_values
from sparkclient.contract.standby import HandoverState, StandbyAction, StandbyRequest, read_standby_request
from sparkclient.runner.executors import ExecutorScaler
from sparkclient.runner.handover import (
    HandoverStep,
    cancel_prepared,
    knobs_text,
    mark,
    mark_as,
    open_prepared,
    wait_for_release,
)
from sparkclient.runner.procgroup import end_process_group
from sparkclient.runner.session import WARM_UP_BATCHES, prepare_query, warm_up, warm_up_pipeline

log = logging.getLogger(__name__)

__all__ = ["EXIT_STANDBY_ABORTED", "StandbyCost", "StandbyKeeper", "StandbyRole", "prepared_request_holds"]

#: Exit code of a standby driver whose handover was called off (nothing of the job was touched).
EXIT_STANDBY_ABORTED = 77
#: On a cluster, how long a standby waits for a free executor before it waits unwarmed, seconds (an
#: executor on a free worker is active within seconds).
STANDBY_EXECUTOR_WAIT_S = 30.0


class StandbyKeeper:
    """The supervisor's standby (see the module docstring). ``spawn(handover_id)`` starts a standby
    driver process; ``log_path`` is named in a failure's error."""

    def __init__(self, client: redis.Redis, job: str, spec: PipelineSpec,
                 spawn: Callable[[str], subprocess.Popen], log_path: str) -> None:
        self.client, self.job, self.spec, self.spawn, self.log_path = client, job, spec, spawn, log_path
        self.proc: subprocess.Popen | None = None
        self.handover_id = ""
        self.prepared_for: tuple[str, str] | None = None  # (proposal, knobs text) of a prepared standby
        self._failed: set[tuple[str, str]] = set()

    def tick(self) -> None:
        """One look at the requests (see the module docstring); returns at once."""
        self._reap_exited()
        hand = self.client.hmget(keys.handover(self.job), "state", "id", "command")
        if hand[0] == HandoverState.REQUESTED and hand[1] and hand[1] != self.handover_id:
            self.retire()
            self._start(hand[1])
            mark(self.client, self.job, HandoverStep.SPAWNED, state=HandoverState.STARTING)
            log.info("standby driver %d started for command %s", self.proc.pid, hand[1])
            return
        wanted = self._wanted()
        if self.proc is not None:
            if self.prepared_for is not None and not hand[2] and wanted != self.prepared_for \
                    and cancel_prepared(self.client, self.job, self.handover_id):
                log.info("standby driver %d for proposal %s stopped: no longer requested", self.proc.pid,
                         self.prepared_for[0])
                self.retire()
            return
        if wanted is not None and wanted not in self._failed:
            proposal, text = wanted
            handover_id = f"prepared-{proposal}-{uuid.uuid4().hex[:8]}"
            open_prepared(self.client, self.job, handover_id, proposal, json.loads(text))
            self._start(handover_id)
            self.prepared_for = wanted
            log.info("standby driver %d prepared for proposal %s with %s", self.proc.pid, proposal, text)

    def _wanted(self) -> tuple[str, str] | None:
        """(proposal, knobs text) of the prepare request in force, when it asks for knob values other
        than the running ones and they fit the pipeline; else None."""
        try:
            request = read_standby_request(self.client, self.job)
        except ProtocolError as exc:
            log.warning("ignoring a malformed standby request for job %s: %s", self.job, exc)
            return None
        if request is None or request.action is not StandbyAction.PREPARE:
            return None
        try:
            knobs = validate_values(self.spec.knobs, request.knobs)
        except KnobError as exc:
            log.warning("ignoring the standby request of proposal %s: %s", request.proposal, exc)
            return None
        running = self.client.get(keys.config(self.job))
        if running is not None and running == knobs_text(knobs):
            return None
        return request.proposal, knobs_text(knobs)

    def _start(self, handover_id: str) -> None:
        self.proc, self.handover_id, self.prepared_for = self.spawn(handover_id), handover_id, None

    def _reap_exited(self) -> None:
        """A standby that exited before it took over: report it ``failed`` (unless it was called off)."""
        if self.proc is None or self.proc.poll() is None:
            return
        code = self.proc.returncode
        if code != EXIT_STANDBY_ABORTED:
            mark_as(self.client, self.job, self.handover_id, state=HandoverState.FAILED,
                    error=f"the standby driver exited with code {code}; see {self.log_path}")
            if self.prepared_for is not None:
                self._failed.add(self.prepared_for)
        _end_in_background(self.proc, grace_s=2.0)
        self.proc, self.handover_id, self.prepared_for = None, "", None

    def take(self) -> subprocess.Popen | None:
        """The standby, which took over after a handover (the keeper lets go of it)."""
        proc, self.proc, self.handover_id, self.prepared_for = self.proc, None, "", None
        return proc

    def retire(self) -> None:
        """Stop the standby (not one that took over: :meth:`take` it first) without waiting."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        _end_in_background(self.proc, grace_s=10.0)
        self.proc, self.handover_id, self.prepared_for = None, "", None


def _end_in_background(proc: subprocess.Popen, grace_s: float) -> None:
    """Reap ``proc`` and end what is left of its process group, in a thread of its own."""
    def end() -> None:
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
        end_process_group(proc.pid, grace_s=0.0, term_wait_s=5.0, kill_wait_s=5.0, what="the standby's process group")
        proc.poll()
    threading.Thread(target=end, name=f"end-standby-{proc.pid}", daemon=True).start()


def prepared_request_holds(client: redis.Redis, job: str, proposal: str, knobs: dict[str, int]) -> bool:
    """The prepared standby's side: whether the web app still asks for a standby for ``proposal``
    with ``knobs`` (a request that does not parse counts as withdrawn)."""
    try:
        request: StandbyRequest | None = read_standby_request(client, job)
    except ProtocolError:
        return False
    return (request is not None and request.action is StandbyAction.PREPARE and request.proposal == proposal
            and all(knobs.get(k) == v for k, v in request.knobs.items()))


class StandbyCost:
    """What this process and its children (the JVM, Python workers) cost: :meth:`reading` gives
    ``rss_mb`` (resident memory, MB) and ``cpu_pct`` (CPU since the last reading, % of one core)."""

    def __init__(self, pid: int | None = None) -> None:
        self.root = psutil.Process(pid or os.getpid())
        self._last: tuple[float, float] | None = None

    def _processes(self) -> list[psutil.Process]:
        try:
            return [self.root, *self.root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def reading(self) -> dict[str, str]:
        """The hash fields ``rss_mb`` and ``cpu_pct`` (the latter empty at the first reading)."""
        rss, cpu = 0.0, 0.0
        for proc in self._processes():
            try:
                with proc.oneshot():
                    rss += proc.memory_info().rss
                    times = proc.cpu_times()
                    cpu += times.user + times.system + times.children_user + times.children_system
            except psutil.Error:
                continue
        now = time.monotonic()
        share = "" if self._last is None or now <= self._last[0] else \
            f"{max(0.0, 100.0 * (cpu - self._last[1]) / (now - self._last[0])):.1f}"
        self._last = (now, cpu)
        return {"rss_mb": f"{rss / 2**20:.0f}", "cpu_pct": share}


class StandbyRole:
    """A standby driver's wait before it owns the checkpoint (a mixin of
    :class:`sparkclient.runner.driver.Driver`, on its ``spark``, ``spec``, ``values``, ``job``,
    ``client``, ``standby``, ``workdir``, ``warm_up_batches``, ``stop_event`` and ``_prepared``)."""

    def _wait_as_standby(self) -> bool:
        """Build the session, warm the JVM up on the pipeline's own plan (on a generic one when it
        cannot run), prepare the query, then wait until the running driver released the checkpoint. A standby prepared
        for a proposal also gives up when the web app no longer asks for it. Returns False (Spark
        stopped) when the handover was called off."""
        self.spark = self._build_session()
        mark_as(self.client, self.job, self.standby, HandoverStep.SESSION)
        if self._standby_executors():
            if not warm_up_pipeline(self.spark, self.spec, self.values, self._session_conf(), self.workdir,
                                    batches=self.warm_up_batches or WARM_UP_BATCHES, stop_event=self.stop_event):
                warm_up(self.spark, self.executors(), self.workdir)  # the pipeline's plan did not run: a generic one
        mark_as(self.client, self.job, self.standby, HandoverStep.WARM)
        # Before the pause: the query's analysis, and the progress listener (py4j's callback server).
        self._prepared = prepare_query(self.spark, self.spec, self.values, self._session_conf())
        self._add_listener()
        mark_as(self.client, self.job, self.standby, HandoverStep.PREPARED)
        hand = self.client.hmget(keys.handover(self.job), "prepared", "proposal")
        still_wanted = None
        if hand[0] == "1":
            proposal, values = hand[1] or "", dict(self.values)
            still_wanted = lambda: prepared_request_holds(self.client, self.job, proposal, values)  # noqa: E731
        log.info("standby %s ready (query %s)", self.standby, "prepared" if self._prepared else "to be built")
        if wait_for_release(self.client, self.job, self.standby, self.stop_event, still_wanted=still_wanted,
                            report=StandbyCost().reading):
            return True
        self.spark.stop()
        return False

    def _standby_executors(self) -> bool:
        """Whether the standby has an executor to warm up on. In local mode it runs the tasks itself.
        On a cluster it asks for the plan's executors only: the cluster manager would otherwise give
        it every core the running driver frees at the handover, so its first batches would run on
        cold executors, and it would hold more than the plan. A cluster whose cores the running
        driver holds gives it none until the handover: it then waits unwarmed (a warm-up's job
        would block until then) rather than for ever."""
        if not self.in_place:
            return True
        if ExecutorScaler(self.spark, min_executors=1).limit_to(self.executors(), wait_s=STANDBY_EXECUTOR_WAIT_S):
            return True
        log.warning("standby %s: no free executor on the cluster within %.0f s (the running driver holds its "
                    "cores); it waits without warming up, and its executors start at the handover",
                    self.standby, STANDBY_EXECUTOR_WAIT_S)
        return False
