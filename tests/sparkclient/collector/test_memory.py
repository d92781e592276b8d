"""Memory signals (``sparkclient.collector.memory``) on the real capture of a query under memory pressure
(``tests/fixtures/spark-4.3.0-memory``: RocksDB state growing under a 512 MB driver), their typed errors,
and the parsers fuzzed on that capture (10,000 inputs each, marker ``fuzz``)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from sparkclient.collector.batchwindow import batch_end_s
from sparkclient.collector.memory import (
    RESERVED_SYSTEM_MEMORY_BYTES,
    ExecutorMemory,
    MemorySample,
    executor_memory,
    gc_shares_between,
    heap_max_bytes,
    memory_sample,
    stages_heap_peak,
)
from sparkclient.collector.sparkjson import Problem, SparkDataError
from sparkclient.collector.topology import sample_from_rest
from tests.capture_paths import MEMORY_CAPTURE
from tests.sparkclient.collector.test_fuzz_parsers import _fuzz, mutated

CAPTURE = json.loads(MEMORY_CAPTURE.read_text())
MIB = 1024 * 1024


def _memory_sample(window_start_s: float | None = None):
    return sample_from_rest(CAPTURE["jobs"], CAPTURE["stages"], CAPTURE["progresses"], CAPTURE["executors"],
                            run_id=CAPTURE["run_id"], trigger_interval_s=CAPTURE["trigger_interval_s"],
                            window_start_s=window_start_s, window_end_s=CAPTURE["now_s"], sql=CAPTURE["sql"])


def test_the_heap_maximum_inverts_sparks_unified_pool():
    """512m: Spark's unified pool is (heap − 300 MiB) × 0.6 = 133378867 bytes (the capture's maxMemory)."""
    driver = CAPTURE["executors"][0]
    assert driver["memoryMetrics"]["totalOnHeapStorageMemory"] == 133378867
    assert heap_max_bytes(133378867) == 512 * MIB
    assert heap_max_bytes(455501414) == pytest.approx(1024 * MIB, abs=1)  # the foreachbatch capture's 1g driver
    assert RESERVED_SYSTEM_MEMORY_BYTES == 300 * MIB
    with pytest.raises(ValueError):
        heap_max_bytes(1, 0.0)


def test_the_capture_shows_memory_pressure_in_the_newest_batch():
    """Batch 4 spent 18.3 of its 52.6 task-seconds in GC (its aggregation stage 53 %); its stages' heap
    peaked at 298 MB of 512 MB. Over all five batches (batch 0 left out of the vertices, not of the
    memory) the share is 0.19 and the peak 374 MB."""
    newest = _memory_sample(window_start_s=batch_end_s(CAPTURE["progresses"][-2]) + 0.001).memory
    assert newest is not None and newest.heap_max_bytes == 512 * MIB
    assert newest.gc_share == pytest.approx(18279 / 52600)
    assert newest.heap_peak_bytes == 298177936
    whole = _memory_sample().memory
    assert whole.gc_share == pytest.approx(0.1919, abs=1e-4) and whole.heap_peak_bytes == 374432384
    assert {s.operator for s in whole.state_stores} == {"dedupe", "stateStoreSave"}
    assert sum(s.memory_used_bytes for s in whole.state_stores) == 16127812 + 11294096
    assert all(dict(s.rocksdb_bytes).get("rocksdbPinnedBlocksMemoryUsage") is not None for s in whole.state_stores)
    assert json.loads(json.dumps(whole.to_json()))["heap_max_bytes"] == 512 * MIB


def test_the_state_stores_and_the_non_heap_peak_of_the_capture():
    """The two stateful operators hold 27.4 MB (memoryUsedBytes and the pinned blocks); the local
    driver, the only executor, used 202.4 MB beyond its heap (JVMOffHeapMemory 211,523,680 B and
    DirectPoolMemory 670,883 B; the mapped pool and the Python workers at 0, the process tree
    metrics being off)."""
    whole = _memory_sample().memory
    assert whole.state_memory_bytes == sum(s.total_bytes for s in whole.state_stores) >= 16127812 + 11294096
    driver = whole.executors[0]
    assert driver.nonheap_peak_bytes == 211523680 + 670883 == whole.nonheap_peak_bytes
    assert json.loads(json.dumps(whole.to_json()))["executors"][0]["nonheap_peak_bytes"] == 212194563
    doc = _doc()
    doc["progress"]["stateOperators"] = []
    for name in ("JVMOffHeapMemory", "DirectPoolMemory", "MappedPoolMemory", "ProcessTreePythonRSSMemory"):
        doc["executors"][0]["peakMemoryMetrics"].pop(name)
    bare = _memory_of(doc)  # a stateless query, and a Spark that reports no non-heap pool
    assert (bare.state_memory_bytes, bare.nonheap_peak_bytes) == (None, None)


def test_the_gc_share_between_two_readings_of_the_executors():
    """ΔtotalGCTime / ΔtotalDuration over the readings of ``/executors`` every 3 s."""
    series = CAPTURE["executor_series"]
    first, last = executor_memory(series[0]["executors"]), executor_memory(series[-1]["executors"])
    (driver_then,), (driver_now,) = first, last
    expected = (driver_now.gc_time_ms - driver_then.gc_time_ms) / (driver_now.task_time_ms - driver_then.task_time_ms)
    assert gc_shares_between(first, last) == {"driver": pytest.approx(expected)}
    assert expected == pytest.approx((26821 - 17205) / (243852 - 213186))  # 0.31 over the last 30 s


def test_a_restarted_executor_counts_from_zero_and_an_idle_one_has_no_share():
    before = (ExecutorMemory("1", 5000, 10_000, None, None, None), ExecutorMemory("2", 10, 100, None, None, None))
    after = (ExecutorMemory("1", 300, 1000, None, None, None), ExecutorMemory("2", 10, 100, None, None, None))
    assert gc_shares_between(before, after) == {"1": 0.3}


@pytest.mark.parametrize("path, value, field, problem", [
    (("executors", 0, "totalGCTime"), "12", "executors[0].totalGCTime", Problem.WRONG_TYPE),
    (("executors", 0, "peakMemoryMetrics", "JVMHeapMemory"), -1, "executors[0].peakMemoryMetrics.JVMHeapMemory",
     Problem.NEGATIVE),
    (("executors", 0, "peakMemoryMetrics", "DirectPoolMemory"), "1", "executors[0].peakMemoryMetrics.DirectPoolMemory",
     Problem.WRONG_TYPE),
    (("stages", 1, "jvmGcTime"), math.nan, "stages[1].jvmGcTime", Problem.NOT_FINITE),
    (("progress", "stateOperators", 0, "memoryUsedBytes"), 2**60, "stateOperators[0].memoryUsedBytes",
     Problem.TOO_LARGE),
])
def test_a_malformed_field_is_a_typed_error_naming_it(path, value, field, problem):
    doc = _doc()
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    with pytest.raises(SparkDataError) as caught:
        _memory_of(doc)
    assert (caught.value.field, caught.value.problem) == (field, problem)


def test_a_malformed_memory_field_costs_the_memory_signals_not_the_sample():
    capture = json.loads(json.dumps(CAPTURE))
    capture["executors"][0]["peakMemoryMetrics"]["JVMHeapMemory"] = "x"
    sample = sample_from_rest(capture["jobs"], capture["stages"], capture["progresses"], capture["executors"],
                              run_id=capture["run_id"], trigger_interval_s=3.0, window_start_s=None,
                              window_end_s=capture["now_s"], sql=capture["sql"])
    assert sample.memory is None and sample.batches == 5
    assert "memory signals not available" in sample.errors[-1] and "JVMHeapMemory" in sample.errors[-1]


def _doc() -> dict[str, Any]:
    """What a memory sample reads of the capture: executors, the stages, the newest progress, the spill."""
    return json.loads(json.dumps({"executors": CAPTURE["executors"], "stages": CAPTURE["stages"],
                                  "progress": CAPTURE["progresses"][-1], "spill": [["v1", 1_089_876_249, 3.0]]}))


def _memory_of(doc: Any) -> MemorySample:
    spill = doc.get("spill") if isinstance(doc.get("spill"), list) else []
    rows = [tuple(row) for row in spill if isinstance(row, list) and len(row) == 3
            and isinstance(row[1], int) and isinstance(row[0], str)]
    return memory_sample(doc.get("executors"), doc.get("stages"), doc.get("progress"), rows)


def _assert_typed(memory: MemorySample) -> None:
    """Every number of the sample finite and >= 0, the shares within [0, 1]."""
    assert isinstance(memory, MemorySample)
    rows = [memory, *memory.executors, *memory.state_stores]
    for row in rows:
        for name, value in vars(row).items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                assert math.isfinite(value) and value >= 0, (name, value)
    assert memory.gc_share is None or 0 <= memory.gc_share <= 1
    for total in (memory.state_memory_bytes, memory.nonheap_peak_bytes):
        assert total is None or (isinstance(total, int) and total >= 0)
    assert all(math.isfinite(rate) and rate > 0 for _v, rate in memory.spill_bytes_per_s)
    for row in memory.state_stores:
        assert all(isinstance(v, int) and v >= 0 for _n, v in row.rocksdb_bytes)


@pytest.mark.fuzz
def test_fuzz_memory_sample_on_the_memory_capture():
    def check(doc: Any) -> None:
        if isinstance(doc, dict):
            _assert_typed(_memory_of(doc))

    _fuzz("memory.memory_sample", mutated(_doc()), check, (SparkDataError,))


@pytest.mark.fuzz
def test_fuzz_executor_readings_and_their_gc_shares():
    first = executor_memory(CAPTURE["executor_series"][0]["executors"])

    def check(executors: Any) -> None:
        readings = executor_memory(executors)
        assert all(isinstance(r, ExecutorMemory) for r in readings)
        shares = gc_shares_between(first, readings)
        assert all(0 <= share <= 1 for share in shares.values())

    _fuzz("memory.executor_memory", mutated(CAPTURE["executor_series"][-1]["executors"]), check, (SparkDataError,))


def test_a_stage_heap_peak_of_zero_is_not_reported():
    """Spark polls executor metrics at each heartbeat: a stage shorter than one reads 0."""
    assert stages_heap_peak([{"peakExecutorMetrics": {"JVMHeapMemory": 0}}]) is None
    assert stages_heap_peak([{"peakExecutorMetrics": {"JVMHeapMemory": 0}},
                             {"peakExecutorMetrics": {"JVMHeapMemory": 5}}]) == 5
