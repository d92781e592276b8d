"""The demo pipeline: Nexmark bids counted per 10 s window, as a three-stage micro-batch job.

Stages of each micro-batch job, in order (the runner publishes one knob per stage, see
:data:`DEMO_KNOBS`; the collector binds the i-th stage to the i-th knob):

1. source: ``redislog`` scan with ``numPartitions = source_partitions`` tasks, JSON parsing,
   ``type == 'bid'`` filter, then ``repartition(enrich_partitions)``;
2. enrich (I/O-bound): a simulated external lookup costing ``enrich_latency_ms`` per record
   (``mapInPandas`` sleeping), then the partial aggregation;
3. stateful: ``withWatermark(event_time, 60 s)``, ``groupBy(window(10 s), auction % 10)`` count on
   the RocksDB state store with ``state_partitions`` partitions (pinned by the checkpoint), update
   mode, ``foreachBatch`` upserting into the SQLite sink with one ``collect`` (one job per batch).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, fields
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from sparkclient.sink import ensure_sink, upsert_counts

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"

#: Watermark delay: generous against skew between partitions and batches, so no bid is late.
WATERMARK_DELAY = "60 seconds"
WINDOW_DURATION = "10 seconds"
#: Number of distinct aggregation keys (``auction % KEY_MODULUS``).
KEY_MODULUS = 10

#: The knobs of the demo pipeline, in stage order.
DEMO_KNOBS: list[dict[str, Any]] = [
    {"knob": "source_partitions", "adjustable": True},
    {"knob": "enrich_partitions", "adjustable": True},
    {"knob": "state_partitions", "adjustable": False},
]

_BID_SCHEMA = ("type STRING, auction LONG, bidder LONG, price LONG, channel STRING, "
               "date_time LONG")
_ENRICHED_SCHEMA = ("auction LONG, bidder LONG, price LONG, date_time LONG, "
                    "partition INT, offset LONG, bidder_segment STRING")


@dataclass(frozen=True)
class PipelineConfig:
    """The knobs of the demo pipeline.

    Attributes:
        cores: driver cores, ``local[cores]`` (changing it restarts the driver).
        source_partitions: tasks of the source stage (``numPartitions`` of ``redislog``).
        enrich_partitions: tasks of the enrich stage (``repartition``).
        state_partitions: ``spark.sql.shuffle.partitions``: tasks of the stateful stage; pinned by
            the checkpoint after the first start.
        trigger_interval_s: processing-time trigger, seconds.
        enrich_latency_ms: simulated lookup latency per record, milliseconds.
        max_records_per_batch: admission control of the source, records per batch (0 = unlimited).
    """

    cores: int = 1
    source_partitions: int = 1
    enrich_partitions: int = 1
    state_partitions: int = 2
    trigger_interval_s: float = 2.0
    enrich_latency_ms: float = 2.0
    max_records_per_batch: int = 0

    def __post_init__(self) -> None:
        for name in ("cores", "source_partitions", "enrich_partitions", "state_partitions"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        if not self.trigger_interval_s > 0:
            raise ValueError(f"trigger_interval_s must be > 0 seconds, got {self.trigger_interval_s!r}")
        if not self.enrich_latency_ms >= 0:
            raise ValueError(f"enrich_latency_ms must be >= 0 ms, got {self.enrich_latency_ms!r}")
        if not isinstance(self.max_records_per_batch, int) or self.max_records_per_batch < 0:
            raise ValueError("max_records_per_batch must be an integer >= 0 (0 = unlimited), "
                             f"got {self.max_records_per_batch!r}")

    def to_dict(self) -> dict[str, Any]:
        """The config as a JSON-ready dict."""
        return asdict(self)

    def to_json(self) -> str:
        """The config as a JSON object string."""
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PipelineConfig:
        """Build a config from a dict; missing keys take their defaults.

        Raises:
            ValueError: an unknown key or an invalid value.
        """
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise ValueError(f"unknown PipelineConfig keys {unknown}; known keys: {sorted(known)}")
        values: dict[str, Any] = {}
        for name, value in data.items():
            is_float = known[name].type in (float, "float")
            try:
                number = float(value)
            except (TypeError, ValueError):
                raise ValueError(f"PipelineConfig.{name} must be a number, got {value!r}") from None
            if not is_float and not number.is_integer():
                raise ValueError(f"PipelineConfig.{name} must be an integer, got {value!r}")
            values[name] = number if is_float else int(number)
        return cls(**values)

    @classmethod
    def from_json(cls, text: str | bytes) -> PipelineConfig:
        """Parse :meth:`to_json` output.

        Raises:
            ValueError: not a JSON object, an unknown key or an invalid value.
        """
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError(f"a PipelineConfig must be a JSON object, got {text!r}")
        return cls.from_dict(data)


def spark_conf(config: PipelineConfig) -> dict[str, str]:
    """Session settings the demo pipeline needs (state store, shuffle partitions)."""
    return {
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
        "spark.sql.shuffle.partitions": str(config.state_partitions),
    }


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


def build_demo_query(spark: SparkSession, config: PipelineConfig, *, redis_url: str, topic: str,
                     checkpoint_dir: str, sink_path: str, query_name: str) -> StreamingQuery:
    """Start the demo query (see the module docstring) and return it.

    The session must have been built with :func:`spark_conf` (state store provider); this
    function also sets ``spark.sql.shuffle.partitions`` for a new checkpoint and registers the
    ``redislog`` source.

    Raises:
        pyspark.errors.PySparkException: Spark refused to start the query (e.g. bad checkpoint).
    """
    from sparkclient.datasource import RedisLogDataSource  # noqa: PLC0415

    spark.dataSource.register(RedisLogDataSource)
    for key, value in spark_conf(config).items():
        spark.conf.set(key, value)
    ensure_sink(sink_path)

    raw = (spark.readStream.format("redislog")
           .option("redis_url", redis_url).option("topic", topic)
           .option("numPartitions", str(config.source_partitions))
           .option("maxRecordsPerBatch", str(config.max_records_per_batch))
           .load())
    # stage 1: source, parse, filter
    bids = (raw.select(F.from_json("value", _BID_SCHEMA).alias("e"), "partition", "offset")
            .where(F.col("e.type") == "bid")
            .select("e.auction", "e.bidder", "e.price", "e.date_time", "partition", "offset")
            .repartition(config.enrich_partitions))
    # stage 2: enrich (I/O-bound lookup), then the partial aggregation
    enriched = bids.mapInPandas(_make_enrich(config.enrich_latency_ms), schema=_ENRICHED_SCHEMA)
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
            .trigger(processingTime=f"{config.trigger_interval_s} seconds")
            .foreachBatch(_write_batch(sink_path))
            .start())
