"""Run a pipeline: a supervisor process, a Spark driver child process, and a control channel.

``python -m sparkclient.runner --job demo --redis-url URL --topic nexmark --workdir DIR
[--ui-port 4040] [--cores N --source-partitions N --enrich-partitions N --state-partitions N
--trigger-interval-s S --enrich-latency-ms MS --max-records-per-batch N]``

- The **supervisor** (that command) keeps a **driver** child (``--driver``) running with
  ``local[cores]``. The job's config lives in Redis ``ss:config:{job}`` (JSON of
  :class:`PipelineConfig`); when it exists it wins over the CLI flags, otherwise the flags are
  written there. SIGINT/SIGTERM is forwarded to the driver, which stops the query and Spark; the
  supervisor then exits, leaving no JVM behind. A driver crash (exit code not 0/75) is recorded as
  ``state=failed`` and the driver is restarted after a back-off, at most :data:`MAX_CRASH_RESTARTS`
  times in a row.
- Status hash ``ss:runner:{job}``: ``state`` (starting|running|restarting|stopped|failed),
  ``pid`` (driver), ``supervisor_pid``, ``ui_url``, ``app_id``, ``query_name``, ``query_id``,
  ``run_id``, ``config``, ``knobs``, ``checkpoint``, ``sink_path``, ``started_at``,
  ``last_batch_at`` (epoch s), ``error``.
- **Control channel**: stream ``ss:control:{job}``, field ``json`` =
  ``{"id", "action": "rescale", "config": {full PipelineConfig}}`` (see :func:`send_rescale`).
  The outcome goes to ``ss:control:{job}:result:{id}`` (see :func:`wait_result`):
  ``{"id", "status": "succeeded"|"failed", "path": "in-process"|"driver-restart"|"none",
  "downtime_s", "error", "config", "completed_at"}``.
- **In place** (``--master spark://...``, a standalone cluster): ``cores`` is the number of executors of
  one core; a change of it only is applied with :class:`sparkclient.executors.ExecutorScaler` while the
  query runs (``path="in-place"``, ``downtime_s`` 0, ``executor_change_s``); with other knobs changed as
  well, the in-process restart follows.
- **In-process** rescale (cores unchanged): wait for the batch in flight, stop the query, start
  it again from the same checkpoint with the new partitions. **Driver restart** (cores changed):
  record ``ss:runner:{job}:pending``, stop, exit with :data:`EXIT_RESTART`; the supervisor starts
  a new driver with the new ``local[N]``. A change of ``state_partitions`` once the checkpoint has
  state repartitions the state offline between the stop and the restart
  (:mod:`sparkclient.staterepartition`, RocksDB provider only; any other provider is refused before
  the query is stopped).
- **Downtime** = completion time of the first batch after the restart minus completion time of
  the last batch before the stop, in seconds; measured by the process that sees that first batch.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import redis

from sparkclient import keys
from sparkclient.pipelines import DEMO_KNOBS, PipelineConfig

log = logging.getLogger(__name__)

#: Driver exit code asking the supervisor for an immediate restart (EX_TEMPFAIL).
EXIT_RESTART = 75
#: Crash restarts in a row before the supervisor gives up.
MAX_CRASH_RESTARTS = 5
#: A driver that ran this long before crashing resets the crash counter, in seconds.
CRASH_RESET_S = 120.0
#: How long the supervisor waits for a stopping driver before killing its process group, seconds.
STOP_TIMEOUT_S = 90.0
#: How long an in-process rescale waits for the batch in flight, seconds.
BATCH_WAIT_TIMEOUT_S = 120.0
#: How long a rescale waits for the first batch after the restart before failing, seconds.
FIRST_BATCH_TIMEOUT_S = 180.0

PROJECT_ROOT = Path(__file__).resolve().parent.parent


# --- client helpers -------------------------------------------------------------------------

def send_rescale(client: redis.Redis, job: str, exec_id: str, config: dict[str, Any]) -> None:
    """Ask the runner of ``job`` to apply ``config`` (a full :class:`PipelineConfig` dict).

    Raises:
        ValueError: ``exec_id`` is empty or ``config`` is not a valid PipelineConfig.
    """
    if not exec_id:
        raise ValueError("exec_id must be a non-empty execution id")
    full = PipelineConfig.from_dict(config).to_dict()
    command = {"id": str(exec_id), "action": "rescale", "config": full}
    client.xadd(keys.control(job), {"json": json.dumps(command)})


def get_result(client: redis.Redis, job: str, exec_id: str) -> dict[str, Any] | None:
    """The outcome of control command ``exec_id``, or None while there is none."""
    raw = client.get(keys.control_result(job, exec_id))
    return json.loads(raw) if raw is not None else None


def wait_result(client: redis.Redis, job: str, exec_id: str, timeout_s: float,
                poll_s: float = 0.2) -> dict[str, Any]:
    """Wait for the outcome of control command ``exec_id``.

    Raises:
        TimeoutError: no outcome within ``timeout_s`` seconds; the message gives the runner's state.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        result = get_result(client, job, exec_id)
        if result is not None:
            return result
        if time.monotonic() >= deadline:
            status = read_status(client, job)
            raise TimeoutError(
                f"no result for command {exec_id!r} of job {job!r} after {timeout_s:.0f} s "
                f"(runner state={status.get('state')!r}, error={status.get('error')!r}): "
                f"is `python -m sparkclient.runner --job {job}` running?")
        time.sleep(poll_s)


