"""The Spark settings a pipeline's knobs give: the memory knobs' at the driver's start
(:func:`launch_settings`), the shuffle knob's in the session (:func:`session_settings`); the knob
targets are in :mod:`sparkclient.contract.spec`.

A ``memory`` knob sets the heap of the JVM that runs the tasks: in local mode the driver's
(``spark.driver.memory``: the tasks run in it), on a cluster each executor's
(``spark.executor.memory``). Spark reads both only when it starts the JVM (``spark-submit`` passes
the driver's as ``-Xmx``; ``spark.conf.set`` refuses them at run time), so they go to the session
builder of a new driver, never to a running session. Flink's memory tuning likewise applies a
TaskManager's new heap by restarting it (``job.autoscaler.memory.tuning.*``,
``org.apache.flink.autoscaler.tuning.MemoryTuning``).

A ``memory_overhead`` knob sets ``spark.executor.memoryOverhead`` (the executor container's memory
beyond the heap: Spark reads it when it asks the cluster manager for a container; local mode has no
executor, so there it sets nothing). A ``state_memory`` knob turns on RocksDB's bounded memory
(``...rocksdb.boundedMemoryUsage``) at ``...rocksdb.maxMemoryUsageMB``: one LRU cache and write
buffer manager for every state store of the JVM, which ``RocksDBMemoryManager`` creates at the first
state store and keeps for the JVM's life (a later setting is not read), as Flink's managed memory
bounds RocksDB per TaskManager.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sparkclient.contract.spec import ADAPTIVE_COALESCE_CONF, Knob, KnobError, KnobTarget

__all__ = ["DRIVER_MEMORY_CONF", "EXECUTOR_MEMORY_CONF", "EXECUTOR_OVERHEAD_CONF", "ROCKSDB_BOUNDED_CONF",
           "ROCKSDB_MAX_MEMORY_CONF", "effective_memory_knobs", "is_local", "knob_settings", "launch_settings",
           "memory_conf", "session_settings"]

DRIVER_MEMORY_CONF = "spark.driver.memory"
EXECUTOR_MEMORY_CONF = "spark.executor.memory"
EXECUTOR_OVERHEAD_CONF = "spark.executor.memoryOverhead"
ROCKSDB_BOUNDED_CONF = "spark.sql.streaming.stateStore.rocksdb.boundedMemoryUsage"
ROCKSDB_MAX_MEMORY_CONF = "spark.sql.streaming.stateStore.rocksdb.maxMemoryUsageMB"


def is_local(master: str) -> bool:
    """Whether ``master`` (the runner's ``--master``) runs the tasks in the driver: ``local`` or ``local[...]``."""
    return master == "local" or master.startswith("local[")


def memory_conf(master: str) -> str:
    """The Spark setting of the heap that runs the tasks under ``master``: ``spark.driver.memory``
    in local mode, else ``spark.executor.memory``."""
    return DRIVER_MEMORY_CONF if is_local(master) else EXECUTOR_MEMORY_CONF


def knob_settings(target: KnobTarget, value_mb: int, *, master: str) -> dict[str, str]:
    """The Spark settings one memory knob of ``value_mb`` MB sets under ``master`` (module docstring);
    ``{}`` for a knob with no effect there (:meth:`~sparkclient.contract.spec.KnobTarget.needs_new_jvm`:
    ``memory_overhead`` in local mode) or not a memory knob."""
    if not target.needs_new_jvm(local=is_local(master)):
        return {}
    if target is KnobTarget.MEMORY:
        return {memory_conf(master): f"{value_mb}m"}
    if target is KnobTarget.MEMORY_OVERHEAD:
        return {EXECUTOR_OVERHEAD_CONF: f"{value_mb}m"}
    return {ROCKSDB_BOUNDED_CONF: "true", ROCKSDB_MAX_MEMORY_CONF: str(value_mb)}


def effective_memory_knobs(knobs: Sequence[Knob], *, master: str) -> tuple[Knob, ...]:
    """The memory knobs of ``knobs`` that set anything under ``master``
    (:meth:`~sparkclient.contract.spec.KnobTarget.needs_new_jvm`)."""
    return tuple(k for k in knobs if k.sets.needs_new_jvm(local=is_local(master)))


def launch_settings(knobs: Sequence[Knob], values: Mapping[str, int] | None, *, master: str,
                    operator_conf: Mapping[str, str]) -> dict[str, str]:
    """The settings the driver's session builder takes for the pipeline's memory knobs
    (:func:`knob_settings` of each, at its value in ``values``, MB). With ``values`` None only the
    operator's settings are checked, and ``{}`` is returned (the supervisor's check before any
    driver starts).

    Raises:
        KnobError: the operator's ``--conf`` settings (``operator_conf``) give a key a knob sets: two
            sources for one setting; the message names the knob and the key.
        KeyError: ``values`` lacks a memory knob (values come from
            :func:`sparkclient.contract.spec.validate_values`).
    """
    settings: dict[str, str] = {}
    for knob in effective_memory_knobs(knobs, master=master):
        own = knob_settings(knob.sets, knob.default if values is None else values[knob.name], master=master)
        for key in own.keys() & operator_conf.keys():
            raise KnobError(knob.name, f"sets {key} under --master {master}, and --conf {key}={operator_conf[key]} "
                                       f"sets it too: drop the --conf (the knob's value sets it) or the knob")
        settings.update(own)
    return {} if values is None else settings


def session_settings(knobs: Sequence[Knob], values: Mapping[str, int],
                     operator_conf: Mapping[str, str]) -> dict[str, str]:
    """The Spark session settings the runner applies for the pipeline's knobs: ``{}`` without a
    ``shuffle_partitions``/``state_partitions`` knob; else ``spark.sql.shuffle.partitions`` = the
    knob's value, and ``spark.sql.adaptive.coalescePartitions.enabled`` = ``false`` unless the
    operator's ``--conf`` settings (``operator_conf``) give it (see the module docstring).

    Raises:
        KeyError: ``values`` lacks the shuffle knob (values come from :func:`validate_values`).
    """
    knob = next((k for k in knobs if k.sets.session_conf), None)
    if knob is None:
        return {}
    settings = {knob.sets.session_conf: str(values[knob.name])}
    if ADAPTIVE_COALESCE_CONF not in operator_conf:
        settings[ADAPTIVE_COALESCE_CONF] = "false"
    return settings
