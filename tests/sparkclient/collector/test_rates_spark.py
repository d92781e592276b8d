"""On real Spark: rates and backlog of a ``rate`` source around an in-process restart.

One SparkSession (local[2]) runs a ``rate`` source at :data:`ROWS_PER_S` → a windowed count with a
watermark (stateful) → ``foreachBatch``. The query is stopped, left down for :data:`DOWNTIME_S`,
and started again from the same checkpoint in the same session. The live collect
(:func:`sparkclient.collector.collect.collect_sample` against the driver's REST API, with both runs'
progress) then measures:

- the window right after the restart, which holds the catch-up batch: arrival within 15% (11.3);
- the first window after the stabilization interval (the web app's defaults,
  ``SCALER_STABILIZATION_S`` = 30 s, ``SCALER_COLLECT_INTERVAL_S`` = 15 s): arrival within 10% (19.2);
- batches that fall behind (a Python UDF made slow): the backlog is > 0 and grows with the lag (11.3).
"""

from __future__ import annotations

import json
import os
import time

import pytest

from sparkclient.collector.collect import collect_sample
from sparkclient.collector.rest import SparkRestClient
from tests.waiting import wait_for

pytestmark = pytest.mark.spark

ROWS_PER_S = 500
DOWNTIME_S = 6.0
STABILIZATION_S = 30.0
WINDOW_S = 15.0
TRIGGER_S = 1.0


def _progress_json(query) -> list[dict]:
    return [json.loads(p.json) if hasattr(p, "json") else dict(p) for p in query.recentProgress]


def test_arrival_after_an_in_process_restart_and_backlog_when_behind(tmp_path):
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F  # noqa: N812

    flag = tmp_path / "slow"  # while it exists, every row costs the Python UDF 10 ms: batches fall behind

    flag_path = str(flag)

    def slow_key(value):  # noqa: ANN001, ANN202 - a plain Python UDF
        if os.path.exists(flag_path):
            time.sleep(0.01)
        return value % 8

    spark = (SparkSession.builder.master("local[2]").appName("rates-restart")
             .config("spark.sql.shuffle.partitions", "2").config("spark.ui.port", "4071")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    tag = F.udf(slow_key, "long")

    def start():
        stream = (spark.readStream.format("rate").option("rowsPerSecond", ROWS_PER_S).option("numPartitions", 2)
                  .load().withColumn("key", tag("value")).withWatermark("timestamp", "10 seconds")
                  .groupBy(F.window("timestamp", "5 seconds"), "key").count())
        return (stream.writeStream.queryName("rates").outputMode("append").format("parquet")
                .option("path", str(tmp_path / "out")).option("checkpointLocation", str(tmp_path / "cp"))
                .trigger(processingTime=f"{TRIGGER_S} seconds").start())

    try:
        app_id = spark.sparkContext.applicationId
        client = SparkRestClient(spark.sparkContext.uiWebUrl, timeout_s=10.0)
        first = start()
        wait_for(lambda: len([p for p in _progress_json(first) if p["numInputRows"] > 0]) >= 6, timeout_s=90,
                 what="six batches with rows in the first run")
        first.stop()
        before = _progress_json(first)
        time.sleep(DOWNTIME_S)
        restarted_at = time.time()
        second = start()
        run_id = str(second.runId)

        def sample_at(end_s: float, window_s: float):
            while time.time() < end_s + 1.5:  # the progress of a batch that just completed is published
                time.sleep(0.2)
            return collect_sample(client, app_id, before + _progress_json(second), run_id=run_id,
                                  trigger_interval_s=TRIGGER_S, window_s=window_s, now_s=end_s)

        catch_up = sample_at(restarted_at + WINDOW_S, WINDOW_S)
        stable = sample_at(restarted_at + STABILIZATION_S + WINDOW_S, WINDOW_S)
        # The catch-up batch: the first new batch of the run (a batch planned before the stop is re-run
        # first with its logged offsets, so it may be the second progress of the run).
        first_batch = max(_progress_json(second)[:2], key=lambda p: p["numInputRows"])
        print(f"\ncatch-up batch {first_batch['batchId']}: {first_batch['numInputRows']} rows; "
              f"window with it: arrival {catch_up.arrival_rate_per_s:.1f}/s, input {catch_up.input_rate_per_s:.1f}/s "
              f"over {catch_up.window_s:.2f} s ({catch_up.batches} batches); first window after stabilization: "
              f"arrival {stable.arrival_rate_per_s:.1f}/s, input {stable.input_rate_per_s:.1f}/s, "
              f"backlog {stable.backlog} ({stable.batches} batches); configured {ROWS_PER_S}/s")
        # It did carry the downtime's rows: at least the rate times the downtime (the rate source counts
        # whole seconds, so a first batch planned exactly 6 s after the last offset holds exactly 3,000).
        assert first_batch["numInputRows"] >= ROWS_PER_S * DOWNTIME_S
        assert catch_up.arrival_rate_per_s == pytest.approx(ROWS_PER_S, rel=0.15)
        assert stable.arrival_rate_per_s == pytest.approx(ROWS_PER_S, rel=0.10)
        assert stable.input_rate_per_s == pytest.approx(ROWS_PER_S, rel=0.10)
        assert stable.backlog < ROWS_PER_S * 3 * TRIGGER_S
        # The busiest task from the real driver's taskSummary (skew): measured for every
        # busy stage, never below the mean task, and no stage's summary was missing.
        busy = [v for v in stable.vertices if v.busy_s > 0]
        assert busy and all(v.busy_max_s is not None and v.busy_max_s >= v.busy_s / v.tasks * (1 - 1e-9)
                            for v in busy), [(v.vertex_id, v.busy_s, v.tasks, v.busy_max_s) for v in busy]
        assert not [e for e in stable.errors if "slowest task" in e]
        print("busiest task / mean task: " + ", ".join(
            f"{v.vertex_id} x{v.busy_max_s / (v.busy_s / v.tasks):.2f}" for v in busy))

        # Batches fall behind: each row now costs 10 ms (5 s of work per second of data on 2 cores).
        flag.write_text("slow")
        started = len(_progress_json(second))
        wait_for(lambda: len(_progress_json(second)) > started + 1, timeout_s=60,
                 what="a slow batch completes")
        time.sleep(3.0)
        now = time.time()
        behind = collect_sample(client, app_id, before + _progress_json(second), run_id=run_id,
                                trigger_interval_s=TRIGGER_S, window_s=WINDOW_S, now_s=now)
        flag.unlink()
        newest = _progress_json(second)[-1]
        print(f"falling behind: backlog {behind.backlog} rows (steady {stable.backlog}); newest batch "
              f"{newest['batchId']} took {newest['durationMs']['triggerExecution']} ms for "
              f"{newest['numInputRows']} rows; arrival {behind.arrival_rate_per_s:.1f}/s")
        assert not behind.backlog_unknown
        assert behind.backlog > ROWS_PER_S * 3
        assert behind.arrival_rate_per_s == pytest.approx(ROWS_PER_S, rel=0.15)
        second.stop()
        client.close()
    finally:
        for query in spark.streams.active:
            query.stop()
        spark.stop()
