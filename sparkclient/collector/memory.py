"""A streaming query's memory signals, from the REST API's ``/executors`` and ``/stages`` JSON and the
query progress's ``stateOperators``: how much of the task time went to GC, how close each JVM's heap
came to its maximum, how much each stage spilled, and how much memory each state store holds.

Pure functions over JSON; a malformed field raises :class:`sparkclient.collector.sparkjson.SparkDataError`
naming it, and the values are :class:`MemorySample`, :class:`ExecutorMemory` and
:class:`StateStoreMemory` (finite, non-negative numbers only).

Spark reports the heap's maximum only through the unified memory it derives from it
(``UnifiedMemoryManager``: ``(heap - 300 MiB) × spark.memory.fraction``, the executor's
``memoryMetrics.totalOnHeapStorageMemory``); :func:`heap_max_bytes` inverts that.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scaling.planner.memory import gc_share
from scaling.values.memory import heap_usage
from sparkclient.collector.sparkjson import (
    Problem,
    SparkDataError,
    as_dict,
    dicts,
    finite,
    get_count,
    get_dict,
    get_float,
    get_list,
    get_str,
)

__all__ = ["NONHEAP_PEAK_METRICS", "RESERVED_SYSTEM_MEMORY_BYTES", "ExecutorMemory", "MemorySample", "StateStoreMemory",
           "executor_memory", "gc_shares_between", "heap_max_bytes", "memory_sample", "stages_gc_share",
           "stages_heap_peak", "state_store_memory"]

Json = Mapping[str, Any]

#: Spark's ``UnifiedMemoryManager.RESERVED_SYSTEM_MEMORY_BYTES``: heap kept out of the unified pool.
RESERVED_SYSTEM_MEMORY_BYTES = 300 * 1024 * 1024

#: ``spark.memory.fraction``'s default: the share of the heap (less the reserve) in the unified pool.
DEFAULT_MEMORY_FRACTION = 0.6

#: The ``peakMemoryMetrics`` beyond the heap, bytes: the JVM's non-heap pools (metaspace, code
#: cache), its direct and mapped buffers (Netty's shuffle), and the Python workers' resident memory.
NONHEAP_PEAK_METRICS = ("JVMOffHeapMemory", "DirectPoolMemory", "MappedPoolMemory", "ProcessTreePythonRSSMemory")

#: The RocksDB custom metrics of a state operator that are memory, bytes (Spark ``RocksDBStateStoreProvider``).
ROCKSDB_MEMORY_METRICS = ("rocksdbPinnedBlocksMemoryUsage",)


@dataclass(frozen=True)
class ExecutorMemory:
    """One executor's (or, in local mode, the driver's) memory, from ``/executors``.

    - ``gc_time_ms`` / ``task_time_ms``: ``totalGCTime`` / ``totalDuration`` since it started, ms of task time.
    - ``heap_peak_bytes``: ``peakMemoryMetrics.JVMHeapMemory`` (heap used at its peak, garbage included);
      None when Spark reports no peak metrics.
    - ``heap_max_bytes``: the JVM's heap maximum (:func:`heap_max_bytes`); None when not reported.
    - ``offheap_peak_bytes``: ``peakMemoryMetrics.JVMOffHeapMemory``; None when not reported.
    - ``nonheap_peak_bytes``: the memory it used beyond the heap at peak, what
      ``spark.executor.memoryOverhead`` covers: the sum of :data:`NONHEAP_PEAK_METRICS` it reports
      (the Python workers' only with ``spark.executor.processTreeMetrics.enabled``); None when it
      reports none.
    """

    executor_id: str
    gc_time_ms: int
    task_time_ms: int
    heap_peak_bytes: int | None
    heap_max_bytes: int | None
    offheap_peak_bytes: int | None
    nonheap_peak_bytes: int | None = None

    @property
    def heap_usage(self) -> float | None:
        """Heap at peak / heap maximum (``scaling.values.memory.heap_usage``; may exceed 1 when the
        fraction guessed is off)."""
        return heap_usage(self.heap_peak_bytes, self.heap_max_bytes)

    @property
    def gc_share(self) -> float | None:
        """GC time / task time since the executor started; None before it ran a task."""
        return gc_share(self.gc_time_ms, self.task_time_ms)


@dataclass(frozen=True)
class StateStoreMemory:
    """One stateful operator's memory in the newest batch: ``memoryUsedBytes`` and its RocksDB memory
    metrics (:data:`ROCKSDB_MEMORY_METRICS`, bytes; empty for the HDFS-backed store)."""

    operator: str
    memory_used_bytes: int
    rocksdb_bytes: tuple[tuple[str, int], ...] = ()

    @property
    def total_bytes(self) -> int:
        """``memoryUsedBytes`` plus the RocksDB memory metrics, bytes."""
        return self.memory_used_bytes + sum(v for _name, v in self.rocksdb_bytes)


@dataclass(frozen=True)
class MemorySample:
    """A window's memory signals.

    - ``gc_share``: Σ ``jvmGcTime`` / Σ ``executorRunTime`` over the window's stages (share of task time
      spent in GC, 0..1); None when they ran no task time.
    - ``heap_peak_bytes`` / ``heap_max_bytes``: the heap used at its peak in the window and the heap
      maximum (:func:`memory_sample`); None when Spark reports neither.
    - ``executors``: every executor's figures (:class:`ExecutorMemory`).
    - ``spill_bytes_per_s``: ``(vertex_id, bytes/s)`` of each vertex that spilled in the window
      (``memoryBytesSpilled + diskBytesSpilled`` over its span).
    - ``state_stores``: each stateful operator's memory (:class:`StateStoreMemory`).
    """

    gc_share: float | None
    heap_peak_bytes: int | None
    heap_max_bytes: int | None
    executors: tuple[ExecutorMemory, ...] = ()
    spill_bytes_per_s: tuple[tuple[str, float], ...] = ()
    state_stores: tuple[StateStoreMemory, ...] = ()

    @property
    def heap_usage(self) -> float | None:
        """``scaling.values.memory.heap_usage`` of the sample's peak and maximum."""
        return heap_usage(self.heap_peak_bytes, self.heap_max_bytes)

    @property
    def state_memory_bytes(self) -> int | None:
        """The state stores' memory over every stateful operator (:attr:`StateStoreMemory.total_bytes`),
        bytes; None without a stateful operator."""
        return sum(s.total_bytes for s in self.state_stores) if self.state_stores else None

    @property
    def nonheap_peak_bytes(self) -> int | None:
        """The highest :attr:`ExecutorMemory.nonheap_peak_bytes` of the executors that ran tasks (all
        of them before any did), bytes; None when none reports it."""
        workers = [e for e in self.executors if e.task_time_ms > 0] or list(self.executors)
        return max((e.nonheap_peak_bytes for e in workers if e.nonheap_peak_bytes is not None), default=None)

    def to_json(self) -> dict[str, Any]:
        """The JSON the web app stores with the snapshot (sizes in bytes, shares 0..1)."""
        return {
            "gc_share": self.gc_share, "heap_peak_bytes": self.heap_peak_bytes, "heap_max_bytes": self.heap_max_bytes,
            "executors": [{"id": e.executor_id, "gc_time_ms": e.gc_time_ms, "task_time_ms": e.task_time_ms,
                           "heap_peak_bytes": e.heap_peak_bytes, "heap_max_bytes": e.heap_max_bytes,
                           "offheap_peak_bytes": e.offheap_peak_bytes, "nonheap_peak_bytes": e.nonheap_peak_bytes}
                          for e in self.executors],
            "spill_bytes_per_s": {vertex: rate for vertex, rate in self.spill_bytes_per_s},
            "state_stores": [{"operator": s.operator, "memory_used_bytes": s.memory_used_bytes,
                              **dict(s.rocksdb_bytes)} for s in self.state_stores],
        }


