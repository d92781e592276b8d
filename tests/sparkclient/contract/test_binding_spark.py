"""Stage ↔ knob binding on a real Spark 4 session for a stateless query writing to a DSv2 sink.

Such a query runs each micro-batch with adaptive execution: its executed plan is
``WriteToDataSourceV2 → AdaptiveSparkPlan`` with the stages inside the adaptive plan's final plan.
Found running a user's pipeline (a ``repartition(n, key)`` into a ``noop`` sink) in ``make demo``:
the plan walk stopped at ``AdaptiveSparkPlan`` and published one stage where Spark ran two, so every
stage was a "stage count" mismatch and nothing was ever proposed for the job.
"""

from __future__ import annotations

import pytest

from sparkclient.contract.binding import BindingStatus, StageInput, bind_stages, plan_stages_of
from sparkclient.contract.spec import Knob, KnobTarget
from tests.waiting import wait_for

pytestmark = pytest.mark.spark


def test_a_stateless_query_into_a_dsv2_sink_binds_each_stage_to_its_knob(tmp_path):
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F  # noqa: N812

    # The UI stays on: the session's settings outlive spark.stop() in this JVM, and later Spark tests
    # of the same pytest process read the REST API.
    spark = SparkSession.builder.master("local[2]").appName("binding-aqe").getOrCreate()
    try:
        rows = (spark.readStream.format("rate").option("rowsPerSecond", 200).option("numPartitions", 2).load()
                .withColumn("key", F.col("value") % 4).repartition(3, "key"))
        query = (rows.select("key", F.sha2(F.col("value").cast("string"), 256).alias("h"))
                 .writeStream.format("noop").trigger(processingTime="1 second")
                 .option("checkpointLocation", str(tmp_path / "cp")).start())
        wait_for(lambda: len([p for p in query.recentProgress if p.numInputRows > 0]) >= 2, timeout_s=60,
                 what="two batches with rows")
        assert "AdaptiveSparkPlan" in query._jsq.streamingQuery().lastExecution().executedPlan().treeString()
        stages = plan_stages_of(query)
        query.stop()
    finally:
        spark.stop()

    assert stages is not None
    assert [(s.input, s.partitions) for s in stages] == [(StageInput.SOURCE, None), (StageInput.REPARTITION, 3)]
    assert "AdaptiveSparkPlan" not in stages[1].operators and "WriteToDataSourceV2" in stages[1].operators
    knobs = [Knob("source_partitions", default=2, min=1, max=8, sets=KnobTarget.SOURCE_PARTITIONS),
             Knob("work_partitions", default=3, min=1, max=8, sets=KnobTarget.REPARTITION)]
    bindings = bind_stages(stages, knobs, {"source_partitions": 2, "work_partitions": 3}, [2, 3])
    assert [(b.status, b.knob) for b in bindings] == [(BindingStatus.BOUND, "source_partitions"),
                                                      (BindingStatus.BOUND, "work_partitions")]


