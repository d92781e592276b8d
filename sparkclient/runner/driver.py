"""The Spark driver of a pipeline run: builds the query, applies control commands, measures downtime.

Started by the supervisor (:mod:`sparkclient.runner.supervisor`) as ``python -m sparkclient run --driver ...``.
The pipeline is any module honouring :mod:`sparkclient.contract.spec`; the knob values live in Redis
``ss:config:{job}`` (a JSON object ``{knob: int}``), the status in ``ss:runner:{job}`` and the control
channel is :mod:`sparkclient.contract.control`.

A rescale command carries the full set of knob values. It is checked before anything stops (every
knob inside its bounds, executors within the cluster's capacity) and then applied along one path:

- **in place** (a cluster manager, only the ``executors`` knob changed): :class:`ExecutorScaler`
  while the query runs; ``downtime_s`` 0;
- **in process** (partitions): stop the query at a batch boundary, then ``build(spark, knobs)`` again
  from the same checkpoint. A changed ``shuffle_partitions``/``state_partitions`` knob on a checkpoint
  that has run a batch repartitions it offline in between (:mod:`sparkclient.runner.staterepartition`,
  RocksDB only; any other provider is refused before the query stops);
- **warm driver handover** (local mode's ``local[N]``, a ``memory`` knob, any static setting): the supervisor starts a
  *standby* driver with the new knobs while the query keeps running; once the standby has built its
  SparkSession and warmed its JVM up, the running driver stops the query at a batch boundary, records
  ``ss:runner:{job}:pending``, releases the checkpoint lease (:mod:`sparkclient.runner.lease`) and exits with
  :data:`EXIT_HANDED_OVER`; the standby takes the lease and starts the query at once, and its first
  batch finishes the command. A standby that fails to start leaves the running driver as it was, and
  the command fails cleanly (``restart-failed``).

Downtime = end of the first batch after the restart minus end of the last batch before the stop, s;
pause = start of that first batch minus the same end (the time no batch ran).

A command's ``idempotency_key`` is applied once: a succeeded apply is kept with its key in the
workdir (:mod:`sparkclient.runner.applied`) before its result goes to Redis, and a repeat is answered
with that first result (``replay_of``) without touching the query.

This module is the driver's life: start, serve the control channel, stop. The rest lives by job:
:mod:`sparkclient.runner.rescale` (check a command, take its path), :mod:`sparkclient.runner.session` (the
SparkSession and the query), :mod:`sparkclient.runner.handover` (the handover's protocol over Redis),
:mod:`sparkclient.runner.firstbatch` (a restart's first batch finishes its command) and
:mod:`sparkclient.runner.lease` (one driver per checkpoint).
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
import time
from pathlib import Path
from typing import Any

import redis

from sparkclient.collector.progress import ran_a_batch
from sparkclient.contract import control, keys
from sparkclient.contract.binding import plan_stages_of, plan_stages_to_json, with_state_store
from sparkclient.contract.messages import (
    FailureCode,
    ProtocolError,
    RescaleCommand,
    RescalePath,
    RescaleResult,
    RunnerState,
    StandbyUse,
    StatusUpdate,
)
from sparkclient.contract.sparkconf import session_settings
from sparkclient.contract.spec import KnobTarget, PipelineSpec, knobs_to_json, validate_values
from sparkclient.runner.applied import AppliedKeys
from sparkclient.runner.driverlog import query_failure
from sparkclient.runner.executors import ExecutorScaler, supports_in_place
from sparkclient.runner.firstbatch import FIRST_BATCH_TIMEOUT_S, FirstBatchWatch
from sparkclient.runner.handover import keep_timings, pending_of, pending_standby, read_pending, record_pending
from sparkclient.runner.lease import LEASE_TTL_S, CheckpointLease
from sparkclient.runner.progress import RedisProgressListener
from sparkclient.runner.rescale import RescalePaths
from sparkclient.runner.session import (
    build_session,
    checkpoint_has_state,
    start_query,
)
from sparkclient.runner.standby import EXIT_STANDBY_ABORTED, StandbyRole
from sparkclient.runner.staterepartition import StateRepartitionError, checkpoint_info

log = logging.getLogger(__name__)

__all__ = ["EXIT_RESTART", "Driver", "load_knob_values"]

#: Driver exit code asking the supervisor for an immediate restart (EX_TEMPFAIL).
EXIT_RESTART = 75
#: How often a driver on a cluster checks that it holds no more executors than its plan, seconds.
TRIM_EVERY_S = 5.0


def load_knob_values(client: redis.Redis, job: str, spec: PipelineSpec) -> dict[str, int] | None:
    """The job's stored knob values (``ss:config:{job}``), checked against ``spec``; None when absent.

    Raises:
        sparkclient.contract.spec.KnobError: the stored values do not fit the pipeline's knobs.
    """
    raw = client.get(keys.config(job))
    if raw is None:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        data = None
    return validate_values(spec.knobs, data if isinstance(data, dict) else {"(stored config)": raw})


class Driver(RescalePaths, StandbyRole):
    """Runs ``spec``'s query for ``job`` and serves its control channel.

    Args:
        spec: the loaded pipeline.
        job: the job name (Redis keys, Spark app name).
        redis_url: the control channel's Redis, password in the URL.
        workdir: the run's work directory (``run_context().workdir``) and driver log.
        master: ``local`` (``local[executors]``) or a cluster manager URL.
        capacity: the most executors the cluster can give (local: the host's cores).
        standby: the handover id when this driver is a standby (see the module docstring).
        spark_conf: extra SparkSession settings (``--conf``).
        first_batch_timeout_s: how long a rescale waits for its first batch, seconds from its command
            (``--first-batch-timeout``, :class:`FirstBatchWatch`).
    """

    def __init__(self, *, spec: PipelineSpec, job: str, redis_url: str, workdir: Path, ui_port: int,
                 master: str, capacity: int, standby: str | None = None,
                 spark_conf: dict[str, str] | None = None, warm_up_batches: int | None = None,
                 first_batch_timeout_s: float = FIRST_BATCH_TIMEOUT_S) -> None:
        self.spec, self.job, self.redis_url, self.ui_port = spec, job, redis_url, ui_port
        self.warm_up_batches = warm_up_batches  # None: the runner's default (the standby's warm-up)
        self.workdir, self.master, self.capacity, self.standby = workdir, master, capacity, standby
        self.spark_conf = dict(spark_conf or {})
        self.in_place = supports_in_place(master)
        self.client = control.connect(redis_url)
        if standby:  # the knobs of the handover this standby driver is for
            values = validate_values(spec.knobs, json.loads(self.client.hget(keys.handover(job), "knobs") or "{}"))
        else:
            values = load_knob_values(self.client, job, spec)
        if values is None:
            values = validate_values(spec.knobs, {})
            self.client.set(keys.config(job), json.dumps(values))
        self.values = values
        self.lease = CheckpointLease(self.client, job, on_lost=self._lease_lost)
        self.executors_knob = spec.knob(KnobTarget.EXECUTORS)
        self.shuffle_knob = next((k for k in spec.knobs if k.sets.session_conf), None)
        self.stop_event = threading.Event()
        self.commands: queue.Queue[tuple[str, dict[str, str]]] = queue.Queue()
        self.first_batch = FirstBatchWatch(self._write_result, first_batch_timeout_s)
        self._pending_id: str | None = None  # the pending rescale (ss:runner:{job}:pending) this driver finishes
        self._log_from = _size(workdir / "driver.log")  # where this driver's lines of the driver log start
        self.applied = AppliedKeys.in_workdir(workdir)
        self._in_flight: dict[str, tuple[str, dict[str, int]]] = {}  # command id -> (idempotency key, knobs)
        self._published_run: str | None = None
        self.spark: Any = None
        self.query: Any = None
        self.checkpoint: Path | None = None
        self.executor_scaler: Any = None
        self._trim_at = 0.0  # when _trim_executors looks next (time.monotonic)
        self.lease_lost = False
        self._prepared: Any = None  # a standby's prepared start (sparkclient.runner.session.prepare_query)
        self._listening = False

    # results --------------------------------------------------------------------------------

    def _write_result(self, result: RescaleResult) -> None:
        """Write a command's result; a succeeded one is first kept with its idempotency key (in the
        workdir, :mod:`sparkclient.runner.applied`), so a repeat is answered with it even when this
        write is lost."""
        key, knobs = self._in_flight.pop(result.id, ("", {}))
        try:
            self.applied.record(key, knobs, result)
        except OSError:
            log.exception("command %s: keeping its idempotency key %r failed", result.id, key)
        control.write_result(self.client, self.job, result)
        log.info("command %s: %s", result.id, result.to_json())

    def executors(self, values: dict[str, int] | None = None) -> int:
        values = values or self.values
        return values[self.executors_knob.name] if self.executors_knob else 1

    # spark ----------------------------------------------------------------------------------

    def _session_conf(self) -> dict[str, str]:
        """The session settings of the shuffle knob (:func:`sparkclient.contract.sparkconf.session_settings`)."""
        return session_settings(self.spec.knobs, self.values, self.spark_conf)

    def _build_session(self) -> Any:
        return build_session(job=self.job, workdir=self.workdir, redis_url=self.redis_url, master=self.master,
                             executors=self.executors(), ui_port=self.ui_port, in_place=self.in_place,
                             capacity=self.capacity, spark_conf=self.spark_conf, session_conf=self._session_conf(),
                             launch_conf=self.launch_conf())

    def _start_query(self) -> Any:
        prepared, self._prepared = self._prepared, None
        started = start_query(self.spark, self.spec, self.values, self._session_conf(), prepared=prepared)
        query, self.checkpoint = started.query, started.checkpoint
        control.write_status(self.client, self.job, StatusUpdate(
            state=RunnerState.RUNNING, query_name=query.name or "", query_id=str(query.id), run_id=str(query.runId),
            knobs=self.values, error="", checkpoint=str(self.checkpoint),
            trigger_interval_s=started.trigger_interval_s, plan_stages=""))
        log.info("query %s started: run %s, knobs %s", query.name, query.runId, self.values)
        return query

    # progress / downtime ----------------------------------------------------------------------

    def _on_progress(self, progress: dict[str, Any]) -> None:
        """A progress of the query: publish the plan's stages once per run, and finish the rescale
        waiting for its first batch (:class:`sparkclient.runner.firstbatch.FirstBatchWatch`)."""
        if not ran_a_batch(progress):
            return
        query = self.query
        if query is not None and progress.get("runId") == str(query.runId) and self._published_run != progress["runId"]:
            self._published_run = progress["runId"]
            try:  # the plan's stages, for the stage <-> knob binding (sparkclient.contract.binding)
                stages = with_state_store(plan_stages_of(query) or (), self._state_store(), self.sink_class())
                control.write_status(self.client, self.job, StatusUpdate(plan_stages=plan_stages_to_json(stages)))
            except Exception:  # noqa: BLE001 - no plan means "unverified", never a wrong binding
                log.exception("could not read the physical plan of run %s", progress["runId"])
        self._finished(self.first_batch.on_batch(progress))

    def _finished(self, awaited: Any) -> None:
        """``awaited`` (a :class:`sparkclient.runner.firstbatch.AwaitedRescale`, or None) has its result:
        when it is the pending rescale this driver took over, the pending record goes."""
        if awaited is not None and awaited.id == self._pending_id:
            self._pending_id = None
            self.client.delete(keys.runner_pending(self.job))

    def _state_store(self) -> str | None:
        """The state store provider the checkpoint holds state in (it pins the stateful stages'
        partitions), or None when it holds none or cannot be read (a checkpoint that is not local)."""
        if not self.checkpoint or not checkpoint_has_state(self.checkpoint):
            return None
        try:
            return checkpoint_info(self.checkpoint).provider
        except (StateRepartitionError, OSError, ValueError):
            log.warning("could not read the state store provider of checkpoint %s", self.checkpoint, exc_info=True)
            return None

    # control channel --------------------------------------------------------------------------

    def _control_loop(self) -> None:
        client = redis.Redis.from_url(self.redis_url, decode_responses=True)
        cursor = client.get(keys.control_cursor(self.job)) or "0-0"
        while not self.stop_event.is_set():
            try:
                response = client.xread({keys.control(self.job): cursor}, block=500, count=10)
            except redis.RedisError:
                log.exception("reading the control stream failed; retrying")
                self.stop_event.wait(1.0)
                continue
            for _stream, entries in response or []:
                for entry_id, fields in entries:
                    self.commands.put((entry_id, fields))
                    cursor = entry_id

    def _handle(self, entry_id: str, fields: dict[str, str]) -> int | None:
        """Apply one control command; returns an exit code when the driver must exit."""
        try:
            try:
                command = RescaleCommand.from_json(fields.get("json"))
            except ProtocolError as exc:
                raw_id = RescaleCommand.id_of(fields.get("json"))
                log.error("malformed control entry %s: %s", entry_id, exc)
                if raw_id is not None:
                    self._write_result(RescaleResult.failed(raw_id, FailureCode.MALFORMED_COMMAND, str(exc),
                                                            knobs=self.values))
                return None
            if control.get_result(self.client, self.job, command.id) is not None:
                return None
            replay = self.applied.answer(command, self.values)
            if replay is not None:  # its key was applied: answer with the first result, touch nothing
                self._write_result(replay)
                return None
            self._in_flight[command.id] = (command.idempotency_key, dict(command.knobs))
            taken_at = time.time()
            try:
                return self._rescale(command)
            except Exception as exc:
                self.leave_to_next_driver(command, exc, taken_at=taken_at)
                raise
        finally:
            self.client.set(keys.control_cursor(self.job), entry_id)

    def _lease_lost(self) -> None:
        """The checkpoint lease could not be renewed: another driver may own the checkpoint now, so
        this one stops its query at once and exits (the supervisor restarts it, and it waits for the lease)."""
        self.lease_lost = True
        query = self.query
        if query is not None:
            try:
                query.stop()
            except Exception:  # noqa: BLE001 - stopping is all that matters
                log.exception("stopping the query after the lease was lost failed")
        self.stop_event.set()

    def _resume_pending(self) -> None:
        """A rescale recorded as pending by the driver before (a handover or a driver restart): this
        driver's first batch finishes it, unless its result is already written."""
        pending = read_pending(self.client, self.job)
        if pending is None:
            return
        if control.get_result(self.client, self.job, pending["id"]) is None:
            self._in_flight[pending["id"]] = (str(pending.get("idempotency_key") or ""),
                                              dict(pending.get("command_knobs") or self.values))
            self._pending_id = pending["id"]
            self.first_batch.expect(command_id=pending["id"], path=RescalePath(pending.get("path", "driver-restart")),
                                    knobs=self.values, requested_at=pending.get("requested_at", time.time()),
                                    last_batch_end=pending.get("last_batch_end_epoch_s"), old_run_id=None,
                                    standby=pending_standby(pending) if self.standby else None,
                                    causes=tuple(str(c) for c in pending.get("causes") or ()))
            self._finished(self.first_batch.check_timeout())  # its deadline may have passed in the drivers before
        else:
            self.client.delete(keys.runner_pending(self.job))

    def _carry_over(self, error: BaseException) -> None:
        """The query failed (``error``), or did not start, and this driver dies: the rescale waiting for
        its first batch rides along to the next driver as the pending rescale (its path, knobs,
        deadline and the last batch on the old configuration kept), with the failure among its causes
        (the root cause the driver log names, else ``error``)."""
        cause = query_failure(self.workdir / "driver.log", since=self._log_from) or f"{type(error).__name__}: {error}"
        awaited = self.first_batch.carry_over(cause)
        if awaited is None:
            return
        key, command_knobs = self._in_flight.pop(awaited.id, ("", awaited.knobs))
        command = RescaleCommand(id=awaited.id, knobs=command_knobs, idempotency_key=key)
        standby = awaited.standby if awaited.path is RescalePath.DRIVER_HANDOVER else None
        pending = pending_of(command, awaited.path, awaited.knobs, requested_at=awaited.requested_at,
                             last_batch_end=awaited.last_batch_end,
                             standby=standby if standby is not StandbyUse.NONE else None)
        pending["causes"] = list(awaited.causes)
        record_pending(self.client, self.job, pending, awaited.knobs)
        log.warning("command %s: the query failed before its first batch (%s); the next driver finishes it",
                    awaited.id, cause)

    # main -------------------------------------------------------------------------------------

    def run(self) -> int:
        """Run until stopped (exit 0), a driver restart is needed (75), or the query fails (raises).
        A standby driver first waits for the checkpoint (exit 77 when the handover is called off).

        Raises:
            RuntimeError: the query terminated with an error, or the checkpoint lease was lost.
        """
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.lease_lost = False
        if self.standby and not self._wait_as_standby():
            return EXIT_STANDBY_ABORTED
        self._take_the_checkpoint()
        try:
            self._start()
        except Exception as exc:
            self._carry_over(exc)
            raise
        try:
            exit_code = self._serve()
        except Exception as exc:
            self._carry_over(exc)
            raise
        finally:
            self._shut_down()
        if self.lease_lost:
            raise RuntimeError("the checkpoint lease was lost: the query was stopped so that one driver owns it")
        if exit_code == 0:
            control.write_status(self.client, self.job, StatusUpdate(state=RunnerState.STOPPED))
        return exit_code

    def _take_the_checkpoint(self) -> None:
        """Acquire the checkpoint lease, publish the driver's status and take over a pending rescale."""
        self.lease.acquire(wait_s=1.5 * LEASE_TTL_S)
        if self.standby:
            log.info("handover %s timings (epoch s): %s", self.standby, keep_timings(self.client, self.job))
            self.client.delete(keys.handover(self.job))
        control.write_status(self.client, self.job, StatusUpdate(
            state=RunnerState.STARTING, pid=os.getpid(), started_at=time.time(), knobs=self.values,
            knob_specs=knobs_to_json(self.spec.knobs), pipeline=self.spec.ref, capacity=self.capacity,
            master=self.master, error="", lease_token=self.lease.token))
        self._resume_pending()

    def _add_listener(self) -> None:
        """Register the progress listener once (it publishes to Redis and calls ``_on_progress``)."""
        if not self._listening:
            self.spark.streams.addListener(RedisProgressListener(self.redis_url, self.job,
                                                                 on_progress=self._on_progress))
            self._listening = True

    def _start(self) -> None:
        """Start Spark (unless a standby has it), the executors in place, the progress listener, the
        query and the control thread."""
        if self.spark is None:
            self.spark = self._build_session()
        sc = self.spark.sparkContext
        control.write_status(self.client, self.job, StatusUpdate(ui_url=sc.uiWebUrl or "", app_id=sc.applicationId))
        if self.in_place:
            self._start_executor_scaler()
        self._add_listener()
        self.query = self._start_query()
        threading.Thread(target=self._control_loop, name="control", daemon=True).start()

    def _start_executor_scaler(self) -> None:
        """Ask for the knob's executors and wait (up to :data:`FIRST_BATCH_TIMEOUT_S`) for a first one
        (:meth:`ExecutorScaler.limit_to`), then scale to the knob's value."""
        self.executor_scaler = ExecutorScaler(self.spark, min_executors=1)
        self.executor_scaler.limit_to(self.executors(), wait_s=FIRST_BATCH_TIMEOUT_S)
        self.executor_scaler.scale_to(self.executors())

    def _trim_executors(self) -> None:
        """On a cluster, every :data:`TRIM_EVERY_S` between rescales: no more executors than the plan
        (:meth:`ExecutorScaler.trim_to`); a failure is logged and tried again later."""
        if self.executor_scaler is None or time.monotonic() < self._trim_at:
            return
        self._trim_at = time.monotonic() + TRIM_EVERY_S
        try:
            removed = self.executor_scaler.trim_to(self.executors())
        except Exception:  # noqa: BLE001 - an extra executor costs capacity, never the query
            log.warning("could not remove the executors above the plan's %d", self.executors(), exc_info=True)
            return
        if removed:
            log.info("removed executors %s that registered above the plan's %d", list(removed), self.executors())

    def _serve(self) -> int:
        """Apply control commands, one rescale at a time, until stopped (0) or a command needs the
        driver to exit (its exit code).

        Raises:
            RuntimeError: the query terminated with an error.
        """
        while not self.stop_event.is_set():
            if not self.query.isActive:
                raise RuntimeError(f"query {self.query.name} terminated: {self.query.exception()}")
            self._finished(self.first_batch.check_timeout())
            if self.first_batch.waiting:  # one rescale at a time: wait for its first batch
                self.stop_event.wait(0.2)
                continue
            self._trim_executors()
            try:
                entry_id, fields = self.commands.get(timeout=0.5)
            except queue.Empty:
                continue
            code = self._handle(entry_id, fields)
            if code is not None:
                return code
        return 0

    def _shut_down(self) -> None:
        """Stop the query, release the lease, stop Spark, and fail an in-process rescale left waiting."""
        self.stop_event.set()
        if self.query is not None and self.query.isActive:
            self.query.stop()
        self.lease.release()
        self.spark.stop()
        self.first_batch.abandon()

    def request_stop(self, *_args: object) -> None:
        """Ask :meth:`run` to stop the query and Spark and return 0 (signal-handler safe)."""
        self.stop_event.set()


def _size(path: Path) -> int:
    """The size of the file at ``path``, bytes (0 when there is none)."""
    try:
        return path.stat().st_size
    except OSError:
        return 0