def heap_max_bytes(on_heap_unified_bytes: int, memory_fraction: float = DEFAULT_MEMORY_FRACTION) -> int:
    """The JVM heap maximum, bytes, whose unified pool is ``on_heap_unified_bytes``: Spark's
    ``UnifiedMemoryManager.getMaxMemory`` inverted, ``unified / fraction + 300 MiB``. Raises
    ``ValueError`` for a fraction outside (0, 1]."""
    if not 0 < memory_fraction <= 1:
        raise ValueError(f"spark.memory.fraction must be in (0, 1], got {memory_fraction}")
    return round(on_heap_unified_bytes / memory_fraction) + RESERVED_SYSTEM_MEMORY_BYTES


def _optional_count(obj: Json, key: str, where: str) -> int | None:
    return None if obj.get(key) is None else get_count(obj, key, where)


def _nonheap_peak(peak: Json, where: str) -> int | None:
    values = [v for v in (_optional_count(peak, name, where) for name in NONHEAP_PEAK_METRICS) if v is not None]
    return sum(values) if values else None


def executor_memory(executors: Any, memory_fraction: float = DEFAULT_MEMORY_FRACTION) -> tuple[ExecutorMemory, ...]:
    """Each entry of ``/executors`` as :class:`ExecutorMemory`, in order. The heap maximum is read from
    ``memoryMetrics.totalOnHeapStorageMemory`` (else ``maxMemory``) through :func:`heap_max_bytes`.
    Raises :class:`SparkDataError` naming a malformed field."""
    out = []
    for index, executor in enumerate(dicts(executors, "executors")):
        where = f"executors[{index}]"
        peak = get_dict(executor, "peakMemoryMetrics", where)
        metrics = get_dict(executor, "memoryMetrics", where)
        unified = _optional_count(metrics, "totalOnHeapStorageMemory", f"{where}.memoryMetrics")
        if unified is None:
            unified = _optional_count(executor, "maxMemory", where)
        out.append(ExecutorMemory(
            executor_id=get_str(executor, "id", where) or str(index),
            gc_time_ms=get_count(executor, "totalGCTime", where),
            task_time_ms=get_count(executor, "totalDuration", where),
            heap_peak_bytes=_optional_count(peak, "JVMHeapMemory", f"{where}.peakMemoryMetrics"),
            heap_max_bytes=None if not unified else heap_max_bytes(unified, memory_fraction),
            offheap_peak_bytes=_optional_count(peak, "JVMOffHeapMemory", f"{where}.peakMemoryMetrics"),
            nonheap_peak_bytes=_nonheap_peak(peak, f"{where}.peakMemoryMetrics"),
        ))
    return tuple(out)