def test_the_shuffle_knob_sets_the_tasks_of_a_stateless_keyed_shuffle(tmp_path):
    """A ``repartition("key")`` (a ``spark.sql.shuffle.partitions`` shuffle) into a DSv2 sink: adaptive
    execution coalesced its 6 partitions into 1 task, so the shuffle knob never set that stage's tasks
    and nothing could be proposed for it. With the runner's session settings the knob sets them, also
    after a restart on the same checkpoint with a new value (the runner refused such a change as
    "pinned by the checkpoint" of a query without state); an operator who turns coalescing back on
    gets the stage named as coalesced."""
    from pyspark.sql import SparkSession

    from sparkclient.contract.binding import MismatchReason
    from sparkclient.contract.sparkconf import session_settings
    from sparkclient.contract.spec import ADAPTIVE_COALESCE_CONF
    from sparkclient.runner.session import checkpoint_has_state, start_query

    knobs = [Knob("source_partitions", default=2, min=1, max=8, sets=KnobTarget.SOURCE_PARTITIONS),
             Knob("shuffle", default=6, min=1, max=16, sets=KnobTarget.SHUFFLE_PARTITIONS)]
    values = {"source_partitions": 2, "shuffle": 6}

    class Spec:
        ref, checkpoint = "tests:keyed", None

        @staticmethod
        def build(spark, knobs):
            from pyspark.sql import functions as F  # noqa: N812

            rows = (spark.readStream.format("rate").option("rowsPerSecond", 200)
                    .option("numPartitions", knobs["source_partitions"]).load()
                    .withColumn("key", F.col("value") % 50).repartition("key"))
            return (rows.select("key", "value").writeStream.format("noop").trigger(processingTime="1 second")
                    .option("checkpointLocation", str(Spec.checkpoint)).start())

    def run(operator_conf, checkpoint=None):
        settings = session_settings(knobs, values, operator_conf)
        for key, value in operator_conf.items():
            spark.conf.set(key, value)
        Spec.checkpoint = checkpoint or tmp_path / f"cp-{len(list(tmp_path.iterdir()))}"
        query = start_query(spark, Spec, values, settings).query
        try:
            wait_for(lambda: len([p for p in query.recentProgress if p.numInputRows > 0]) >= 2, timeout_s=60,
                     what="two batches with rows")
            stages = plan_stages_of(query)
            last, run_id = query.lastProgress["batchId"], str(query.runId)
        finally:
            query.stop()
        tasks = _tasks_of_batch(spark, run_id, last)
        return stages, bind_stages(stages, knobs, values, tasks)

    spark = SparkSession.builder.master("local[2]").appName("binding-coalesce").getOrCreate()
    try:
        stages, runner_default = run({})
        assert spark.conf.get(ADAPTIVE_COALESCE_CONF) == "false"
        first_checkpoint = Spec.checkpoint
        # The knob changes 6 -> 3 and the query restarts on its checkpoint: a stateless query is not
        # pinned by it (Spark's offset log pins only the stateful operators' partitions).
        values["shuffle"] = 3
        assert not checkpoint_has_state(first_checkpoint)
        restarted_stages, restarted = run({}, checkpoint=first_checkpoint)
        values["shuffle"] = 6
        _, operator_on = run({ADAPTIVE_COALESCE_CONF: "true"})
    finally:
        for key in (ADAPTIVE_COALESCE_CONF, "spark.sql.shuffle.partitions"):
            spark.conf.unset(key)
        spark.stop()

    assert [(s.input, s.partitions) for s in stages] == [(StageInput.SOURCE, None), (StageInput.SHUFFLE, 6)]
    assert [(b.status, b.knob, b.tasks_ran) for b in runner_default] == [
        (BindingStatus.BOUND, "source_partitions", 2), (BindingStatus.BOUND, "shuffle", 6)]
    assert restarted_stages[1].partitions == 3
    assert [(b.status, b.tasks_ran) for b in restarted] == [(BindingStatus.BOUND, 2), (BindingStatus.BOUND, 3)]
    coalesced = operator_on[1]
    assert (coalesced.status, coalesced.reason) == (BindingStatus.MISMATCH, MismatchReason.COALESCED)
    assert coalesced.tasks_ran < 6


def _tasks_of_batch(spark, run_id: str, batch_id: int) -> list[int]:
    """Tasks of each stage of micro-batch ``batch_id`` of query run ``run_id``, upstream first, as the
    collector reads them from Spark's REST API."""
    from sparkclient.collector.rest import SparkRestClient
    from sparkclient.collector.stages import BATCH_STAGE_STATUSES, batch_jobs, batch_stages

    with SparkRestClient(spark.sparkContext.uiWebUrl) as rest:
        app = rest.applications()[0]["id"]
        jobs = wait_for(lambda: batch_jobs(rest.jobs(app, "succeeded"), run_id).get(batch_id), timeout_s=30,
                        what=f"batch {batch_id}'s jobs in REST")
        ordered, missing = batch_stages(jobs, rest.stages(app, BATCH_STAGE_STATUSES))
    assert not missing
    return [int(stage["numTasks"]) for stage in ordered]


