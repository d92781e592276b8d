"""The demo pipeline: Nexmark bids counted per 10 s window, as a three-stage micro-batch job.

``python -m sparkclient run --pipeline sparkclient.demo.examples.nexmark:build --job demo`` (the source log
is written by ``python -m sparkclient.demo.generator``). Stages of each micro-batch job, in order, with the
knob (:data:`KNOBS`) that sets each one's tasks:

1. source: ``redislog`` scan with ``numPartitions = source_partitions`` tasks, JSON parsing,
   ``type == 'bid'`` filter, then ``repartition(enrich_partitions)``;
2. enrich (I/O-bound): a simulated external lookup costing ``enrich_latency_ms`` per record
   (``mapInPandas`` sleeping), then the partial aggregation;
3. stateful: ``withWatermark(event_time, 60 s)``, ``groupBy(window(10 s), auction % 10)`` count on
   the RocksDB state store with ``state_partitions`` partitions (pinned by the checkpoint), update
   mode, ``foreachBatch`` upserting into the SQLite sink with one ``collect`` (one job per batch).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from sparkclient.contract.spec import Knob, KnobTarget, pipeline, run_context
from sparkclient.demo.datasource import RedisLogDataSource
from sparkclient.demo.sink import ensure_sink, upsert_counts

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"

#: Watermark delay: generous against skew between partitions and batches, so no bid is late.
WATERMARK_DELAY = "60 seconds"
WINDOW_DURATION = "10 seconds"
#: Number of distinct aggregation keys (``auction % KEY_MODULUS``).
KEY_MODULUS = 10

_BID_SCHEMA = ("type STRING, auction LONG, bidder LONG, price LONG, channel STRING, "
               "date_time LONG")
_ENRICHED_SCHEMA = ("auction LONG, bidder LONG, price LONG, date_time LONG, "
                    "partition INT, offset LONG, bidder_segment STRING")


def _make_enrich(latency_ms: float):
    """A ``mapInPandas`` function simulating an external lookup of ``latency_ms`` per record."""

    def enrich(batches: Iterator[Any]) -> Iterator[Any]:
        for pdf in batches:
            if latency_ms > 0 and len(pdf):
                time.sleep(latency_ms * len(pdf) / 1000.0)
            pdf = pdf.assign(bidder_segment=(pdf["bidder"] % 3).map({0: "new", 1: "regular", 2: "vip"}))
            yield pdf

    return enrich


def _write_batch(sink_path: str):
    def write(batch: DataFrame, _batch_id: int) -> None:
        rows = batch.collect()  # the batch's only action: one Spark job per micro-batch
        upsert_counts(sink_path, ((r["window_start"], r["key"], r["count"]) for r in rows))

    return write


#: Environment of the demo's source (the runner's control Redis when unset).
ENV_REDIS_URL, ENV_TOPIC = "NEXMARK_REDIS_URL", "NEXMARK_TOPIC"

KNOBS = [
    Knob("cores", default=1, min=1, max=8, sets=KnobTarget.EXECUTORS,
         description="executors (local mode: the cores of local[N])"),
    Knob("source_partitions", default=1, min=1, max=16, sets=KnobTarget.SOURCE_PARTITIONS,
         description="tasks of the source stage: numPartitions of the redislog source"),
    Knob("enrich_partitions", default=1, min=1, max=32, sets=KnobTarget.REPARTITION,
         description="tasks of the enrich stage: repartition(n) before the lookup"),
    Knob("state_partitions", default=2, min=1, max=64, sets=KnobTarget.STATE_PARTITIONS,
         description="tasks of the stateful stage: spark.sql.shuffle.partitions (RocksDB state)"),
    Knob("memory_mb", default=1024, min=512, max=4096, sets=KnobTarget.MEMORY,
         description="heap of the JVM that runs the tasks, MB (local mode: spark.driver.memory)"),
    Knob("state_memory_mb", default=256, min=64, max=2048, sets=KnobTarget.STATE_MEMORY,
         description="RocksDB state memory of each JVM, MB: one bounded cache for every state store"),
    Knob("trigger_interval_s", default=2, min=1, max=600, description="processing-time trigger, seconds"),
    Knob("enrich_latency_ms", default=2, min=0, max=1000, description="simulated lookup cost per record, ms"),
    Knob("max_records_per_batch", default=0, min=0, max=1_000_000,
         description="admission control of the source, records per batch (0 = unlimited)"),
]


@pipeline(knobs=KNOBS)
def build(spark: SparkSession, knobs: Mapping[str, int]) -> StreamingQuery:
    """Start the demo query (see the module docstring) in the runner's work directory and return it.

    The log is read from ``$NEXMARK_REDIS_URL`` (default: the runner's control Redis,
    ``$SPARKSCALER_REDIS_URL``) and topic ``$NEXMARK_TOPIC`` (default ``nexmark``). The checkpoint is
    ``<workdir>/checkpoint``, the SQLite sink ``<workdir>/sink.sqlite``.

    Raises:
        pyspark.errors.PySparkException: Spark refused to start the query (e.g. bad checkpoint).
    """
    ctx = run_context()
    return build_demo_query(
        spark, knobs, redis_url=os.environ.get(ENV_REDIS_URL) or os.environ.get("SPARKSCALER_REDIS_URL", ""),
        topic=os.environ.get(ENV_TOPIC, "nexmark"), checkpoint_dir=str(ctx.checkpoint),
        sink_path=str(ctx.workdir / "sink.sqlite"), query_name=f"{ctx.job}-query")


def build_demo_query(spark: SparkSession, knobs: Mapping[str, int], *, redis_url: str, topic: str,
                     checkpoint_dir: str, sink_path: str, query_name: str) -> StreamingQuery:
    """Start the demo query (see the module docstring) and return it.

    Sets the RocksDB state store provider and registers the ``redislog`` source; the runner sets
    ``spark.sql.shuffle.partitions`` from the ``state_partitions`` knob.

    Raises:
        pyspark.errors.PySparkException: Spark refused to start the query (e.g. bad checkpoint).
    """
    spark.dataSource.register(RedisLogDataSource)
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", ROCKSDB_PROVIDER)
    ensure_sink(sink_path)

    raw = (spark.readStream.format("redislog")
           .option("redis_url", redis_url).option("topic", topic)
           .option("numPartitions", str(knobs["source_partitions"]))
           .option("maxRecordsPerBatch", str(knobs["max_records_per_batch"]))
           .load())
    # stage 1: source, parse, filter
    bids = (raw.select(F.from_json("value", _BID_SCHEMA).alias("e"), "partition", "offset")
            .where(F.col("e.type") == "bid")
            .select("e.auction", "e.bidder", "e.price", "e.date_time", "partition", "offset")
            .repartition(knobs["enrich_partitions"]))
    # stage 2: enrich (I/O-bound lookup), then the partial aggregation
    enriched = bids.mapInPandas(_make_enrich(knobs["enrich_latency_ms"]), schema=_ENRICHED_SCHEMA)
    # stage 3: stateful windowed count
    counts = (enriched
              .withColumn("event_time", F.timestamp_millis("date_time"))
              .withWatermark("event_time", WATERMARK_DELAY)
              .groupBy(F.window("event_time", WINDOW_DURATION).alias("window"),
                       (F.col("auction") % KEY_MODULUS).alias("key"))
              .count()
              .select(F.unix_millis(F.col("window.start")).alias("window_start"), "key", "count"))
    return (counts.writeStream
            .queryName(query_name)
            .outputMode("update")
            .option("checkpointLocation", checkpoint_dir)
            .trigger(processingTime=f"{knobs['trigger_interval_s']} seconds")
            .foreachBatch(_write_batch(sink_path))
            .start())