def gc_shares_between(before: Sequence[ExecutorMemory], after: Sequence[ExecutorMemory]) -> dict[str, float]:
    """Each executor's GC share between two readings: ΔtotalGCTime / ΔtotalDuration (the executors
    present in both that ran tasks in between). A counter that went down (a restarted executor
    reusing its id) counts from 0."""
    previous = {e.executor_id: e for e in before}
    out = {}
    for now in after:
        then = previous.get(now.executor_id)
        if then is None:
            continue
        restarted = now.task_time_ms < then.task_time_ms or now.gc_time_ms < then.gc_time_ms
        gc_ms = now.gc_time_ms - (0 if restarted else then.gc_time_ms)
        task_ms = now.task_time_ms - (0 if restarted else then.task_time_ms)
        share = gc_share(gc_ms, task_ms)
        if share is not None:
            out[now.executor_id] = share
    return out


def stages_gc_share(stages: Sequence[Json]) -> float | None:
    """Σ ``jvmGcTime`` / Σ ``executorRunTime`` over ``stages`` (``/stages`` entries). Raises
    :class:`SparkDataError` naming a malformed field."""
    gc_ms = run_ms = 0.0
    for index, stage in enumerate(dicts(stages, "stages")):
        where = f"stages[{index}]"
        gc_ms += get_float(stage, "jvmGcTime", where)
        run_ms += get_float(stage, "executorRunTime", where)
    return gc_share(gc_ms, run_ms)


