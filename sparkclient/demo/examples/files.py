"""Example pipeline on Spark's built-in sources only: JSON files dropped into a folder, counted per page.

    python -m sparkclient run --pipeline sparkclient.demo.examples.files:build --job files
    python -m sparkclient.demo.examples.files_load --inbox var/jobs/files/inbox --rate 200   # the load

Stages of each micro-batch job, with the knob (:data:`KNOBS`) that sets each one's tasks:

1. source: the ``json`` file source over ``<workdir>/inbox`` (``$FILES_INBOX``), at most
   ``max_files_per_trigger`` new files per batch; Spark splits the files into tasks itself, so this
   stage has no knob (pinned);
2. work: ``repartition(work_partitions)``, then a CPU-bound score per click (``cost_us`` µs each,
   in ``mapInPandas``), then the partial aggregation;
3. stateful: ``withWatermark(ts, 30 s)``, ``groupBy(window(10 s), page)`` count and sum on RocksDB with
   ``state_partitions`` partitions, appended to a parquet sink under ``<workdir>/out`` once each
   window closes (the file sink commits exactly once per batch through its ``_spark_metadata`` log).

The backlog is the files in the inbox not read yet (the file source reports no offsets lag).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from sparkclient.contract.spec import Knob, KnobTarget, pipeline, run_context

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
CLICK_SCHEMA = "user BIGINT, page STRING, ts TIMESTAMP, ms BIGINT"
ENV_INBOX = "FILES_INBOX"

KNOBS = [
    Knob("cores", default=1, min=1, max=8, sets=KnobTarget.EXECUTORS, description="executors (local: cores)"),
    Knob("work_partitions", default=1, min=1, max=32, sets=KnobTarget.REPARTITION,
         description="tasks of the work stage: repartition(n) before the scoring"),
    Knob("state_partitions", default=2, min=1, max=64, sets=KnobTarget.STATE_PARTITIONS,
         description="tasks of the stateful stage: spark.sql.shuffle.partitions (RocksDB state)"),
    Knob("cost_us", default=500, min=0, max=100_000, description="CPU cost of scoring one click, µs"),
    Knob("max_files_per_trigger", default=1000, min=1, max=10_000, description="files read per batch at most "
         "(admission control: a low cap hides the load, since the file source reports no backlog)"),
    Knob("trigger_interval_s", default=2, min=1, max=600, description="processing-time trigger, seconds"),
]


def inbox() -> str:
    """The folder the source watches: ``$FILES_INBOX``, else ``<workdir>/inbox``."""
    return os.environ.get(ENV_INBOX) or str(run_context().workdir / "inbox")


def _score(cost_us: int):
    def score(batches: Iterator[Any]) -> Iterator[Any]:
        for pdf in batches:
            deadline = time.perf_counter() + cost_us * len(pdf) / 1e6
            while time.perf_counter() < deadline:  # CPU-bound on purpose
                pass
            yield pdf.assign(score=(pdf["ms"] % 100).astype("int64"))

    return score


@pipeline(knobs=KNOBS)
def build(spark: SparkSession, knobs: Mapping[str, int]) -> StreamingQuery:
    """Start the clicks query (see the module docstring) and return it.

    Raises:
        pyspark.errors.PySparkException: Spark refused to start the query.
    """
    ctx = run_context()
    folder = inbox()
    os.makedirs(folder, exist_ok=True)
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", ROCKSDB_PROVIDER)
    clicks = (spark.readStream.schema(CLICK_SCHEMA).option("maxFilesPerTrigger", knobs["max_files_per_trigger"])
              .json(folder))
    scored = (clicks.repartition(knobs["work_partitions"])
              .mapInPandas(_score(knobs["cost_us"]), schema=CLICK_SCHEMA + ", score BIGINT"))
    counts = (scored.withWatermark("ts", "30 seconds")
              .groupBy(F.window("ts", "10 seconds").alias("window"), "page")
              .agg(F.count("*").alias("clicks"), F.sum("score").alias("score"))
              .select(F.col("window.start").alias("window_start"), "page", "clicks", "score"))
    return (counts.writeStream.queryName(f"{ctx.job}-query").outputMode("append").format("parquet")
            .option("path", str(ctx.workdir / "out")).option("checkpointLocation", str(ctx.checkpoint))
            .trigger(processingTime=f"{knobs['trigger_interval_s']} seconds").start())