def test_a_stream_static_and_a_stream_stream_join_bind_in_the_order_spark_runs_them(tmp_path):
    """Two user shapes on real Spark. A stream joined with a broadcast table: the broadcast runs as a
    job of its own in every batch (no stage of the plan, none of the batch), so plan and batch have two
    stages. A stream-stream join: the plan's stages (left input, right input, join) are the batch's
    stages in data-flow order in every batch, though Spark numbers the two inputs in either order."""
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F  # noqa: N812

    spark = (SparkSession.builder.master("local[2]").appName("binding-joins")
             .config("spark.sql.shuffle.partitions", "4").getOrCreate())
    try:
        spark.range(0, 5000).select(F.col("id").alias("k"), (F.col("id") % 7).alias("cat")) \
            .write.parquet(str(tmp_path / "dim"))
        dim = spark.read.parquet(str(tmp_path / "dim"))
        rows = (spark.readStream.format("rate").option("rowsPerSecond", 200).option("numPartitions", 2).load()
                .select((F.col("value") % 5000).alias("k")))
        query = (rows.join(dim, "k").groupBy("cat").count().writeStream.outputMode("complete").format("noop")
                 .trigger(processingTime="1 second").option("checkpointLocation", str(tmp_path / "cp1")).start())
        wait_for(lambda: len([p for p in query.recentProgress if p.numInputRows > 0]) >= 2, timeout_s=60,
                 what="two batches with rows of the stream-static join")
        static_plan = plan_stages_of(query)
        static_tasks = _tasks_of_batch(spark, str(query.runId), query.lastProgress["batchId"])
        query.stop()

        def rate(per_s: int, partitions: int, name: str):
            return (spark.readStream.format("rate").option("rowsPerSecond", per_s)
                    .option("numPartitions", partitions).load()
                    .select((F.col("value") % 500).alias(f"{name}_k"), F.col("timestamp").alias(f"{name}_ts"))
                    .withWatermark(f"{name}_ts", "10 seconds"))

        joined = rate(300, 2, "a").join(rate(100, 3, "b"), F.expr(
            "a_k = b_k AND b_ts >= a_ts AND b_ts <= a_ts + interval 10 seconds"))
        query = (joined.writeStream.format("noop").trigger(processingTime="1 second")
                 .option("checkpointLocation", str(tmp_path / "cp2")).start())
        # A batch in which one input read nothing runs without that input's scan stage (seen on CI: [2, 4]);
        # the collector leaves such a batch out of the vertices. The order is checked where both scans ran.
        def both_read() -> list[int]:
            return [p.batchId for p in query.recentProgress
                    if len(p.sources) == 2 and all(source.numInputRows > 0 for source in p.sources)]

        wait_for(lambda: len(both_read()) >= 5, timeout_s=90,
                 what="five batches of the stream-stream join in which both inputs read rows")
        join_plan = plan_stages_of(query)
        run_id = str(query.runId)
        batches = both_read()[-4:]
        join_tasks = [_tasks_of_batch(spark, run_id, batch) for batch in batches]
        query.stop()
    finally:
        spark.stop()

    assert static_plan is not None and len(static_plan) == 2 and len(static_tasks) == 2
    assert "BroadcastHashJoin" in static_plan[0].operators and "BroadcastExchange" not in static_plan[0].operators
    assert static_tasks == [2, 4]
    assert join_plan is not None
    assert [(s.input, s.partitions) for s in join_plan] == [(StageInput.SOURCE, None), (StageInput.SOURCE, None),
                                                            (StageInput.SHUFFLE, 4)]
    assert join_tasks == [[2, 3, 4]] * len(batches)  # the left input (2 partitions) first, in every such batch
