"""A user's own pipeline, as the tests write it into a folder outside the project.

:data:`SOURCE` is the module's text: Spark's JSON file source over an inbox folder, one
``repartition(n)`` knob, a CPU cost per row, a stateful windowed count on RocksDB and a parquet
file sink. :func:`write_module` puts it at ``<folder>/mypipes/clicks.py``; run it with
``python -m sparkclient run --pipeline mypipes.clicks:build`` and ``PYTHONPATH=<folder>``.
Rows come from :func:`sparkclient.demo.examples.files_load.write_file` (``user, page, ts, ms``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

SOURCE = '''
import os
import time
from pyspark.sql import functions as F
from sparkclient.contract.spec import Knob, KnobTarget, pipeline, run_context

SCHEMA = "user BIGINT, page STRING, ts TIMESTAMP, ms BIGINT"


def _cost(us):
    def score(batches):
        for pdf in batches:
            deadline = time.perf_counter() + us * len(pdf) / 1e6
            while time.perf_counter() < deadline:
                pass
            yield pdf
    return score


@pipeline(knobs=[
    Knob("cores", default=1, min=1, max=4, sets=KnobTarget.EXECUTORS),
    Knob("work_partitions", default=1, min=1, max=8, sets=KnobTarget.REPARTITION),
    Knob("state_partitions", default=2, min=1, max=8, sets=KnobTarget.STATE_PARTITIONS),
    Knob("cost_us", default=1500, min=0, max=100000),
])
def build(spark, knobs):
    ctx = run_context()
    inbox = os.environ["CLICKS_INBOX"]
    spark.conf.set("spark.sql.streaming.stateStore.providerClass",
                   "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
    rows = (spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 50).json(inbox)
            .repartition(knobs["work_partitions"])
            .mapInPandas(_cost(knobs["cost_us"]), schema=SCHEMA))
    counts = (rows.withWatermark("ts", "5 seconds").groupBy(F.window("ts", "5 seconds").alias("w"))
              .agg(F.count("*").alias("clicks")).select(F.col("w.start").alias("window_start"), "clicks"))
    return (counts.writeStream.queryName("clicks").outputMode("append").format("parquet")
            .option("path", str(ctx.workdir / "out")).option("checkpointLocation", str(ctx.checkpoint))
            .trigger(processingTime="2 seconds").start())
'''


def write_module(folder: Path) -> str:
    """Write the module under ``folder`` (a package ``mypipes``); returns the ``--pipeline`` reference."""
    package = folder / "mypipes"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text("")
    (package / "clicks.py").write_text(SOURCE)
    return "mypipes.clicks:build"


def sink_clicks(out: Path) -> int:
    """Clicks counted in the parquet sink, over the files its ``_spark_metadata`` log committed."""
    metadata = out / "_spark_metadata"
    files: set[str] = set()
    logs = [p for p in metadata.iterdir() if p.name.split(".")[0].isdigit()] if metadata.is_dir() else []
    for log in sorted(logs, key=lambda p: int(p.name.split(".")[0])):  # N and N.compact; not .N.crc
        for line in log.read_text().splitlines()[1:]:  # line 1 is the log version
            entry = json.loads(line)
            (files.add if entry.get("action") == "add" else files.discard)(entry["path"])
    total = 0
    for path in files:
        total += sum(pq.read_table(path.removeprefix("file://").removeprefix("file:")).column("clicks").to_pylist())
    return total
