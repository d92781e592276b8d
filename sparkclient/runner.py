"""The Spark driver of a pipeline run: builds the query, applies control commands, measures downtime.

Started by the supervisor (:mod:`sparkclient.supervisor`) as ``python -m sparkclient run --driver ...``.
The pipeline is any module honouring :mod:`sparkclient.contract`; the knob values live in Redis
``ss:config:{job}`` (a JSON object ``{knob: int}``), the status in ``ss:runner:{job}`` and the control
channel is :mod:`sparkclient.control`.

A rescale command carries the full set of knob values. It is checked before anything stops (every
knob inside its bounds, executors within the cluster's capacity) and then applied along one path:

- **in place** (a cluster manager, only the ``executors`` knob changed): :class:`ExecutorScaler`
  while the query runs; ``downtime_s`` 0;
- **in process** (partitions): stop the query at a batch boundary, then ``build(spark, knobs)`` again
  from the same checkpoint. A changed ``shuffle_partitions``/``state_partitions`` knob on a checkpoint
  that has run a batch repartitions it offline in between (:mod:`sparkclient.staterepartition`,
  RocksDB only; any other provider is refused before the query stops);
- **warm driver handover** (local mode's ``local[N]``, or any static setting): the supervisor starts a
  *standby* driver with the new knobs while the query keeps running; once the standby has built its
  SparkSession and warmed its JVM up, the running driver stops the query at a batch boundary, records
  ``ss:runner:{job}:pending``, releases the checkpoint lease (:mod:`sparkclient.lease`) and exits with
  :data:`EXIT_HANDED_OVER`; the standby takes the lease and starts the query at once, and its first
  batch finishes the command. A standby that fails to start leaves the running driver as it was, and
  the command fails cleanly (``restart-failed``).

Downtime = end of the first batch after the restart minus end of the last batch before the stop, s;
pause = start of that first batch minus the same end (the time no batch ran).
"""

from __future__ import annotations

import json
import logging
import os
import queue
import shutil
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import redis

from sparkclient import control, keys
from sparkclient.binding import plan_stages_of, plan_stages_to_json
from sparkclient.contract import ENV_JOB, ENV_WORKDIR, KnobTarget, PipelineSpec, validate_values
from sparkclient.control import FailureCode, RescaleCommand, RescalePath, RescaleResult, RunnerState
from sparkclient.executors import supports_in_place
from sparkclient.lease import LEASE_TTL_S, CheckpointLease

log = logging.getLogger(__name__)

#: Driver exit code asking the supervisor for an immediate restart (EX_TEMPFAIL).
EXIT_RESTART = 75
#: Driver exit code after a warm handover: the standby driver has taken over.
EXIT_HANDED_OVER = 76
#: Exit code of a standby driver whose handover was called off (nothing of the job was touched).
EXIT_STANDBY_ABORTED = 77
#: How long the running driver waits for its standby to be ready before failing the rescale, seconds.
HANDOVER_READY_TIMEOUT_S = 240.0
#: How long a rescale waits for the batch in flight, seconds.
BATCH_WAIT_TIMEOUT_S = 120.0
#: How long a rescale waits for the first batch after the restart before failing, seconds.
FIRST_BATCH_TIMEOUT_S = 180.0
#: The standby's streaming warm-up gives up after this many seconds (it is only a speed-up).
WARM_UP_TIMEOUT_S = 60.0
#: Session settings of the warm-up query (restored after it): few shuffle partitions, RocksDB state.
WARM_UP_CONF = {"spark.sql.shuffle.partitions": "2",
                "spark.sql.streaming.stateStore.providerClass":
                    "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"}
PROJECT_ROOT = Path(__file__).resolve().parent.parent


def load_knob_values(client: redis.Redis, job: str, spec: PipelineSpec) -> dict[str, int] | None:
    """The job's stored knob values (``ss:config:{job}``), checked against ``spec``; None when absent.

    Raises:
        sparkclient.contract.KnobError: the stored values do not fit the pipeline's knobs.
    """
    raw = client.get(keys.config(job))
    if raw is None:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        data = None
    return validate_values(spec.knobs, data if isinstance(data, dict) else {"(stored config)": raw})