def read_status(client: redis.Redis, job: str) -> dict[str, str]:
    """The runner status hash of ``job`` (empty when the runner never ran)."""
    raw = client.hgetall(keys.runner(job))
    return {(k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
            for k, v in raw.items()}


def load_config(client: redis.Redis, job: str) -> PipelineConfig | None:
    """The job's config from ``ss:config:{job}``, or None when absent.

    Raises:
        ValueError: the stored JSON is not a valid PipelineConfig.
    """
    raw = client.get(keys.config(job))
    return PipelineConfig.from_json(raw) if raw is not None else None


@dataclass(frozen=True)
class JobPaths:
    """Where a job keeps its files under ``workdir``."""

    workdir: Path

    @property
    def checkpoint(self) -> Path:
        return self.workdir / "checkpoint"

    @property
    def sink(self) -> Path:
        return self.workdir / "sink.sqlite"

    @property
    def driver_log(self) -> Path:
        return self.workdir / "driver.log"


def checkpoint_has_state(checkpoint: Path) -> bool:
    """Whether the checkpoint has run a batch, so its state partitions are pinned."""
    offsets = checkpoint / "offsets"
    return offsets.is_dir() and any(p.name.isdigit() for p in offsets.iterdir())


def _result(exec_id: str, status: str, path: str, *, downtime_s: float = 0.0, error: str | None = None,
            config: dict[str, Any] | None = None, executor_change_s: float | None = None) -> dict[str, Any]:
    result = {"id": exec_id, "status": status, "path": path, "downtime_s": round(float(downtime_s), 3),
              "error": error, "config": config, "completed_at": time.time()}
    if executor_change_s is not None:
        result["executor_change_s"] = round(float(executor_change_s), 3)
    return result


# --- driver ---------------------------------------------------------------------------------

def _last_batch_id(query: Any) -> int | None:
    """The id of the last completed trigger of ``query`` (from ``lastProgress``), or None."""
    progress = query.lastProgress
    if progress is None:
        return None
    data = json.loads(progress.json) if hasattr(progress, "json") else dict(progress)
    return data.get("batchId")


class Driver:
    """The Spark driver process: runs the query, applies control commands, measures downtime.

    Args:
        job, redis_url, topic: the job, its Redis server and the log it reads.
        workdir: holds the checkpoint, the SQLite sink and the driver log.
        ui_port: the Spark UI port (Spark takes the next free one if it is taken).
    """

    def __init__(self, *, job: str, redis_url: str, topic: str, workdir: Path, ui_port: int,
                 master: str = "local", max_executors: int = 4) -> None:
        self.job, self.redis_url, self.topic, self.ui_port = job, redis_url, topic, ui_port
        self.master, self.max_executors = master, max_executors
        self.standalone = master.startswith("spark://")
        self.executor_scaler: Any = None
        self.paths = JobPaths(workdir)
        self.client = redis.Redis.from_url(redis_url, decode_responses=True)
        config = load_config(self.client, job)
        if config is None:
            config = PipelineConfig()
            self.client.set(keys.config(job), config.to_json())
        self.config = config
        self.query_name = job
        self.stop_event = threading.Event()
        self.commands: queue.Queue[tuple[str, dict[str, str]]] = queue.Queue()
        self._lock = threading.Lock()
        self._awaiting: dict[str, Any] | None = None
        self.spark: Any = None
        self.query: Any = None

    # status ------------------------------------------------------------------------------

    def _set_status(self, **fields: Any) -> None:
        mapping = {k: ("" if v is None else str(v)) for k, v in fields.items()}
        self.client.hset(keys.runner(self.job), mapping=mapping)

    # spark -------------------------------------------------------------------------------

    def _build_session(self) -> Any:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        if str(PROJECT_ROOT) not in paths:  # executors' Python workers import sparkclient
            os.environ["PYTHONPATH"] = os.pathsep.join([str(PROJECT_ROOT), *paths])
        from pyspark.sql import SparkSession  # noqa: PLC0415 - keep the supervisor light

        from sparkclient.pipelines import spark_conf  # noqa: PLC0415

        master = self.master if self.standalone else f"local[{self.config.cores}]"
        builder = (SparkSession.builder.master(master)
                   .appName(f"sparkscaler-{self.job}")
                   .config("spark.ui.port", str(self.ui_port))
                   .config("spark.driver.host", "127.0.0.1")
                   .config("spark.driver.bindAddress", "127.0.0.1")
                   .config("spark.ui.showConsoleProgress", "false")
                   .config("spark.sql.streaming.metricsEnabled", "true"))
        if self.standalone:  # one core per executor: cores = executors, changed in place
            builder = (builder.config("spark.executor.cores", "1").config("spark.executor.memory", "512m")
                       .config("spark.cores.max", str(max(self.max_executors, self.config.cores)))
                       .config("spark.dynamicAllocation.enabled", "false")
                       .config("spark.pyspark.python", sys.executable)
                       .config("spark.executorEnv.PYTHONPATH", os.environ["PYTHONPATH"]))
        for key, value in spark_conf(self.config).items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("WARN")
        return spark

    def _start_query(self) -> Any:
        from sparkclient.pipelines import build_demo_query  # noqa: PLC0415

        query = build_demo_query(self.spark, self.config, redis_url=self.redis_url, topic=self.topic,
                                 checkpoint_dir=str(self.paths.checkpoint), sink_path=str(self.paths.sink),
                                 query_name=self.query_name)
        self._set_status(state="running", query_name=self.query_name, query_id=query.id, run_id=query.runId,
                         config=self.config.to_json(), error="")
        log.info("query %s started: run %s, config %s", self.query_name, query.runId, self.config)
        return query

    def _last_batch_end(self, query: Any) -> float | None:
        """Completion time (epoch s) of the last executed batch of ``query`` (from its own progress)."""
        from sparkclient.progress import batch_end_epoch_s, ran_a_batch  # noqa: PLC0415

        for progress in reversed(query.recentProgress or []):
            data = json.loads(progress.json) if hasattr(progress, "json") else dict(progress)
            if ran_a_batch(data):
                return batch_end_epoch_s(data)
        return None

    def _stop_query_between_batches(self, *, require_idle: bool = False) -> float | None:
        """Stop the query at a batch boundary; return the last batch's end (epoch s).

        Waits until no batch is in flight, or until the batch in flight completes. A query that falls
        behind (the under-provisioned case a rescale is for) starts each batch as the previous one
        ends, so its trigger is never idle; it is stopped as soon as its batch completes, which
        interrupts the next batch at its very start. That batch re-runs from the offset log after the
        restart (replayable source, idempotent sink), so nothing is lost or counted twice.

        ``require_idle`` waits (up to ``BATCH_WAIT_TIMEOUT_S``) for an idle trigger instead: an offline
        state repartition needs every logged batch committed, so none may be interrupted.
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

    # progress / downtime -----------------------------------------------------------------

    def _on_progress(self, progress: dict[str, Any]) -> None:
        from sparkclient.progress import batch_end_epoch_s, ran_a_batch  # noqa: PLC0415

        if not ran_a_batch(progress):
            return
        with self._lock:
            awaiting = self._awaiting
            if awaiting is None or progress.get("runId") == awaiting.get("old_run_id"):
                return
            self._awaiting = None
        first_end = batch_end_epoch_s(progress)
        since = awaiting.get("last_batch_end") or awaiting["requested_at"]
        self._write_result(_result(awaiting["id"], "succeeded", awaiting["path"],
                                   downtime_s=max(0.0, first_end - since), config=awaiting["config"]))
        if awaiting["path"] == "driver-restart":
            self.client.delete(keys.runner_pending(self.job))

    def _write_result(self, result: dict[str, Any]) -> None:
        self.client.set(keys.control_result(self.job, result["id"]), json.dumps(result))
        log.info("command %s: %s", result["id"], result)

    # control channel ---------------------------------------------------------------------

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
            command = json.loads(fields.get("json", ""))
            exec_id = str(command["id"])
        except (ValueError, KeyError, TypeError):
            log.error("ignoring malformed control entry %s: %r", entry_id, fields)
            self.client.set(keys.control_cursor(self.job), entry_id)
            return None
        if get_result(self.client, self.job, exec_id) is not None:
            self.client.set(keys.control_cursor(self.job), entry_id)
            return None
        try:
            exit_code = self._rescale(exec_id, command)
        finally:
            self.client.set(keys.control_cursor(self.job), entry_id)
        return exit_code

    def _rescale(self, exec_id: str, command: dict[str, Any]) -> int | None:
        if command.get("action") != "rescale":
            self._write_result(_result(exec_id, "failed", "none",
                                       error=f"unknown action {command.get('action')!r}: only 'rescale'"))
            return None
        try:
            new = PipelineConfig.from_dict(command.get("config") or {})
        except ValueError as exc:
            self._write_result(_result(exec_id, "failed", "none", error=f"invalid config: {exc}"))
            return None
        old = self.config
        if new == old:
            self._write_result(_result(exec_id, "succeeded", "none", config=new.to_dict()))
            return None
        repartition = new.state_partitions != old.state_partitions and checkpoint_has_state(self.paths.checkpoint)
        if repartition:
            from sparkclient.staterepartition import ROCKSDB_PROVIDER as ROCKSDB  # noqa: PLC0415
            from sparkclient.staterepartition import checkpoint_info  # noqa: PLC0415

            provider = checkpoint_info(self.paths.checkpoint).provider
            if provider != ROCKSDB:  # refuse while the query still runs: nothing stopped, nothing written
                self._write_result(_result(
                    exec_id, "failed", "none", config=old.to_dict(),
                    error=(f"state partitions are pinned by the checkpoint ({old.state_partitions}): its state "
                           f"store provider {provider} cannot be repartitioned offline (RocksDB only); keep "
                           f"state_partitions={old.state_partitions} or start from a new checkpoint")))
                return None
        if self.standalone and new.cores != old.cores:
            try:
                change = self.executor_scaler.scale_to(
                    new.cores, state_tasks=self.executor_scaler.newest_state_holders(str(self.query.runId)))
            except Exception as exc:  # noqa: BLE001 - report; the query keeps running as it was
                self._write_result(_result(exec_id, "failed", "in-place", config=old.to_dict(),
                                           error=f"changing the executors to {new.cores} failed: {exc}"))
                return None
            log.info("command %s: executors %d -> %d in place in %.2f s (removed %s)", exec_id, change.before,
                     change.after, change.duration_s, list(change.removed))
            old = replace(old, cores=new.cores)
            self.config = old
            self.client.set(keys.config(self.job), old.to_json())
            self._set_status(config=old.to_json())
            if new == old:  # only the executors changed: the query never stopped
                self._write_result(_result(exec_id, "succeeded", "in-place", downtime_s=0.0, config=new.to_dict(),
                                           executor_change_s=change.duration_s))
                return None
        requested_at = time.time()
        self._set_status(state="restarting")
        old_run_id = str(self.query.runId)
        last_end = self._stop_query_between_batches(require_idle=repartition)
        if repartition:
            from sparkclient.staterepartition import StateRepartitionError, repartition_state  # noqa: PLC0415

            try:
                done = repartition_state(self.spark, self.paths.checkpoint, new.state_partitions)
                log.info("command %s: state repartitioned %d -> %d in %.2f s", exec_id, done.from_partitions,
                         done.to_partitions, done.duration_s)
            except (StateRepartitionError, ValueError) as exc:
                self._write_result(_result(exec_id, "failed", "in-process", config=old.to_dict(),
                                           error=f"offline state repartition failed: {exc}"))
                self.query = self._start_query()  # the checkpoint is unchanged: carry on as before
                return None
        if new.cores != old.cores:
            pending = {"id": exec_id, "last_batch_end_epoch_s": last_end, "path": "driver-restart",
                       "config": new.to_dict(), "requested_at": requested_at}
            with self.client.pipeline(transaction=True) as pipe:
                pipe.set(keys.runner_pending(self.job), json.dumps(pending))
                pipe.set(keys.config(self.job), new.to_json())
                pipe.hset(keys.runner(self.job), "config", new.to_json())
                pipe.execute()
            log.info("command %s: restarting the driver with %d cores", exec_id, new.cores)
            return EXIT_RESTART
        with self._lock:
            self._awaiting = {"id": exec_id, "path": "in-process", "last_batch_end": last_end,
                              "requested_at": requested_at, "config": new.to_dict(), "old_run_id": old_run_id,
                              "deadline": time.monotonic() + FIRST_BATCH_TIMEOUT_S}
        self.config = new
        try:
            self.query = self._start_query()
        except Exception as exc:  # noqa: BLE001 - report, then go back to the old config
            with self._lock:
                self._awaiting = None
            self._write_result(_result(exec_id, "failed", "in-process", config=old.to_dict(),
                                       error=f"restarting the query with {new} failed: {exc}"))
            self.config = old
            self.query = self._start_query()
            return None
        self.client.set(keys.config(self.job), new.to_json())
        return None

    def _check_awaiting_timeout(self) -> None:
        with self._lock:
            awaiting = self._awaiting
            if awaiting is None or time.monotonic() < awaiting["deadline"]:
                return
            self._awaiting = None
        self._write_result(_result(awaiting["id"], "failed", awaiting["path"], config=awaiting["config"],
                                   error=f"no batch completed within {FIRST_BATCH_TIMEOUT_S:.0f} s of the restart"))

    def _abandon_in_process_rescale(self) -> None:
        """Fail an in-process rescale still waiting for its first batch (the driver is stopping).

        A driver-restart rescale stays pending instead: the next driver finishes it.
        """
        with self._lock:
            awaiting, self._awaiting = self._awaiting, None
        if awaiting is not None and awaiting["path"] == "in-process":
            self._write_result(_result(awaiting["id"], "failed", "in-process", config=awaiting["config"],
                                       error="the driver stopped before the first batch after the restart"))

    # main ----------------------------------------------------------------------------------

    def run(self) -> int:
        """Run until stopped (exit 0), a driver restart is needed (75), or the query fails (raises).

        Raises:
            RuntimeError: the query terminated with an error.
        """
        from sparkclient.progress import RedisProgressListener  # noqa: PLC0415

        self.paths.workdir.mkdir(parents=True, exist_ok=True)
        self._set_status(state="starting", pid=os.getpid(), started_at=time.time(),
                         config=self.config.to_json(), knobs=json.dumps(DEMO_KNOBS),
                         checkpoint=str(self.paths.checkpoint), sink_path=str(self.paths.sink), error="")
        pending_raw = self.client.get(keys.runner_pending(self.job))
        if pending_raw:
            pending = json.loads(pending_raw)
            if get_result(self.client, self.job, pending["id"]) is None:
                self._awaiting = {"id": pending["id"], "path": pending.get("path", "driver-restart"),
                                  "last_batch_end": pending.get("last_batch_end_epoch_s"),
                                  "requested_at": pending.get("requested_at", time.time()),
                                  "config": self.config.to_dict(), "old_run_id": None,
                                  "deadline": time.monotonic() + FIRST_BATCH_TIMEOUT_S}
            else:
                self.client.delete(keys.runner_pending(self.job))
        self.spark = self._build_session()
        sc = self.spark.sparkContext
        self._set_status(ui_url=sc.uiWebUrl or "", app_id=sc.applicationId, master=self.master)
        if self.standalone:
            from sparkclient.executors import ExecutorScaler, active_executor_ids  # noqa: PLC0415

            self.executor_scaler = ExecutorScaler(self.spark, min_executors=1)
            deadline = time.monotonic() + FIRST_BATCH_TIMEOUT_S
            while not active_executor_ids(self.executor_scaler.executors()) and time.monotonic() < deadline:
                time.sleep(0.5)
            self.executor_scaler.scale_to(self.config.cores)
        self.spark.streams.addListener(RedisProgressListener(self.redis_url, self.job, on_progress=self._on_progress))
        self.query = self._start_query()
        control = threading.Thread(target=self._control_loop, name="control", daemon=True)
        control.start()
        exit_code = 0
        try:
            while not self.stop_event.is_set():
                if not self.query.isActive:
                    error = self.query.exception()
                    raise RuntimeError(f"query {self.query_name} terminated: {error}")
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
            self.spark.stop()
            self._abandon_in_process_rescale()
        if exit_code == 0:
            self._set_status(state="stopped")
        return exit_code

    def request_stop(self, *_args: object) -> None:
        """Ask :meth:`run` to stop the query and Spark and return 0 (signal-handler safe)."""
        self.stop_event.set()


def run_driver(args: argparse.Namespace) -> int:
    """Entry point of the driver child process."""
    driver = Driver(job=args.job, redis_url=args.redis_url, topic=args.topic,
                    workdir=Path(args.workdir), ui_port=args.ui_port, master=args.master,
                    max_executors=args.max_executors)
    signal.signal(signal.SIGTERM, driver.request_stop)
    signal.signal(signal.SIGINT, driver.request_stop)
    try:
        return driver.run()
    except Exception as exc:
        log.exception("driver of job %s failed", args.job)
        driver._set_status(state="failed", error=f"{type(exc).__name__}: {exc}")
        return 1


# --- supervisor -----------------------------------------------------------------------------

class Supervisor:
    """Keeps one driver child process running for ``job`` (see the module docstring)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.job = args.job
        self.paths = JobPaths(Path(args.workdir))
        self.client = redis.Redis.from_url(args.redis_url, decode_responses=True)
        self.stopping = threading.Event()
        self.child: subprocess.Popen | None = None

    def _set_status(self, **fields: Any) -> None:
        self.client.hset(keys.runner(self.job), mapping={k: "" if v is None else str(v) for k, v in fields.items()})

    def _init_config(self) -> PipelineConfig:
        existing = load_config(self.client, self.job)
        if existing is not None:
            return existing
        config = PipelineConfig(
            cores=self.args.cores, source_partitions=self.args.source_partitions,
            enrich_partitions=self.args.enrich_partitions, state_partitions=self.args.state_partitions,
            trigger_interval_s=self.args.trigger_interval_s, enrich_latency_ms=self.args.enrich_latency_ms,
            max_records_per_batch=self.args.max_records_per_batch)
        self.client.set(keys.config(self.job), config.to_json())
        return config

    def on_signal(self, signum: int, _frame: object) -> None:
        """Forward SIGINT/SIGTERM to the driver (as SIGTERM) and stop supervising."""
        self.stopping.set()
        child = self.child
        if child is not None and child.poll() is None:
            child.send_signal(signal.SIGTERM)

    def _spawn(self) -> subprocess.Popen:
        a = self.args
        cmd = [sys.executable, "-m", "sparkclient.runner", "--driver", "--job", a.job, "--redis-url", a.redis_url,
               "--topic", a.topic, "--workdir", str(a.workdir), "--ui-port", str(a.ui_port),
               "--master", a.master, "--max-executors", str(a.max_executors)]
        env = dict(os.environ)
        paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        env["PYTHONPATH"] = os.pathsep.join([str(PROJECT_ROOT), *[p for p in paths if p != str(PROJECT_ROOT)]])
        env.setdefault("PYSPARK_PYTHON", sys.executable)
        self.paths.workdir.mkdir(parents=True, exist_ok=True)
        with open(self.paths.driver_log, "ab") as out:
            # own session: the driver, its JVM and Python workers form one process group
            return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    env=env, start_new_session=True)

    @staticmethod
    def _reap_group(pgid: int, grace_s: float = 10.0) -> None:
        """Make sure nothing of the exited driver's process group (its JVM, Python workers) survives.

        The JVM exits by itself when the driver's Python closes the gateway; whatever is still
        there after ``grace_s`` seconds gets SIGTERM, and SIGKILL 5 s later.
        """

        def alive() -> bool:
            try:
                os.killpg(pgid, 0)
            except (ProcessLookupError, PermissionError):
                return False
            return True

        for sig, wait_s in ((None, grace_s), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
            if sig is not None:
                log.warning("process group %d outlived its driver: sending %s", pgid, sig.name)
                try:
                    os.killpg(pgid, sig)
                except ProcessLookupError:
                    return
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline:
                if not alive():
                    return
                time.sleep(0.1)

    def _wait_child(self, child: subprocess.Popen) -> int:
        """Wait for the driver; once stopping, give it :data:`STOP_TIMEOUT_S` s, then kill its group."""
        while not self.stopping.is_set():
            try:
                return child.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                continue
        try:
            return child.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            log.error("driver %d did not stop within %.0f s: killing it", child.pid, STOP_TIMEOUT_S)
            os.killpg(child.pid, signal.SIGKILL)
            return child.wait()

    def run(self) -> int:
        """Supervise until SIGINT/SIGTERM (0) or too many crashes in a row (1)."""
        config = self._init_config()
        self._set_status(state="starting", supervisor_pid=os.getpid(), config=config.to_json(),
                         knobs=json.dumps(DEMO_KNOBS), checkpoint=str(self.paths.checkpoint),
                         sink_path=str(self.paths.sink), error="")
        crashes = 0
        while not self.stopping.is_set():
            started = time.monotonic()
            self.child = child = self._spawn()
            self._set_status(pid=child.pid, error="")
            log.info("driver %d started", child.pid)
            code = self._wait_child(child)
            crashed = not self.stopping.is_set() and code not in (0, EXIT_RESTART)
            if crashed:  # record it at once; reaping the JVM can take seconds
                crashes = 1 if time.monotonic() - started > CRASH_RESET_S else crashes + 1
                reported = self.client.hget(keys.runner(self.job), "error") or "no error reported"
                error = (f"driver exited with code {code} (crash {crashes} in a row): {reported}; "
                         f"see {self.paths.driver_log}")
                log.error(error)
                self._set_status(state="failed", error=error)
            elif code == EXIT_RESTART:
                crashes = 0
                self._set_status(state="restarting")
            self._reap_group(child.pid)
            self.child = None
            if not crashed:
                if self.stopping.is_set() or code == 0:
                    break
                continue
            if crashes > MAX_CRASH_RESTARTS:
                self._fail_pending(error)
                return 1
            self.stopping.wait(min(30.0, 2.0 ** crashes))
        self._set_status(state="stopped")
        return 0

    def _fail_pending(self, error: str) -> None:
        raw = self.client.get(keys.runner_pending(self.job))
        if raw:
            pending = json.loads(raw)
            result = _result(pending["id"], "failed", pending.get("path", "driver-restart"),
                             error=f"the restarted driver kept failing: {error}", config=pending.get("config"))
            self.client.set(keys.control_result(self.job, pending["id"]), json.dumps(result))
            self.client.delete(keys.runner_pending(self.job))


def _parser() -> argparse.ArgumentParser:
    defaults = PipelineConfig()
    parser = argparse.ArgumentParser(prog="python -m sparkclient.runner",
                                     description="Run the demo pipeline under a supervisor.")
    parser.add_argument("--job", default="demo")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--topic", default="nexmark")
    parser.add_argument("--workdir", required=True, help="checkpoint, SQLite sink and driver log go here")
    parser.add_argument("--ui-port", type=int, default=4040)
    parser.add_argument("--master", default="local",
                        help="'local' (local[cores], a cores change restarts the driver) or a standalone master "
                             "spark://host:port (cores = executors of 1 core, changed in place)")
    parser.add_argument("--max-executors", type=int, default=4,
                        help="standalone: spark.cores.max, the most executors a rescale can ask for")
    parser.add_argument("--driver", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--cores", type=int, default=defaults.cores)
    parser.add_argument("--source-partitions", type=int, default=defaults.source_partitions)
    parser.add_argument("--enrich-partitions", type=int, default=defaults.enrich_partitions)
    parser.add_argument("--state-partitions", type=int, default=defaults.state_partitions)
    parser.add_argument("--trigger-interval-s", type=float, default=defaults.trigger_interval_s)
    parser.add_argument("--enrich-latency-ms", type=float, default=defaults.enrich_latency_ms)
    parser.add_argument("--max-records-per-batch", type=int, default=defaults.max_records_per_batch)
    return parser


def main(argv: list[str] | None = None) -> int:
    """CLI entry point (supervisor, or driver with ``--driver``); returns the exit code."""
    args = _parser().parse_args(argv)
    role = "driver" if args.driver else "supervisor"
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s %(levelname)s {role}[%(process)d] %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    if args.driver:
        return run_driver(args)
    supervisor = Supervisor(args)
    signal.signal(signal.SIGTERM, supervisor.on_signal)
    signal.signal(signal.SIGINT, supervisor.on_signal)
    return supervisor.run()


if __name__ == "__main__":
    raise SystemExit(main())
