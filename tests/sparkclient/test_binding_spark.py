"""Stage ↔ knob binding on a real Spark 4 session for a stateless query writing to a DSv2 sink.

Such a query runs each micro-batch with adaptive execution: its executed plan is
``WriteToDataSourceV2 → AdaptiveSparkPlan`` with the stages inside the adaptive plan's final plan.
Found running a user's pipeline (a ``repartition(n, key)`` into a ``noop`` sink) in ``make demo``:
the plan walk stopped at ``AdaptiveSparkPlan`` and published one stage where Spark ran two, so every
stage was a "stage count" mismatch and nothing was ever proposed for the job.
"""

from __future__ import annotations

import pytest

from sparkclient.binding import BindingStatus, StageInput, bind_stages, plan_stages_of
from sparkclient.contract import Knob, KnobTarget
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
