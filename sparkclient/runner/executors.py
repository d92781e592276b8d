"""In-place executor scaling of a running application on any cluster manager that supports it.

Standalone (``spark://``), Kubernetes (``k8s://``) and YARN (``yarn``) back ``requestTotalExecutors`` /
``killExecutors``; local mode does not (its cores are ``local[N]``, a new driver). Each needs
``spark.dynamicAllocation.enabled=false`` (dynamic allocation would fight the requested totals) and
one core per executor (``spark.executor.cores=1``) so that executors = cores for the planner. With
``spark.decommission.enabled=true`` executors leave through Spark's graceful decommission
(``decommissionExecutors``: running tasks finish, shuffle and cached blocks migrate when
``spark.storage.decommission.*`` is on) instead of being killed.

The driver's ``SparkContext`` (through py4j: ``sc._jsc.sc()``) is asked for a new executor total,
with dynamic allocation off:

- **up**: ``requestTotalExecutors(n, 0, {})``; the master launches the missing executors;
- **down**: ``killExecutors(ids)`` on chosen executors (which also lowers the target), then
  ``requestTotalExecutors(n, ...)`` so the master does not replace them.

Choosing executors to remove (SPARK-12133's rule for receivers, applied to state stores): an
executor that ran a task of a stateful stage in the newest batch holds loaded state store
partitions, so executors holding none go first, then those holding the fewest, then the idlest.
The count never goes below ``min_executors`` (the executors needed), and a running micro-batch
only loses tasks, which Spark reruns: the query keeps running.

Each change is confirmed on ``/api/v1/applications/<id>/executors`` and timed from the request
to the moment REST shows the new count.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sparkclient.collector.rest import SparkRestClient
from sparkclient.collector.stages import BATCH_STAGE_STATUSES, batch_jobs, batch_stages

log = logging.getLogger(__name__)

__all__ = ["ExecutorChange", "ExecutorScaler", "ExecutorScalingError", "choose_victims",
           "state_executors", "supports_in_place"]

Json = dict[str, Any]


class ExecutorScalingError(RuntimeError):
    """The executor count could not be changed as asked (nothing is retried)."""


@dataclass(frozen=True)
class ExecutorChange:
    """One applied change: ``before`` -> ``after`` active executors, the ids removed, and the
    seconds from the request until ``/executors`` showed ``after``."""

    before: int
    after: int
    removed: tuple[str, ...]
    duration_s: float


def supports_in_place(master: str) -> bool:
    """Whether the cluster manager of ``master`` can change executors while the application runs."""
    return master.startswith(("spark://", "k8s://")) or master.split(":")[0] == "yarn"


def active_executor_ids(executors: Iterable[Mapping[str, Any]]) -> list[str]:
    """Ids of the active non-driver executors in an ``/executors`` list."""
    return [str(e["id"]) for e in executors if e.get("id") != "driver" and e.get("isActive", True)]


def state_executors(task_lists: Iterable[Sequence[Mapping[str, Any]]]) -> dict[str, int]:
    """``{executor id: tasks}`` of stateful-stage tasks (``/stages/<id>/<attempt>/taskList``
    entries) that succeeded: where the state store partitions were loaded last."""
    holders: dict[str, int] = {}
    for tasks in task_lists:
        for task in tasks:
            if task.get("status", "SUCCESS") in ("SUCCESS", "RUNNING") and task.get("executorId") is not None:
                executor = str(task["executorId"])
                holders[executor] = holders.get(executor, 0) + 1
    return holders


def choose_victims(executors: Sequence[Mapping[str, Any]], count: int,
                   state_tasks: Mapping[str, int] | None = None) -> list[str]:
    """The ``count`` executor ids to remove: no state store first, then fewest state partitions,
    then fewest active tasks, then the newest (highest id). Raises ``ValueError`` when there are
    fewer than ``count`` active executors."""
    state_tasks = state_tasks or {}
    active = [e for e in executors if e.get("id") != "driver" and e.get("isActive", True)]
    if count > len(active):
        raise ValueError(f"cannot remove {count} of {len(active)} active executors")

    def order(e: Mapping[str, Any]) -> tuple:
        executor = str(e["id"])
        numeric = int(executor) if executor.isdigit() else -1
        return (state_tasks.get(executor, 0), int(e.get("activeTasks") or 0), -numeric)

    return [str(e["id"]) for e in sorted(active, key=order)[:count]]


class ExecutorScaler:
    """Changes the executor count of the application of ``spark`` (a SparkSession on a standalone
    master, dynamic allocation off) and confirms it on REST (``rest``: a
    :class:`sparkclient.collector.rest.SparkRestClient` on the driver UI; default: one on ``sc.uiWebUrl``).

    ``min_executors``: never go below this (the executors the query needs).
    """

    def __init__(self, spark: Any, *, rest: Any = None, min_executors: int = 1) -> None:
        if min_executors < 1:
            raise ValueError(f"min_executors must be >= 1, got {min_executors}")
        self.spark = spark
        self.sc = spark.sparkContext
        self.min_executors = min_executors
        master = self.sc.master or ""
        if not supports_in_place(master):
            raise ExecutorScalingError(f"in-place executor scaling needs a cluster manager (spark://, k8s://, "
                                       f"yarn), this application runs on {master!r}: local mode changes cores "
                                       "with a new driver")
        if self.sc.getConf().get("spark.dynamicAllocation.enabled", "false").lower() == "true":
            raise ExecutorScalingError("dynamic allocation is on: it would fight the requested totals; "
                                       "start the application with spark.dynamicAllocation.enabled=false")
        if rest is None:
            rest = SparkRestClient(self.sc.uiWebUrl, timeout_s=10.0)
        self.rest = rest
        self.app_id = self.sc.applicationId

    # -- reading ---------------------------------------------------------------------------

    def executors(self) -> list[Json]:
        """``/executors`` of the application."""
        return self.rest.executors(self.app_id)

    def active(self) -> list[str]:
        """Active executor ids, from REST."""
        return active_executor_ids(self.executors())

    def state_holders(self, stateful_stage_ids: Iterable[tuple[int, int]]) -> dict[str, int]:
        """``{executor: tasks}`` of the given stateful stage attempts ``(stage id, attempt)``."""
        lists = [self.rest.get(f"applications/{self.app_id}/stages/{sid}/{att}/taskList", {"length": 10000})
                 for sid, att in stateful_stage_ids]
        return state_executors(lists)

    def newest_state_holders(self, run_id: str) -> dict[str, int]:
        """State holders (see :meth:`state_holders`) of the last stage of the newest batch of query
        run ``run_id`` whose stages REST lists; ``{}`` when there is none yet."""
        by_batch = batch_jobs(self.rest.jobs(self.app_id, "succeeded"), run_id)
        if not by_batch:
            return {}
        stages = self.rest.stages(self.app_id, BATCH_STAGE_STATUSES)
        for batch_id in sorted(by_batch, reverse=True):
            ordered, missing = batch_stages(by_batch[batch_id], stages)
            if ordered and not missing:
                last = ordered[-1]
                return self.state_holders([(int(last["stageId"]), int(last.get("attemptId", 0)))])
        return {}

    # -- changing --------------------------------------------------------------------------

    def _request_total(self, total: int) -> bool:
        jvm = self.sc._jvm
        empty = jvm.org.apache.spark.api.python.PythonUtils.toScalaMap(jvm.java.util.HashMap())
        return bool(self.sc._jsc.sc().requestTotalExecutors(total, 0, empty))

    def limit_to(self, total: int, *, wait_s: float, poll_s: float = 0.5) -> bool:
        """Ask for ``total`` executors without waiting for them all, so that the cluster manager never
        gives the application more (it fills ``spark.cores.max`` until asked otherwise); then whether
        one is active within ``wait_s`` seconds (a cluster whose cores other applications hold gives
        none). Raises ``ExecutorScalingError`` when Spark refuses the request."""
        if not self._request_total(max(total, self.min_executors)):
            raise ExecutorScalingError(f"Spark refused the request for {total} executors")
        deadline = time.monotonic() + wait_s
        while not self.active():
            if time.monotonic() >= deadline:
                return False
            time.sleep(poll_s)
        return True

    @property
    def graceful(self) -> bool:
        """Whether executors leave through graceful decommission (``spark.decommission.enabled``)."""
        return self.sc.getConf().get("spark.decommission.enabled", "false").lower() == "true"

    def _kill(self, ids: Sequence[str]) -> bool:
        jvm = self.sc._jvm
        if self.graceful:  # ExecutorAllocationClient.decommissionExecutors (SPARK-20624)
            info = jvm.org.apache.spark.scheduler.ExecutorDecommissionInfo("sparkscaler rescale",
                                                                           jvm.scala.Option.apply(None))
            pairs = [jvm.scala.Tuple2(str(executor), info) for executor in ids]
            array = self.sc._gateway.new_array(jvm.scala.Tuple2, len(pairs))
            for i, pair in enumerate(pairs):
                array[i] = pair
            backend = self.sc._jsc.sc().schedulerBackend()
            return int(backend.decommissionExecutors(array, True, False).size()) == len(ids)
        java_ids = jvm.java.util.ArrayList()
        for executor in ids:
            java_ids.add(str(executor))
        seq = jvm.org.apache.spark.api.python.PythonUtils.toSeq(java_ids)
        return bool(self.sc._jsc.sc().killExecutors(seq))

    def wait_for(self, total: int, timeout_s: float, poll_s: float = 0.25) -> list[str]:
        """Wait until REST shows ``total`` active executors; returns their ids.

        Raises ``ExecutorScalingError`` after ``timeout_s`` seconds with what REST shows."""
        deadline = time.monotonic() + timeout_s
        ids: list[str] = []
        while time.monotonic() < deadline:
            ids = self.active()
            if len(ids) == total:
                return ids
            time.sleep(poll_s)
        raise ExecutorScalingError(f"/executors shows {len(ids)} active executors {ids}, not {total}, "
                                   f"{timeout_s:.0f} s after the request; check the master UI for free cores "
                                   "and memory on the workers")

    def trim_to(self, total: int) -> tuple[str, ...]:
        """Remove the active executors above ``total``, if any (:meth:`scale_to`): the master launches
        one per free core when an application starts, and one that registers after the driver asked
        for its total stays, so the application would hold more than its plan. Returns the removed ids."""
        if len(self.active()) <= total:
            return ()
        return self.scale_to(total).removed

    def scale_to(self, total: int, *, state_tasks: Mapping[str, int] | None = None,
                 timeout_s: float = 120.0) -> ExecutorChange:
        """Set the active executor count to ``total`` (see the module docstring).

        ``state_tasks``: ``{executor: stateful tasks}`` (see :meth:`state_holders`) to keep the
        state-holding executors. Raises ``ExecutorScalingError`` below ``min_executors``, when
        Spark refuses, or when REST does not show ``total`` within ``timeout_s`` seconds.
        """
        if total < self.min_executors:
            raise ExecutorScalingError(f"{total} executors is below the {self.min_executors} this query needs")
        started = time.monotonic()
        executors = self.executors()
        current = active_executor_ids(executors)
        removed: list[str] = []
        if total < len(current):
            removed = choose_victims(executors, len(current) - total, state_tasks)
            log.info("removing executors %s (state tasks %s)", removed, dict(state_tasks or {}))
            if not self._kill(removed):
                raise ExecutorScalingError(f"Spark refused to kill executors {removed}")
        if not self._request_total(total):
            raise ExecutorScalingError(f"Spark refused the request for {total} executors")
        self.wait_for(total, timeout_s)
        change = ExecutorChange(before=len(current), after=total, removed=tuple(removed),
                                duration_s=time.monotonic() - started)
        log.info("executors %d -> %d in %.2f s", change.before, change.after, change.duration_s)
        return change
