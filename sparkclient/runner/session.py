"""The driver's Spark side: build the SparkSession, start the pipeline's query, stop it at a batch
boundary, and warm a new JVM up. Used by :class:`sparkclient.runner.driver.Driver`."""

from __future__ import annotations

import json
import logging
import os
import shlex
import shutil
import sys
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.readwriter import DataStreamReader, DataStreamWriter

from sparkclient.collector.progress import batch_end_epoch_s, ran_a_batch
from sparkclient.contract.spec import ENV_JOB, ENV_WORKDIR, PipelineSpec
from sparkclient.runner.staterepartition import error_line

log = logging.getLogger(__name__)

__all__ = ["BATCH_WAIT_TIMEOUT_S", "PROJECT_ROOT", "WARM_UP_CONF", "WARM_UP_TIMEOUT_S", "LoggedBatchError",
           "StartedQuery", "build_session", "checkpoint_has_state", "finish_logged_batch", "last_batch_end",
           "prepare_query", "progress_dict", "start_query", "stop_between_batches", "warm_up", "warm_up_pipeline"]

#: How long a rescale waits for the batch in flight, seconds.
BATCH_WAIT_TIMEOUT_S = 120.0
#: The standby's streaming warm-up gives up after this many seconds (it is only a speed-up).
WARM_UP_TIMEOUT_S = 60.0
#: Session settings of the warm-up query (restored after it): few shuffle partitions, RocksDB state.
WARM_UP_CONF = {"spark.sql.shuffle.partitions": "2",
                "spark.sql.streaming.stateStore.providerClass":
                    "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"}
#: The pipeline warm-up's trigger, its readers' options and how many batches with rows it runs.
WARM_UP_TRIGGER = "250 milliseconds"
WARM_UP_READER_OPTIONS = {"startingOffsets": "latest"}
WARM_UP_BATCHES = 12
#: The pipeline warm-up gives up after this many seconds without a batch that read rows, seconds.
WARM_UP_IDLE_S = 15.0
PROJECT_ROOT = Path(__file__).resolve().parents[2]
#: The Python-worker launcher (:func:`python_worker_launcher`).
PYWORKER = Path(__file__).resolve().with_name("pyworker.py")
#: The interpreter Spark's Python workers run (the launcher's ``python``), set once per process.
WORKER_PYTHON_ENV = "SPARKSCALER_WORKER_PYTHON"


def checkpoint_has_state(checkpoint: Path) -> bool:
    """Whether the checkpoint has run a batch and holds state (a ``state/`` folder), so its state
    partitions are pinned: a change of ``spark.sql.shuffle.partitions`` then needs the offline state
    repartition.

    Spark pins only the stateful operators' partitions. The offset log records the session's
    ``spark.sql.shuffle.partitions`` but restores it into ``STATEFUL_SHUFFLE_PARTITIONS_INTERNAL``
    (``OffsetSeqMetadata.rebindSQLConfsSessionToOffsetLog``), so a stateless query's shuffles take
    the session's value at each start (tests/sparkclient/contract/test_binding_spark.py)."""
    offsets = checkpoint / "offsets"
    return (offsets.is_dir() and any(p.name.isdigit() for p in offsets.iterdir())
            and (checkpoint / "state").is_dir())


def progress_dict(progress: Any) -> dict[str, Any]:
    """A ``StreamingQueryProgress`` (or a dict of one) as a dict."""
    return json.loads(progress.json) if hasattr(progress, "json") else dict(progress)


def _last_batch_id(query: Any) -> int | None:
    progress = query.lastProgress
    return None if progress is None else progress_dict(progress).get("batchId")