def state_store_memory(progress: Json | None) -> tuple[StateStoreMemory, ...]:
    """Each ``stateOperators`` entry of one progress as :class:`StateStoreMemory`; ``()`` for None.
    Raises :class:`SparkDataError` naming a malformed field."""
    if progress is None:
        return ()
    progress = as_dict(progress, "progress")
    out = []
    for index, operator in enumerate(dicts(get_list(progress, "stateOperators", "progress"), "stateOperators")):
        where = f"stateOperators[{index}]"
        custom = get_dict(operator, "customMetrics", where)
        rocksdb = tuple((name, get_count(custom, name, f"{where}.customMetrics"))
                        for name in ROCKSDB_MEMORY_METRICS if custom.get(name) is not None)
        out.append(StateStoreMemory(operator=get_str(operator, "operatorName", where) or f"operator {index}",
                                    memory_used_bytes=get_count(operator, "memoryUsedBytes", where),
                                    rocksdb_bytes=rocksdb))
    return tuple(out)


def stages_heap_peak(stages: Sequence[Json]) -> int | None:
    """The highest ``peakExecutorMetrics.JVMHeapMemory`` of ``stages`` (``/stages`` entries: the heap
    used at its peak on any executor while the stage ran), bytes; None when none reports it. A 0 is
    not reported: Spark polls executor metrics at each heartbeat (10 s), so a stage shorter than that
    reads 0. Raises :class:`SparkDataError` naming a malformed field."""
    peaks = []
    for index, stage in enumerate(dicts(stages, "stages")):
        where = f"stages[{index}].peakExecutorMetrics"
        peak = _optional_count(get_dict(stage, "peakExecutorMetrics", f"stages[{index}]"), "JVMHeapMemory", where)
        if peak:
            peaks.append(peak)
    return max(peaks) if peaks else None


def memory_sample(executors: Any, stages: Sequence[Json], newest_progress: Json | None,
                  spill: Sequence[tuple[str, int, float]] = (), *,
                  memory_fraction: float = DEFAULT_MEMORY_FRACTION) -> MemorySample:
    """The window's :class:`MemorySample` from ``/executors``, the window's stages (``/stages``
    entries), its newest progress and ``spill``: ``(vertex_id, spill bytes, span seconds)`` per vertex.

    The heap at peak is the window's: the highest of its stages' ``peakExecutorMetrics`` (an
    executor's own ``peakMemoryMetrics`` is its peak since it started, used when no stage reports
    one); the heap maximum is the largest of the executors that ran tasks (in cluster mode the
    driver runs none). Raises :class:`SparkDataError` naming a malformed field, also a span that is
    not finite and >= 0."""
    readings = executor_memory(executors, memory_fraction)
    workers = [e for e in readings if e.task_time_ms > 0 and e.heap_max_bytes] or \
        [e for e in readings if e.heap_max_bytes]
    heap_max = max((e.heap_max_bytes or 0 for e in workers), default=None)
    heap_peak = stages_heap_peak(stages)
    if heap_peak is None:
        heap_peak = max((e.heap_peak_bytes for e in workers if e.heap_peak_bytes is not None), default=None)
    rates = []
    for vertex_id, spill_bytes, span_s in spill:
        span = finite(span_s, f"{vertex_id}.span_s")
        if spill_bytes < 0:
            raise SparkDataError(f"{vertex_id}.spill_bytes", Problem.NEGATIVE, "bytes >= 0", spill_bytes)
        if spill_bytes > 0 and span > 0:
            rates.append((vertex_id, spill_bytes / span))
    return MemorySample(
        gc_share=stages_gc_share(stages),
        heap_peak_bytes=heap_peak if heap_max else None,
        heap_max_bytes=heap_max or None,
        executors=readings,
        spill_bytes_per_s=tuple(rates),
        state_stores=state_store_memory(newest_progress),
    )