def checkpoint_has_state(checkpoint: Path) -> bool:
    """Whether the checkpoint has run a batch, so its shuffle/state partitions are pinned."""
    offsets = checkpoint / "offsets"
    return offsets.is_dir() and any(p.name.isdigit() for p in offsets.iterdir())


def _progress_dict(progress: Any) -> dict[str, Any]:
    return json.loads(progress.json) if hasattr(progress, "json") else dict(progress)


def _last_batch_id(query: Any) -> int | None:
    progress = query.lastProgress
    return None if progress is None else _progress_dict(progress).get("batchId")


class Driver:
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
    """

    def __init__(self, *, spec: PipelineSpec, job: str, redis_url: str, workdir: Path, ui_port: int,
                 master: str, capacity: int, standby: str | None = None,
                 spark_conf: dict[str, str] | None = None) -> None:
        self.spec, self.job, self.redis_url, self.ui_port = spec, job, redis_url, ui_port
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
        self._lock = threading.Lock()
        self._awaiting: dict[str, Any] | None = None
        self._published_run: str | None = None
        self.spark: Any = None
        self.query: Any = None
        self.checkpoint: Path | None = None
        self.executor_scaler: Any = None
        self.lease_lost = False

    # status ---------------------------------------------------------------------------------

    def _set_status(self, **fields: Any) -> None:
        self.client.hset(keys.runner(self.job), mapping={k: "" if v is None else str(v) for k, v in fields.items()})

    def _write_result(self, result: RescaleResult) -> None:
        control.write_result(self.client, self.job, result)
        log.info("command %s: %s", result.id, result.to_json())

    def executors(self, values: dict[str, int] | None = None) -> int:
        values = values or self.values
        return values[self.executors_knob.name] if self.executors_knob else 1

    # spark ----------------------------------------------------------------------------------

    def _build_session(self) -> Any:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        os.environ[ENV_JOB], os.environ[ENV_WORKDIR] = self.job, str(self.workdir)
        os.environ["SPARKSCALER_REDIS_URL"] = self.redis_url
        paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        if str(PROJECT_ROOT) not in paths:  # executors' Python workers import sparkclient
            os.environ["PYTHONPATH"] = os.pathsep.join([str(PROJECT_ROOT), *paths])
        from pyspark.sql import SparkSession  # noqa: PLC0415 - keep the supervisor light

        master = self.master if self.master != "local" else f"local[{self.executors()}]"
        builder = (SparkSession.builder.master(master).appName(f"sparkscaler-{self.job}")
                   .config("spark.ui.port", str(self.ui_port))
                   .config("spark.ui.showConsoleProgress", "false")
                   .config("spark.sql.streaming.metricsEnabled", "true"))
        if self.master == "local" or master.split("://")[-1].split(":")[0] in ("127.0.0.1", "localhost"):
            builder = builder.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
        if self.in_place:  # one core per executor: executors = cores, changed in place
            builder = (builder.config("spark.executor.cores", "1")
                       .config("spark.cores.max", str(max(self.capacity, self.executors())))
                       .config("spark.dynamicAllocation.enabled", "false")
                       .config("spark.pyspark.python", sys.executable)
                       .config("spark.executorEnv.PYTHONPATH", os.environ["PYTHONPATH"]))
        for key, value in self.spark_conf.items():  # the operator's --conf settings
            builder = builder.config(key, value)
        if self.shuffle_knob is not None:
            builder = builder.config(self.shuffle_knob.sets.session_conf, str(self.values[self.shuffle_knob.name]))
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("WARN")
        return spark

    def _start_query(self) -> Any:
        if self.shuffle_knob is not None:
            self.spark.conf.set(self.shuffle_knob.sets.session_conf, str(self.values[self.shuffle_knob.name]))
        query = self.spec.build(self.spark, dict(self.values))
        if not all(hasattr(query, attr) for attr in ("runId", "isActive", "stop")):
            raise TypeError(f"{self.spec.ref} returned {type(query).__name__}, not a started StreamingQuery")
        execution = query._jsq.streamingQuery()
        self.checkpoint = Path(str(execution.resolvedCheckpointRoot()).removeprefix("file:"))
        trigger = execution.trigger()
        interval_s = trigger.intervalMs() / 1000.0 if hasattr(trigger, "intervalMs") else 0.0
        self._set_status(state=RunnerState.RUNNING, query_name=query.name or "", query_id=query.id,
                         run_id=query.runId, knobs=json.dumps(self.values, sort_keys=True), error="",
                         checkpoint=self.checkpoint, trigger_interval_s=interval_s, plan_stages="")
        log.info("query %s started: run %s, knobs %s", query.name, query.runId, self.values)
        return query

    def _last_batch_end(self, query: Any) -> float | None:
        from sparkclient.progress import batch_end_epoch_s, ran_a_batch  # noqa: PLC0415

        for progress in reversed(query.recentProgress or []):
            data = _progress_dict(progress)
            if ran_a_batch(data):
                return batch_end_epoch_s(data)
        return None

    def _stop_query_between_batches(self, *, require_idle: bool = False) -> float | None:
        """Stop the query at a batch boundary; return the last batch's end (epoch s).

        Stops as soon as the batch in flight completes (a query that falls behind is never idle; the
        interrupted next batch re-runs from the offset log). ``require_idle`` waits for an idle trigger
        instead: an offline repartition needs every logged batch committed.
        """
        query = self.query
        in_flight = _last_batch_id(query)
        deadline = time.monotonic() + BATCH_WAIT_TIMEOUT_S
        while query.isActive and time.monotonic() < deadline:
            if not query.status.get("isTriggerActive"):
                break
            if not require_idle and _last_batch_id(query) != in_flight:
                break
            time.sleep(0.02)
        query.stop()
        return self._last_batch_end(query)

    # progress / downtime ----------------------------------------------------------------------

    def _on_progress(self, progress: dict[str, Any]) -> None:
        from sparkclient.progress import batch_end_epoch_s, ran_a_batch  # noqa: PLC0415

        if not ran_a_batch(progress):
            return
        query = self.query
        if query is not None and progress.get("runId") == str(query.runId) and self._published_run != progress["runId"]:
            self._published_run = progress["runId"]
            try:  # the plan's stages, for the stage <-> knob binding (sparkclient.binding)
                self._set_status(plan_stages=plan_stages_to_json(plan_stages_of(query) or ()))
            except Exception:  # noqa: BLE001 - no plan means "unverified", never a wrong binding
                log.exception("could not read the physical plan of run %s", progress["runId"])
        with self._lock:
            awaiting = self._awaiting
            if awaiting is None or progress.get("runId") == awaiting.get("old_run_id"):
                return
            self._awaiting = None
        from sparkclient.batchwindow import progress_time_s  # noqa: PLC0415

        first_end = batch_end_epoch_s(progress)
        try:
            first_start = progress_time_s(progress)
        except ValueError:
            first_start = first_end
        since = awaiting.get("last_batch_end") or awaiting["requested_at"]
        self._write_result(RescaleResult(id=awaiting["id"], status=control.ResultStatus.SUCCEEDED,
                                         path=RescalePath(awaiting["path"]), downtime_s=max(0.0, first_end - since),
                                         pause_s=max(0.0, first_start - since), knobs=awaiting["knobs"]))
        if awaiting["path"] in (RescalePath.DRIVER_RESTART, RescalePath.DRIVER_HANDOVER):
            self.client.delete(keys.runner_pending(self.job))

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
            except control.ProtocolError as exc:
                raw_id = None
                try:
                    raw_id = json.loads(fields.get("json") or "").get("id")
                except (ValueError, AttributeError):
                    pass
                log.error("malformed control entry %s: %s", entry_id, exc)
                if isinstance(raw_id, str) and raw_id and len(raw_id) <= 200:
                    self._write_result(RescaleResult.failed(raw_id, FailureCode.MALFORMED_COMMAND, str(exc),
                                                            knobs=self.values))
                return None
            if control.get_result(self.client, self.job, command.id) is not None:
                return None
            return self._rescale(command)
        finally:
            self.client.set(keys.control_cursor(self.job), entry_id)

    def check(self, command: RescaleCommand) -> RescaleResult | dict[str, int]:
        """The command's knob values, or the failure that refuses it before anything stops."""
        from sparkclient.contract import KnobError  # noqa: PLC0415

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
        checked = self.check(command)
        if isinstance(checked, RescaleResult):
            self._write_result(checked)
            return None
        new, old = checked, dict(self.values)
        if new == old:
            self._write_result(RescaleResult(id=command.id, status=control.ResultStatus.SUCCEEDED,
                                             path=RescalePath.NONE, knobs=new))
            return None
        shuffle = self.shuffle_knob.name if self.shuffle_knob else None
        repartition = bool(shuffle and new[shuffle] != old[shuffle] and self.checkpoint
                           and checkpoint_has_state(self.checkpoint))
        if repartition:
            from sparkclient.staterepartition import ROCKSDB_PROVIDER, checkpoint_info  # noqa: PLC0415

            provider = checkpoint_info(self.checkpoint).provider
            if provider != ROCKSDB_PROVIDER:  # refused while the query still runs: nothing stopped
                self._write_result(RescaleResult.failed(
                    command.id, FailureCode.STATE_NOT_REPARTITIONABLE, knobs=old,
                    error=(f"{shuffle} is pinned by the checkpoint ({old[shuffle]}): its state store provider "
                           f"{provider} cannot be repartitioned offline (RocksDB only); keep {shuffle}="
                           f"{old[shuffle]} or start from a new checkpoint")))
                return None
        executors_changed = self.executors(new) != self.executors(old)
        if self.in_place and executors_changed:
            try:
                change = self.executor_scaler.scale_to(
                    self.executors(new), state_tasks=self.executor_scaler.newest_state_holders(str(self.query.runId)))
            except Exception as exc:  # noqa: BLE001 - report; the query keeps running as it was
                self._write_result(RescaleResult.failed(command.id, FailureCode.EXECUTOR_CHANGE_FAILED,
                                                        f"changing the executors failed: {exc}",
                                                        path=RescalePath.IN_PLACE, knobs=old))
                return None
            old[self.executors_knob.name] = self.executors(new)
            self._commit_values(old)
            if new == old:  # only the executors changed: the query never stopped
                self._write_result(RescaleResult(id=command.id, status=control.ResultStatus.SUCCEEDED,
                                                 path=RescalePath.IN_PLACE, knobs=new,
                                                 executor_change_s=change.duration_s))
                return None
        return self._restart(command, old, new, repartition=repartition,
                             new_driver=executors_changed and not self.in_place)

    def _commit_values(self, values: dict[str, int]) -> None:
        self.values = dict(values)
        text = json.dumps(self.values, sort_keys=True)
        self.client.set(keys.config(self.job), text)
        self._set_status(knobs=text)

    def _request_standby(self, command: RescaleCommand, old: dict[str, int], new: dict[str, int]) -> bool:
        """Ask the supervisor for a standby driver with ``new`` and wait until it is ready (the query
        keeps running meanwhile). Returns False, with the command failed, when it is not."""
        key = keys.handover(self.job)
        self.client.delete(key)
        self.client.hset(key, mapping={"id": command.id, "knobs": json.dumps(new), "state": "requested",
                                       "requested_at": repr(time.time())})
        log.info("command %s: waiting for a standby driver with %s", command.id, new)
        deadline = time.monotonic() + HANDOVER_READY_TIMEOUT_S
        state, error = "", ""
        while time.monotonic() < deadline and not self.stop_event.is_set():
            state, error = self.client.hget(key, "state") or "", self.client.hget(key, "error") or ""
            if state in ("ready", "failed"):
                break
            time.sleep(0.05)
        if state == "ready":
            return True
        self.client.hset(key, "state", "cancelled")
        self._write_result(RescaleResult.failed(
            command.id, FailureCode.RESTART_FAILED, knobs=old, path=RescalePath.DRIVER_HANDOVER,
            error=f"the new driver did not start ({error or f'not ready within {HANDOVER_READY_TIMEOUT_S:.0f} s'}); "
                  "the running driver carries on unchanged"))
        return False

    def _restart(self, command: RescaleCommand, old: dict[str, int], new: dict[str, int], *,
                 repartition: bool, new_driver: bool) -> int | None:
        if new_driver and not self._request_standby(command, old, new):
            return None
        requested_at = time.time()
        self._set_status(state=RunnerState.RESTARTING)
        old_run_id = str(self.query.runId)
        last_end = self._stop_query_between_batches(require_idle=repartition)
        if repartition:
            from sparkclient.staterepartition import StateRepartitionError, repartition_state  # noqa: PLC0415

            target = new[self.shuffle_knob.name]
            try:
                done = repartition_state(self.spark, self.checkpoint, target)
                log.info("command %s: state repartitioned %d -> %d in %.2f s", command.id, done.from_partitions,
                         done.to_partitions, done.duration_s)
            except (StateRepartitionError, ValueError) as exc:
                self._write_result(RescaleResult.failed(command.id, FailureCode.REPARTITION_FAILED,
                                                        f"offline state repartition failed: {exc}",
                                                        path=RescalePath.IN_PROCESS, knobs=old))
                self.query = self._start_query()  # the checkpoint is unchanged: carry on as before
                return None
        if new_driver:
            pending = {"id": command.id, "last_batch_end_epoch_s": last_end, "path": RescalePath.DRIVER_HANDOVER.value,
                       "knobs": new, "requested_at": requested_at}
            with self.client.pipeline(transaction=True) as pipe:
                pipe.set(keys.runner_pending(self.job), json.dumps(pending))
                pipe.set(keys.config(self.job), json.dumps(new, sort_keys=True))
                pipe.hset(keys.runner(self.job), "knobs", json.dumps(new, sort_keys=True))
                pipe.execute()
            self.lease.release()  # the query is stopped: the standby may take the checkpoint now
            self.client.hset(keys.handover(self.job), "state", "released")
            log.info("command %s: handed over to the standby driver with %d executors", command.id,
                     self.executors(new))
            return EXIT_HANDED_OVER
        with self._lock:
            self._awaiting = {"id": command.id, "path": RescalePath.IN_PROCESS, "last_batch_end": last_end,
                              "requested_at": requested_at, "knobs": new, "old_run_id": old_run_id,
                              "deadline": time.monotonic() + FIRST_BATCH_TIMEOUT_S}
        self.values = dict(new)
        try:
            self.query = self._start_query()
        except Exception as exc:  # noqa: BLE001 - report, then go back to the old knobs
            with self._lock:
                self._awaiting = None
            self._write_result(RescaleResult.failed(command.id, FailureCode.RESTART_FAILED,
                                                    f"restarting the query with {new} failed: {exc}",
                                                    path=RescalePath.IN_PROCESS, knobs=old))
            self.values = old
            self.query = self._start_query()
            return None
        self._commit_values(new)
        return None

    def _check_awaiting_timeout(self) -> None:
        with self._lock:
            awaiting = self._awaiting
            if awaiting is None or time.monotonic() < awaiting["deadline"]:
                return
            self._awaiting = None
        self._write_result(RescaleResult.failed(
            awaiting["id"], FailureCode.NO_FIRST_BATCH, f"no batch completed within {FIRST_BATCH_TIMEOUT_S:.0f} s "
            "of the restart", path=RescalePath(awaiting["path"]), knobs=awaiting["knobs"]))

    def _abandon_in_process_rescale(self) -> None:
        """Fail an in-process rescale still waiting for its first batch (the driver is stopping);
        a driver-restart rescale stays pending: the next driver finishes it."""
        with self._lock:
            awaiting, self._awaiting = self._awaiting, None
        if awaiting is not None and awaiting["path"] == RescalePath.IN_PROCESS:
            self._write_result(RescaleResult.failed(awaiting["id"], FailureCode.DRIVER_STOPPED,
                                                    "the driver stopped before the first batch after the restart",
                                                    path=RescalePath.IN_PROCESS, knobs=awaiting["knobs"]))

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

    def _wait_for_release(self) -> bool:
        """A standby: say it is ready, then wait until the running driver released the checkpoint.
        Returns False when the handover was called off."""
        key = keys.handover(self.job)
        self.client.hset(key, "state", "ready")
        log.info("standby for handover %s ready", self.standby)
        while not self.stop_event.is_set():
            if self.client.hget(key, "id") != self.standby:
                return False
            state = self.client.hget(key, "state")
            if state == "released":
                return True
            if state in ("cancelled", "failed"):
                return False
            if state in ("requested", "starting"):  # a restarted driver asked again for the same handover
                self.client.hset(key, "state", "ready")
            time.sleep(0.02)
        return False

    def _warm_up(self) -> None:
        """Warm the new JVM before the handover (``SPARK-FACTS.md``: a fresh JVM is slow on its first
        batch): a small batch job, then a throwaway streaming query of the usual kinds of operators
        (``rate`` source → pandas UDF → stateful aggregation on RocksDB → ``noop`` sink, two
        micro-batches, scratch checkpoint), so class loading, code generation, the Python workers and
        the state store's native library are ready before the user's query starts. It never runs the
        user's pipeline: its sink could be external. Session settings it changes are restored."""
        from pyspark.sql import functions as F  # noqa: PLC0415

        started = time.monotonic()
        frame = self.spark.range(0, 20_000, numPartitions=max(1, self.executors()))
        (frame.withColumn("k", F.col("id") % 10).groupBy("k").agg(F.count("*"), F.sum("id"))
         .repartition(2).collect())
        scratch = self.workdir / "warm-up" / uuid.uuid4().hex
        saved = {key: self.spark.conf.get(key, None) for key in WARM_UP_CONF}
        try:
            for key, value in WARM_UP_CONF.items():
                self.spark.conf.set(key, value)
            rows = (self.spark.readStream.format("rate").option("rowsPerSecond", 200)
                    .option("numPartitions", max(1, self.executors())).load())
            rows = rows.mapInPandas(lambda frames: frames, schema=rows.schema).repartition(2)
            query = (rows.withWatermark("timestamp", "1 second").groupBy(F.window("timestamp", "1 second")).count()
                     .writeStream.format("noop").outputMode("append").option("checkpointLocation", str(scratch))
                     .trigger(processingTime="100 milliseconds").start())
            try:
                deadline = time.monotonic() + WARM_UP_TIMEOUT_S
                while query.isActive and time.monotonic() < deadline and (_last_batch_id(query) or 0) < 2:
                    time.sleep(0.05)
            finally:
                query.stop()
        except Exception:  # noqa: BLE001 - a warm-up that fails costs speed, never the handover
            log.exception("streaming warm-up failed; handing over without it")
        finally:
            for key, value in saved.items():
                if value is None:
                    self.spark.conf.unset(key)
                else:
                    self.spark.conf.set(key, value)
            shutil.rmtree(scratch, ignore_errors=True)
        log.info("JVM warmed up in %.2f s", time.monotonic() - started)

    def _resume_pending(self) -> None:
        raw = self.client.get(keys.runner_pending(self.job))
        if not raw:
            return
        try:
            pending = json.loads(raw)
            command_id = str(pending["id"])
        except (ValueError, KeyError, TypeError):
            self.client.delete(keys.runner_pending(self.job))
            return
        if control.get_result(self.client, self.job, command_id) is None:
            self._awaiting = {"id": command_id, "path": RescalePath(pending.get("path", "driver-restart")),
                              "last_batch_end": pending.get("last_batch_end_epoch_s"),
                              "requested_at": pending.get("requested_at", time.time()), "knobs": dict(self.values),
                              "old_run_id": None, "deadline": time.monotonic() + FIRST_BATCH_TIMEOUT_S}
        else:
            self.client.delete(keys.runner_pending(self.job))

    # main -------------------------------------------------------------------------------------

    def run(self) -> int:
        """Run until stopped (exit 0), a driver restart is needed (75), or the query fails (raises).

        Raises:
            RuntimeError: the query terminated with an error.
        """
        from sparkclient.contract import knobs_to_json  # noqa: PLC0415
        from sparkclient.progress import RedisProgressListener  # noqa: PLC0415

        self.workdir.mkdir(parents=True, exist_ok=True)
        self.lease_lost = False
        if self.standby:
            self.spark = self._build_session()
            self._warm_up()
            if not self._wait_for_release():
                self.spark.stop()
                return EXIT_STANDBY_ABORTED
        self.lease.acquire(wait_s=1.5 * LEASE_TTL_S)
        if self.standby:
            self.client.delete(keys.handover(self.job))
        self._set_status(state=RunnerState.STARTING, pid=os.getpid(), started_at=time.time(),
                         knobs=json.dumps(self.values, sort_keys=True), knob_specs=knobs_to_json(self.spec.knobs),
                         pipeline=self.spec.ref, capacity=self.capacity, master=self.master, error="",
                         lease_token=self.lease.token)
        self._resume_pending()
        if self.spark is None:
            self.spark = self._build_session()
        sc = self.spark.sparkContext
        self._set_status(ui_url=sc.uiWebUrl or "", app_id=sc.applicationId)
        if self.in_place:
            from sparkclient.executors import ExecutorScaler, active_executor_ids  # noqa: PLC0415

            self.executor_scaler = ExecutorScaler(self.spark, min_executors=1)
            deadline = time.monotonic() + FIRST_BATCH_TIMEOUT_S
            while not active_executor_ids(self.executor_scaler.executors()) and time.monotonic() < deadline:
                time.sleep(0.5)
            self.executor_scaler.scale_to(self.executors())
        self.spark.streams.addListener(RedisProgressListener(self.redis_url, self.job, on_progress=self._on_progress))
        self.query = self._start_query()
        threading.Thread(target=self._control_loop, name="control", daemon=True).start()
        exit_code = 0
        try:
            while not self.stop_event.is_set():
                if not self.query.isActive:
                    raise RuntimeError(f"query {self.query.name} terminated: {self.query.exception()}")
                self._check_awaiting_timeout()
                if self._awaiting is not None:  # one rescale at a time: wait for its first batch
                    self.stop_event.wait(0.2)
                    continue
                try:
                    entry_id, fields = self.commands.get(timeout=0.5)
                except queue.Empty:
                    continue
                code = self._handle(entry_id, fields)
                if code is not None:
                    exit_code = code
                    break
        finally:
            self.stop_event.set()
            if self.query is not None and self.query.isActive:
                self.query.stop()
            self.lease.release()
            self.spark.stop()
            self._abandon_in_process_rescale()
        if self.lease_lost:
            raise RuntimeError("the checkpoint lease was lost: the query was stopped so that one driver owns it")
        if exit_code == 0:
            self._set_status(state=RunnerState.STOPPED)
        return exit_code

    def request_stop(self, *_args: object) -> None:
        """Ask :meth:`run` to stop the query and Spark and return 0 (signal-handler safe)."""
        self.stop_event.set()
