"""A pipeline written to the README's contract whose heap use grows with its state and then levels off:
the memory acceptance's job (``test_memory_pressure_spark.py``).

A ``rate`` source of ``rows_per_s`` rows, each with a ~1 KB payload, grouped per tumbling event-time
window of ``window_s`` seconds and ``keys`` keys into a ``collect_list`` of the payloads, on RocksDB
state, in update mode into the ``noop`` sink. Each batch reads back and rewrites the whole list of
every key of the open window, so the heap a batch needs grows through the window (up to
``rows_per_s × window_s`` KB of payloads, held as the aggregation buffers and again as the rows
written) and starts again at the next one; the watermark drops a window once it closed, so the state
stops growing. A small heap (``memory_mb``, the JVM that runs the tasks) then spends its task time in
GC near each window's end; a heap twice as large does not.

Run as ``python -m sparkclient run --pipeline tests.sparkclient.runner.memory_pressure_pipeline:build``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import functions as F

from sparkclient.contract.spec import Knob, KnobTarget, pipeline, run_context

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


@pipeline(knobs=[
    Knob("cores", default=2, min=1, max=2, sets=KnobTarget.EXECUTORS),
    Knob("state_partitions", default=2, min=1, max=8, sets=KnobTarget.STATE_PARTITIONS),
    Knob("memory_mb", default=512, min=512, max=2048, sets=KnobTarget.MEMORY,
         description="the heap of the JVM that runs the tasks, MB"),
    Knob("rows_per_s", default=2500, min=1, max=100_000, description="rows the source makes per second"),
    Knob("window_s", default=30, min=1, max=3600, description="the event-time window of each list, seconds"),
    Knob("slide_s", default=10, min=1, max=3600, description="a window starts every slide_s seconds"),
    Knob("keys", default=20, min=1, max=100_000, description="lists per window"),
])
def build(spark: Any, knobs: Mapping[str, int]) -> Any:
    """The query (see the module docstring): checkpoint under the runner's work directory, a 2 s trigger."""
    ctx = run_context()
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", ROCKSDB)
    rows = (spark.readStream.format("rate").option("rowsPerSecond", knobs["rows_per_s"])
            .option("numPartitions", knobs["cores"]).load()
            .withColumn("payload", F.repeat(F.sha2(F.col("value").cast("string"), 256), 16)))  # 64 × 16 B
    window = F.window("timestamp", f"{knobs['window_s']} seconds", f"{knobs['slide_s']} seconds")
    lists = (rows.withWatermark("timestamp", "5 seconds")
             .groupBy(window, (F.col("value") % knobs["keys"]).alias("k"))
             .agg(F.count("*").alias("n"), F.collect_list("payload").alias("payloads")))
    return (lists.writeStream.queryName("memory-pressure").outputMode("update").format("noop")
            .option("checkpointLocation", str(ctx.checkpoint)).trigger(processingTime="2 seconds").start())