def build_session(*, job: str, workdir: Path, redis_url: str, master: str, executors: int, ui_port: int,
                  in_place: bool, capacity: int, spark_conf: dict[str, str],
                  session_conf: Mapping[str, str] | None, launch_conf: Mapping[str, str] | None = None) -> Any:
    """The driver's SparkSession for ``job``.

    ``master``: ``local`` (then ``local[executors]``) or a cluster manager URL; ``in_place``: one
    core per executor, so executors are changed in place (``spark.cores.max`` = the larger of
    ``capacity`` and ``executors``); ``spark_conf``: the operator's ``--conf`` settings;
    ``session_conf``: the shuffle knob's session settings
    (:func:`sparkclient.contract.sparkconf.session_settings`); ``launch_conf``: the settings fixed at
    the JVM's start, the memory knob's heap (:func:`sparkclient.contract.sparkconf.launch_settings`:
    they take effect only in a driver whose JVM this call starts). Sets the environment the
    pipeline and the executors' Python workers read (job, work directory, Redis URL, PYTHONPATH).
    """
    local = master == "local" or master.split("://")[-1].split(":")[0] in ("127.0.0.1", "localhost")
    # The interpreter the workers run: the operator's PYSPARK_PYTHON, kept apart from the launcher
    # that replaces it, so that a second session of this process does not wrap the launcher.
    python = os.environ.setdefault(WORKER_PYTHON_ENV, os.environ.get("PYSPARK_PYTHON") or sys.executable)
    if local:  # the launcher's path exists only on this host
        python = str(python_worker_launcher(workdir, python))
    os.environ["PYSPARK_PYTHON"] = python
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ[ENV_JOB], os.environ[ENV_WORKDIR] = job, str(workdir)
    os.environ["SPARKSCALER_REDIS_URL"] = redis_url
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(PROJECT_ROOT) not in paths:  # executors' Python workers import sparkclient
        os.environ["PYTHONPATH"] = os.pathsep.join([str(PROJECT_ROOT), *paths])

    spark_master = master if master != "local" else f"local[{executors}]"
    builder = (SparkSession.builder.master(spark_master).appName(f"sparkscaler-{job}")
               .config("spark.ui.port", str(ui_port))
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.streaming.metricsEnabled", "true"))
    if local:
        builder = builder.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
    if in_place:  # one core per executor: executors = cores, changed in place
        builder = (builder.config("spark.executor.cores", "1")
                   .config("spark.cores.max", str(max(capacity, executors)))
                   .config("spark.dynamicAllocation.enabled", "false")
                   .config("spark.pyspark.python", python)
                   .config("spark.executorEnv.PYTHONPATH", os.environ["PYTHONPATH"]))
    for key, value in spark_conf.items():  # the operator's --conf settings
        builder = builder.config(key, value)
    for key, value in {**(launch_conf or {}), **(session_conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def python_worker_launcher(workdir: Path, python: str) -> Path:
    """Write ``workdir/python-worker``, the executable Spark starts its Python workers with on a
    local master: ``python`` running :mod:`sparkclient.runner.pyworker` (which connects back to the
    JVM before its slow imports); returns its path."""
    path = workdir / "python-worker"
    script = f"#!/bin/sh\nexec {shlex.quote(python)} {shlex.quote(str(PYWORKER))} \"$@\"\n"
    workdir.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != script:  # a running JVM may be starting it
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(script)
        tmp.chmod(0o755)
        tmp.replace(path)
    return path


@dataclass(frozen=True)
class StartedQuery:
    """A query :func:`start_query` started: the ``StreamingQuery``, its checkpoint directory and its
    processing-time trigger interval in seconds (0 = as fast as possible)."""

    query: Any
    checkpoint: Path
    trigger_interval_s: float


def _set_conf(spark: Any, settings: Mapping[str, str] | None) -> None:
    for key, value in (settings or {}).items():
        spark.conf.set(key, value)


class _StartCaptured(Exception):
    """Raised inside a pipeline's build function by a captured ``start()``/``toTable()``."""


def _capture_start(spark: Any, spec: PipelineSpec, values: dict[str, int], session_conf: Mapping[str, str] | None,
                   reader_options: Mapping[str, str] | None = None) -> tuple[Any, Any, tuple, dict] | None:
    """Run ``spec.build(spark, values)`` up to its writer's ``start()``/``toTable()`` and return
    ``(method, writer, args, kwargs)`` of that one call, or None (the build failed, or did not reach
    exactly one start; a query it started by another path is stopped at once). ``reader_options``
    are set on every streaming reader just before its ``load()``."""
    captured: list[tuple[Any, Any, tuple, dict]] = []
    originals = {"start": DataStreamWriter.start, "toTable": DataStreamWriter.toTable}
    original_load = DataStreamReader.load

    def capturing(name: str) -> Callable[..., Any]:
        def capture(writer: Any, *args: Any, **kwargs: Any) -> Any:
            captured.append((originals[name], writer, args, kwargs))
            raise _StartCaptured
        return capture

    def load(reader: Any, *args: Any, **kwargs: Any) -> Any:
        for key, value in (reader_options or {}).items():
            reader.option(key, value)
        return original_load(reader, *args, **kwargs)

    _set_conf(spark, session_conf)
    for name in originals:
        setattr(DataStreamWriter, name, capturing(name))
    DataStreamReader.load = load
    try:
        spec.build(spark, dict(values))
    except _StartCaptured:
        pass
    except Exception:  # noqa: BLE001 - preparing is only a speed-up: the normal start reports the error
        log.exception("preparing %s failed; it will be built after the handover", spec.ref)
        return None
    finally:
        for name, method in originals.items():
            setattr(DataStreamWriter, name, method)
        DataStreamReader.load = original_load
    if spark.streams.active:
        log.error("%s started a query without DataStreamWriter.start/toTable while it was prepared; stopped it",
                  spec.ref)
        for query in spark.streams.active:
            query.stop()
        return None
    return captured[0] if len(captured) == 1 else None


def prepare_query(spark: Any, spec: PipelineSpec, values: dict[str, int],
                  session_conf: Mapping[str, str] | None) -> Callable[[], Any] | None:
    """Run ``spec.build(spark, values)`` up to its writer's ``start()`` (or ``toTable()``) without
    starting anything, and return the call that starts it; a standby driver does this before it
    owns the checkpoint, so the plan's analysis (a Python data source's schema, the reader
    options) is done before the pause. The build function runs once for it: a standby starts
    the query with the returned call, not by building again.

    Returns None (the caller builds as usual) when the build did not reach exactly one start, or
    failed; a query that the build started by another path is stopped at once (logged as an error).
    """
    captured = _capture_start(spark, spec, values, session_conf)
    if captured is None:
        return None
    method, writer, args, kwargs = captured
    return lambda: method(writer, *args, **kwargs)


def warm_up_pipeline(spark: Any, spec: PipelineSpec, values: dict[str, int], session_conf: Mapping[str, str] | None,
                     workdir: Path, *, batches: int = WARM_UP_BATCHES, timeout_s: float = WARM_UP_TIMEOUT_S,
                     idle_s: float = WARM_UP_IDLE_S, stop_event: Any = None) -> int:
    """Run the pipeline's own plan for a few micro-batches before the handover, so that the first
    batches after it find its code ready (``SPARK-FACTS.md``: a fresh JVM is slow on the first
    batches of a plan: class loading, code generation, its Python workers, its source's reader,
    its state store).

    The build function runs once more for it; its writer is started with the ``noop`` sink, a
    scratch checkpoint under ``workdir``, a :data:`WARM_UP_TRIGGER` trigger and its readers at
    ``startingOffsets=latest`` (:data:`WARM_UP_READER_OPTIONS`: a source that knows the option reads
    only what arrives meanwhile; one that does not ignores it), so it never writes to the
    pipeline's sink or checkpoint. Stops after ``batches`` batches that read rows, ``timeout_s``
    seconds, ``idle_s`` seconds without a batch that read rows (an idle source), or when
    ``stop_event`` is set. Returns the batches with rows it ran (0 when it could
    not run: logged, never raised; a warm-up costs speed, never the handover)."""
    started = time.monotonic()
    scratch = workdir / "warm-up" / uuid.uuid4().hex
    ran = 0
    try:
        captured = _capture_start(spark, spec, values, session_conf, WARM_UP_READER_OPTIONS)
        if captured is None:
            return 0
        writer = captured[1]
        writer.format("noop").option("checkpointLocation", str(scratch)).queryName(f"warm-up-{scratch.name}")
        query = DataStreamWriter.start(writer.trigger(processingTime=WARM_UP_TRIGGER))
        try:
            begun = time.monotonic()
            while query.isActive and time.monotonic() < begun + timeout_s and ran < batches \
                    and not (ran == 0 and time.monotonic() > begun + idle_s) \
                    and not (stop_event is not None and stop_event.is_set()):
                ran = sum(1 for p in query.recentProgress or [] if (progress_dict(p).get("numInputRows") or 0) > 0)
                time.sleep(0.1)
        finally:
            query.stop()
    except Exception:  # noqa: BLE001 - a warm-up that fails costs speed, never the handover
        log.exception("the pipeline's warm-up failed; handing over without it")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    log.info("the pipeline's plan warmed up in %.2f s (%d batches with rows)", time.monotonic() - started, ran)
    return ran


def start_query(spark: Any, spec: PipelineSpec, values: dict[str, int],
                session_conf: Mapping[str, str] | None, prepared: Callable[[], Any] | None = None) -> StartedQuery:
    """Set the shuffle knob's session settings, then ``spec.build(spark, values)``; or, with ``prepared``
    (from :func:`prepare_query`), start the query it captured (building as usual if that fails).

    Raises:
        TypeError: the pipeline did not return a started ``StreamingQuery``.
    """
    query = None
    if prepared is not None:
        try:
            query = prepared()
        except Exception:  # noqa: BLE001 - fall back to a fresh build, which reports a real error
            log.exception("starting the prepared query of %s failed; building it again", spec.ref)
    if query is None:
        _set_conf(spark, session_conf)
        query = spec.build(spark, dict(values))
    if not all(hasattr(query, attr) for attr in ("runId", "isActive", "stop")):
        raise TypeError(f"{spec.ref} returned {type(query).__name__}, not a started StreamingQuery")
    execution = query._jsq.streamingQuery()
    checkpoint = Path(str(execution.resolvedCheckpointRoot()).removeprefix("file:"))
    trigger = execution.trigger()
    interval_s = trigger.intervalMs() / 1000.0 if hasattr(trigger, "intervalMs") else 0.0
    return StartedQuery(query, checkpoint, interval_s)


def last_batch_end(query: Any) -> float | None:
    """When the query's newest executed batch completed, epoch seconds; None before any."""
    for progress in reversed(query.recentProgress or []):
        data = progress_dict(progress)
        if ran_a_batch(data):
            return batch_end_epoch_s(data)
    return None


def stop_between_batches(query: Any, *, timeout_s: float = BATCH_WAIT_TIMEOUT_S) -> float | None:
    """Stop the query at a batch boundary; return the last batch's end (epoch s).

    Stops as soon as the batch in flight completes or the trigger is idle (a query that falls
    behind is never idle; the interrupted next batch re-runs from the offset log with the same
    offsets). Stops anyway after ``timeout_s`` seconds.
    """
    in_flight = _last_batch_id(query)
    deadline = time.monotonic() + timeout_s
    while query.isActive and time.monotonic() < deadline:
        if not query.status.get("isTriggerActive") or _last_batch_id(query) != in_flight:
            break
        time.sleep(0.02)
    query.stop()
    return last_batch_end(query)


class LoggedBatchError(RuntimeError):
    """The batch the offset log holds without a commit could not be completed."""


def finish_logged_batch(spark: Any, spec: PipelineSpec, values: dict[str, int],
                        session_conf: Mapping[str, str] | None, *,
                        timeout_s: float = BATCH_WAIT_TIMEOUT_S) -> float | None:
    """Complete the batch a stopped query left in its offset log without a commit, so that every
    logged batch is committed (an offline state repartition needs that); return its end (epoch s).

    The pipeline's own writer, sink and checkpoint are started with a one-batch trigger
    (``Trigger.Once``): Spark re-runs the logged batch with its logged offsets and ``values`` (the
    state partitions it was planned with), commits it and stops. This takes one batch instead of
    waiting for an idle trigger, which a query that falls behind never has.

    Raises:
        LoggedBatchError: the build did not reach exactly one ``start()``/``toTable()``, the query
            failed, or it did not finish within ``timeout_s`` seconds (it is stopped).
    """
    captured = _capture_start(spark, spec, values, session_conf)
    if captured is None:
        raise LoggedBatchError(f"{spec.ref} did not start exactly one query through DataStreamWriter.start/toTable")
    method, writer, args, kwargs = captured
    try:
        query = method(writer.trigger(once=True), *args, **kwargs)
        finished = query.awaitTermination(timeout_s)
    except Exception as exc:  # noqa: BLE001 - Spark's error becomes the command's failure
        raise LoggedBatchError(f"the one-batch run failed: {error_line(exc)}") from exc
    if not finished:
        query.stop()
        raise LoggedBatchError(f"the one-batch run did not finish within {timeout_s:.0f} s")
    return last_batch_end(query)


def warm_up(spark: Any, partitions: int, workdir: Path) -> None:
    """Warm the new JVM before the handover (``SPARK-FACTS.md``: a fresh JVM is slow on its first
    batch): a small batch job, then a throwaway streaming query of the usual kinds of operators
    (``rate`` source → pandas UDF → stateful aggregation on RocksDB → ``noop`` sink, two
    micro-batches, scratch checkpoint under ``workdir``), so class loading, code generation, the
    Python workers and the state store's native library are ready before the user's query starts.
    It never runs the user's pipeline: its sink could be external. Session settings it changes are
    restored; a streaming warm-up that fails is logged and skipped (it costs speed, never the handover)."""
    started = time.monotonic()
    frame = spark.range(0, 20_000, numPartitions=max(1, partitions))
    (frame.withColumn("k", F.col("id") % 10).groupBy("k").agg(F.count("*"), F.sum("id"))
     .repartition(2).collect())
    scratch = workdir / "warm-up" / uuid.uuid4().hex
    saved = {key: spark.conf.get(key, None) for key in WARM_UP_CONF}
    try:
        for key, value in WARM_UP_CONF.items():
            spark.conf.set(key, value)
        rows = (spark.readStream.format("rate").option("rowsPerSecond", 200)
                .option("numPartitions", max(1, partitions)).load())
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
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)
        shutil.rmtree(scratch, ignore_errors=True)
    log.info("JVM warmed up in %.2f s", time.monotonic() - started)
