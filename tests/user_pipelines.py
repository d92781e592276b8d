"""Three pipelines written to the README's pipeline contract, of the shapes users write: a stream-stream
join with a ``SOURCE_PARTITIONS`` knob per side (:func:`join_build`), a ``foreachBatch`` whose function
runs a ``groupBy`` (:func:`foreach_build`), and a stateful query that declares no partitions knob, so its
state runs Spark's default ``spark.sql.shuffle.partitions`` (:func:`default_state_build`). Each reads
``rate`` sources and writes to ``noop`` (or parquet inside the function); run one with
``python -m sparkclient run --pipeline tests.user_pipelines:join_build --job NAME``."""

from __future__ import annotations

from pyspark.sql import functions as F  # noqa: N812

from sparkclient.contract.spec import Knob, KnobTarget, pipeline, run_context

CORES = Knob("cores", default=1, min=1, max=2, sets=KnobTarget.EXECUTORS)


def _rate(spark, per_s: int, partitions: int, name: str):
    return (spark.readStream.format("rate").option("rowsPerSecond", per_s).option("numPartitions", partitions).load()
            .select((F.col("value") % 500).alias(f"{name}_k"), F.col("timestamp").alias(f"{name}_ts"))
            .withWatermark(f"{name}_ts", "10 seconds"))


@pipeline(knobs=[
    CORES,
    Knob("clicks_partitions", default=2, min=1, max=8, sets=KnobTarget.SOURCE_PARTITIONS),
    Knob("views_partitions", default=3, min=1, max=8, sets=KnobTarget.SOURCE_PARTITIONS),
    Knob("state_partitions", default=4, min=1, max=16, sets=KnobTarget.STATE_PARTITIONS),
])
def join_build(spark, knobs):
    """Clicks joined with views of the same key within 10 s; each side's partitions its own knob."""
    ctx = run_context()
    joined = _rate(spark, 300, knobs["clicks_partitions"], "a").join(
        _rate(spark, 100, knobs["views_partitions"], "b"),
        F.expr("a_k = b_k AND b_ts >= a_ts AND b_ts <= a_ts + interval 10 seconds"))
    return (joined.writeStream.queryName("clicks_views").format("noop").trigger(processingTime="1 second")
            .option("checkpointLocation", str(ctx.checkpoint)).start())


@pipeline(knobs=[
    CORES,
    Knob("source_partitions", default=2, min=1, max=8, sets=KnobTarget.SOURCE_PARTITIONS),
    Knob("shuffle_partitions", default=3, min=1, max=16, sets=KnobTarget.SHUFFLE_PARTITIONS),
])
def foreach_build(spark, knobs):
    """Each batch counted per key inside the ``foreachBatch`` function and written as parquet."""
    ctx = run_context()
    out = str(ctx.workdir / "out")

    def per_batch(df, batch_id):
        df.groupBy("k").agg(F.count("*").alias("n")).write.mode("append").parquet(out)

    rows = (spark.readStream.format("rate").option("rowsPerSecond", 300)
            .option("numPartitions", knobs["source_partitions"]).load().select((F.col("value") % 50).alias("k")))
    return (rows.writeStream.queryName("per_key").foreachBatch(per_batch).trigger(processingTime="1 second")
            .option("checkpointLocation", str(ctx.checkpoint)).start())


@pipeline(knobs=[
    CORES,
    Knob("source_partitions", default=2, min=1, max=8, sets=KnobTarget.SOURCE_PARTITIONS),
])
def default_state_build(spark, knobs):
    """A windowed count whose state partitions no knob sets: Spark's default, 200 unless set."""
    ctx = run_context()
    rows = (spark.readStream.format("rate").option("rowsPerSecond", 300)
            .option("numPartitions", knobs["source_partitions"]).load())
    counts = rows.withWatermark("timestamp", "10 seconds").groupBy(F.window("timestamp", "5 seconds")).count()
    return (counts.writeStream.queryName("windows").outputMode("append").format("noop")
            .trigger(processingTime="1 second").option("checkpointLocation", str(ctx.checkpoint)).start())
