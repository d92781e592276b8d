"""Applying one rescale command: the paths of :mod:`sparkclient.runner.driver`'s module docstring.

:class:`RescalePaths` is the part of :class:`sparkclient.runner.driver.Driver` that checks a command and
takes its path: nothing to change, executors in place, an offline state repartition, a restart in
process, or a warm handover to a standby driver. It runs on the driver's state, which
:class:`~sparkclient.runner.driver.Driver` sets up: ``spec``, ``job``, ``client``, ``capacity``,
``in_place``, ``master``, ``spark_conf``, ``values``, ``spark``, ``query``, ``checkpoint``, ``lease``,
``executor_scaler``, ``executors_knob``, ``shuffle_knob``, ``stop_event``, ``first_batch`` and the
methods ``executors``, ``_write_result`` and ``_start_query``.

A memory knob's change (the heap, the executors' overhead on a cluster, the RocksDB state memory)
always takes the new-driver path (the warm handover), in local mode and on a cluster alike: what it
sets is fixed when a JVM starts (:mod:`sparkclient.contract.sparkconf`), so neither a restart of the
query nor executors added in place would run on it.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from sparkclient.collector.progress import ran_a_batch
from sparkclient.contract import control, keys
from sparkclient.contract.binding import PinReason, offline_repartition_blocker
from sparkclient.contract.messages import (
    FailureCode,
    RescaleCommand,
    RescalePath,
    RescaleResult,
    ResultStatus,
    RunnerState,
    StandbyUse,
    StatusUpdate,
)
from sparkclient.contract.sparkconf import effective_memory_knobs, launch_settings
from sparkclient.contract.spec import KnobError, validate_values
from sparkclient.contract.standby import HandoverState
from sparkclient.runner.handover import (
    HANDOVER_READY_TIMEOUT_S,
    HandoverStep,
    mark,
    pending_of,
    read_pending,
    record_pending,
    request_standby,
)
from sparkclient.runner.procgroup import yield_cpu
from sparkclient.runner.session import (
    BATCH_WAIT_TIMEOUT_S,
    LoggedBatchError,
    checkpoint_has_state,
    finish_logged_batch,
    progress_dict,
    stop_between_batches,
)
from sparkclient.runner.staterepartition import StateRepartitionError, checkpoint_info, repartition_state

log = logging.getLogger("sparkclient.runner.driver")

__all__ = ["EXIT_HANDED_OVER", "RescalePaths"]

#: Driver exit code after a warm handover: the standby driver has taken over.
EXIT_HANDED_OVER = 76


class RescalePaths:
    """Check a rescale command and apply it along its path (a mixin of :class:`sparkclient.runner.driver.Driver`)."""

    spec: Any
    job: str
    client: Any
    capacity: int
    in_place: bool
    master: str
    spark_conf: dict[str, str]
    values: dict[str, int]

    def launch_conf(self) -> dict[str, str]:
        """The settings this driver's JVM starts with: its memory knobs'
        (:func:`sparkclient.contract.sparkconf.launch_settings`; ``{}`` without one).

        Raises:
            KnobError: the operator's ``--conf`` sets the same key (the supervisor refuses it first).
        """
        return launch_settings(self.spec.knobs, self.values, master=self.master, operator_conf=self.spark_conf)

    def memory_changes(self, old: dict[str, int], new: dict[str, int]) -> bool:
        """Whether ``new`` changes a memory knob that sets anything under this master (then only a
        new driver applies it: :func:`sparkclient.contract.sparkconf.effective_memory_knobs`)."""
        return any(new[k.name] != old[k.name] for k in effective_memory_knobs(self.spec.knobs, master=self.master))

    def check(self, command: RescaleCommand) -> RescaleResult | dict[str, int]:
        """The command's knob values, or the failure that refuses it before anything stops."""
        try:
            new = validate_values(self.spec.knobs, command.knobs)
        except KnobError as exc:
            return RescaleResult.failed(command.id, FailureCode.OUT_OF_BOUNDS, str(exc), knobs=self.values)
        if self.capacity and self.executors(new) > self.capacity:
            return RescaleResult.failed(
                command.id, FailureCode.ABOVE_CAPACITY, knobs=self.values,
                error=f"{self.executors(new)} executors exceed the cluster's capacity of {self.capacity}")
        return new

    def _rescale(self, command: RescaleCommand) -> int | None:
        """Check the command, then take its path: nothing to change, executors in place, or a
        restart of the query (in process, or a new driver). Returns an exit code when the driver
        must exit (a handover)."""
        checked = self.check(command)
        if isinstance(checked, RescaleResult):
            self._write_result(checked)
            return None
        new, old = checked, dict(self.values)
        if new == old:
            self._nothing_to_change(command, new)
            return None
        repartition = self._needs_repartition(old, new)
        if repartition and not self._can_repartition(command, old):
            return None
        executors_changed = self.executors(new) != self.executors(old)
        memory_changes = self.memory_changes(old, new)
        if self.in_place and executors_changed and not memory_changes:
            old = self._scale_executors_in_place(command, old, new)
            if old is None or new == old:  # failed, or only the executors changed: the query never stopped
                return None
        return self._restart(command, old, new, repartition=repartition,
                             new_driver=memory_changes or (executors_changed and not self.in_place))

    def _nothing_to_change(self, command: RescaleCommand, values: dict[str, int]) -> None:
        """``command`` asks for the running ``values``: it succeeded with nothing to change only once a
        batch of the running query completed on them. Until then the first batch of this run answers
        it (:class:`FirstBatchWatch`), or, none within its timeout, a ``no-first-batch`` failure."""
        if any(ran_a_batch(progress_dict(p)) for p in (self.query.recentProgress or [])):
            self._write_result(RescaleResult(id=command.id, status=ResultStatus.SUCCEEDED,
                                             path=RescalePath.NONE, knobs=values, standby=StandbyUse.NONE))
            return
        self.first_batch.expect(command_id=command.id, path=RescalePath.NONE, knobs=values,
                                requested_at=time.time(), last_batch_end=None, old_run_id=None)

    def leave_to_next_driver(self, command: RescaleCommand, error: BaseException, *, taken_at: float) -> None:
        """An error escaped ``command``'s path and this driver dies (its JVM is gone, say): make sure the
        command gets an answer. A checked command that needs no offline repartition becomes a pending
        driver restart (``knobs`` stored), so the driver the supervisor starts next runs with its knobs and
        that driver's first batch finishes it; downtime counts from the last batch published
        (``last_batch_at``, epoch s), else from ``taken_at`` (epoch s). Any other command fails with
        ``driver-crashed`` and ``error``. Nothing is written when a rescale is already pending (a handover
        released the checkpoint) or the command has its result."""
        if read_pending(self.client, self.job) is not None or control.get_result(self.client, self.job, command.id):
            return
        checked = self.check(command)
        if isinstance(checked, RescaleResult):
            self._write_result(checked)
            return
        if self._needs_repartition(self.values, checked):
            died = f"{type(error).__name__}: {error}"[:1000]
            self._write_result(RescaleResult.failed(command.id, FailureCode.DRIVER_CRASHED, knobs=self.values,
                                                    error=f"the driver died while applying it: {died}"))
            return
        last_batch = control.read_status(self.client, self.job).last_batch_at or None
        pending = pending_of(command, RescalePath.DRIVER_RESTART, checked, requested_at=taken_at,
                             last_batch_end=last_batch)
        record_pending(self.client, self.job, pending, checked)
        log.warning("command %s: the driver dies (%s: %s); the next driver starts with %s and finishes it",
                    command.id, type(error).__name__, error, checked)

    def _needs_repartition(self, old: dict[str, int], new: dict[str, int]) -> bool:
        """Whether the shuffle knob changes on a checkpoint that holds state (its partitions are
        pinned, :func:`sparkclient.runner.session.checkpoint_has_state`). A stateless query's shuffle knob
        changes with a restart of the query inside the running driver."""
        shuffle = self.shuffle_knob.name if self.shuffle_knob else None
        return bool(shuffle and new[shuffle] != old[shuffle] and self.checkpoint
                    and checkpoint_has_state(self.checkpoint))

    def sink_class(self) -> str | None:
        """The running query's sink class (simple name, e.g. ``FileStreamSink``), or None when it
        cannot be read (no query, or py4j refused)."""
        try:
            return str(self.query._jsq.streamingQuery().sink().getClass().getSimpleName())
        except Exception:  # noqa: BLE001 - unknown is None: the runner then decides on the provider alone
            return None

    def _can_repartition(self, command: RescaleCommand, old: dict[str, int]) -> bool:
        """Whether the checkpoint's state can be repartitioned offline
        (:func:`sparkclient.contract.binding.offline_repartition_blocker`: RocksDB state, and a sink without a
        batch log of its own); fails the command while the query still runs (nothing stopped) when
        it cannot."""
        provider, sink = checkpoint_info(self.checkpoint).provider, self.sink_class()
        blocker = offline_repartition_blocker(provider, sink)
        if blocker is None:
            return True
        shuffle = self.shuffle_knob.name
        why = (f"its state store provider {provider} cannot be repartitioned offline (RocksDB only)"
               if blocker is PinReason.STATE_STORE else
               f"the query's {sink} keeps its own batch log, which the offline repartition's extra batch "
               "would leave with a hole (the sink then fails at its next compaction)")
        self._write_result(RescaleResult.failed(
            command.id, FailureCode.STATE_NOT_REPARTITIONABLE, knobs=old,
            error=(f"{shuffle} is pinned by the checkpoint ({old[shuffle]}): {why}; keep {shuffle}="
                   f"{old[shuffle]} or start from a new checkpoint")))
        return False

    def _scale_executors_in_place(self, command: RescaleCommand, old: dict[str, int],
                                  new: dict[str, int]) -> dict[str, int] | None:
        """Change the executors while the query runs. Returns the knob values now in effect (``old``
        with the new executors), or None with the command failed. Writes the result when only the
        executors changed."""
        try:
            change = self.executor_scaler.scale_to(
                self.executors(new), state_tasks=self.executor_scaler.newest_state_holders(str(self.query.runId)))
        except Exception as exc:  # noqa: BLE001 - report; the query keeps running as it was
            self._write_result(RescaleResult.failed(command.id, FailureCode.EXECUTOR_CHANGE_FAILED,
                                                    f"changing the executors failed: {exc}",
                                                    path=RescalePath.IN_PLACE, knobs=old))
            return None
        old = dict(old)
        old[self.executors_knob.name] = self.executors(new)
        self._commit_values(old)
        if new == old:
            self._write_result(RescaleResult(id=command.id, status=ResultStatus.SUCCEEDED,
                                             path=RescalePath.IN_PLACE, knobs=new,
                                             executor_change_s=change.duration_s, first_batch_at=time.time(),
                                             standby=StandbyUse.NONE))
        return old

    def _commit_values(self, values: dict[str, int]) -> None:
        self.values = dict(values)
        self.client.set(keys.config(self.job), json.dumps(self.values, sort_keys=True))
        control.write_status(self.client, self.job, StatusUpdate(knobs=self.values))

    def _request_standby(self, command: RescaleCommand, old: dict[str, int],
                         new: dict[str, int]) -> StandbyUse | None:
        """Take the standby prepared with ``new``, else ask the supervisor for one, and wait until it is
        ready (the query keeps running meanwhile). Returns which standby it is (ready or still starting
        when the command came, or started for it); None, with the command failed, when it is not ready."""
        log.info("command %s: waiting for a standby driver with %s", command.id, new)
        use, error = request_standby(self.client, self.job, command.id, new, self.stop_event,
                                     HANDOVER_READY_TIMEOUT_S)
        if error is None:
            log.info("command %s: standby driver ready (%s)", command.id, use.value)
            return use
        self._write_result(RescaleResult.failed(
            command.id, FailureCode.RESTART_FAILED, knobs=old, path=RescalePath.DRIVER_HANDOVER,
            error=f"the new driver did not start ({error}); the running driver carries on unchanged"))
        return None

    def _restart(self, command: RescaleCommand, old: dict[str, int], new: dict[str, int], *,
                 repartition: bool, new_driver: bool) -> int | None:
        """Stop the query at a batch boundary and start it again with ``new``: after an offline state
        repartition when ``repartition``, in a standby driver when ``new_driver`` (the standby is
        ready before anything stops), else in this process."""
        standby = self._request_standby(command, old, new) if new_driver else StandbyUse.NONE
        if standby is None:
            return None
        requested_at = time.time()
        control.write_status(self.client, self.job, StatusUpdate(state=RunnerState.RESTARTING))
        old_run_id = str(self.query.runId)
        last_end = stop_between_batches(self.query, timeout_s=BATCH_WAIT_TIMEOUT_S)
        if repartition:
            done, last_end = self._repartition_offline(command, old, new, last_end)
            if not done:
                return None
        if new_driver:
            return self._hand_over(command, new, requested_at=requested_at, last_end=last_end, standby=standby)
        return self._restart_in_process(command, old, new, requested_at=requested_at, last_end=last_end,
                                        old_run_id=old_run_id,
                                        path=RescalePath.STATE_REPARTITION if repartition else RescalePath.IN_PROCESS)

    def _repartition_offline(self, command: RescaleCommand, old: dict[str, int], new: dict[str, int],
                             last_end: float | None) -> tuple[bool, float | None]:
        """Repartition the stopped query's state to the new shuffle partitions, after completing the
        batch the stop left logged without a commit (:func:`finish_logged_batch`: one batch, not a
        wait for an idle trigger). Returns (done, the last batch's end, epoch s). On failure the
        command fails and the query starts again as it was (the checkpoint is unchanged)."""
        try:
            if not checkpoint_info(self.checkpoint).committed:
                started = time.monotonic()
                last_end = finish_logged_batch(self.spark, self.spec, old, self._session_conf()) or last_end
                log.info("command %s: completed the logged batch in %.2f s", command.id, time.monotonic() - started)
            done = repartition_state(self.spark, self.checkpoint, new[self.shuffle_knob.name])
        except (StateRepartitionError, LoggedBatchError, ValueError) as exc:
            self._write_result(RescaleResult.failed(command.id, FailureCode.REPARTITION_FAILED,
                                                    f"offline state repartition failed: {exc}",
                                                    path=RescalePath.STATE_REPARTITION, knobs=old))
            self.query = self._start_query()
            return False, last_end
        log.info("command %s: state repartitioned %d -> %d in %.2f s", command.id, done.from_partitions,
                 done.to_partitions, done.duration_s)
        return True, last_end

    def _hand_over(self, command: RescaleCommand, new: dict[str, int], *, requested_at: float,
                   last_end: float | None, standby: StandbyUse) -> int:
        """Record the command as pending (the standby's first batch finishes it, reporting ``standby``),
        release the checkpoint to the standby and return :data:`EXIT_HANDED_OVER`."""
        pending = pending_of(command, RescalePath.DRIVER_HANDOVER, new, requested_at=requested_at,
                             last_batch_end=last_end, standby=standby)
        record_pending(self.client, self.job, pending, new)
        self.lease.release()  # the query is stopped: the standby may take the checkpoint now
        mark(self.client, self.job, HandoverStep.RELEASED, state=HandoverState.RELEASED)
        yield_cpu()  # this driver's shutdown must not slow the new driver's first batches
        log.info("command %s: handed over to the standby driver with %d executors", command.id, self.executors(new))
        return EXIT_HANDED_OVER

    def _restart_in_process(self, command: RescaleCommand, old: dict[str, int], new: dict[str, int], *,
                            requested_at: float, last_end: float | None, old_run_id: str,
                            path: RescalePath = RescalePath.IN_PROCESS) -> None:
        """Start the query again with ``new`` from the same checkpoint; its first batch finishes the
        command, reported as ``path`` (``state-repartition`` after an offline state repartition).
        When it does not start, the command fails and the query runs with ``old`` again."""
        self.first_batch.expect(command_id=command.id, path=path, knobs=new,
                                requested_at=requested_at, last_batch_end=last_end, old_run_id=old_run_id)
        self.values = dict(new)
        try:
            self.query = self._start_query()
        except Exception as exc:  # noqa: BLE001 - report, then go back to the old knobs
            self.first_batch.forget()
            self._write_result(RescaleResult.failed(command.id, FailureCode.RESTART_FAILED,
                                                    f"restarting the query with {new} failed: {exc}",
                                                    path=path, knobs=old))
            self.values = old
            self.query = self._start_query()
            return
        self._commit_values(new)
