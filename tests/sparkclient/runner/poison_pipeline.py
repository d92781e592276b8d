"""A pipeline written to the README's contract whose query raises at its first batch when its ``poison``
knob is 1: the old configuration (``poison=0``) runs, a new one with ``poison=1`` dies at once
(``test_first_batch_deadline_spark.py``).

A ``rate`` source of 20 rows/s into the ``noop`` sink, a 1 s trigger, the checkpoint under the
runner's work directory; with ``poison=1`` every row goes through ``raise_error`` (a task failure, as a
bad record or a failing expression makes one), so the first batch fails and the query with it.
``cores`` is the executors knob (local mode: a change starts a new driver, the warm handover);
``poison`` sets nothing else (a change of it alone restarts the query in the driver).

Run as ``python -m sparkclient run --pipeline tests.sparkclient.runner.poison_pipeline:build``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import functions as F

from sparkclient.contract.spec import Knob, KnobTarget, pipeline, run_context

#: The message of the error a poisoned batch raises (the runner's failure names it).
POISONED = "poisoned configuration"


@pipeline(knobs=[
    Knob("cores", default=1, min=1, max=2, sets=KnobTarget.EXECUTORS),
    Knob("poison", default=0, min=0, max=1, description="1: every batch raises"),
])
def build(spark: Any, knobs: Mapping[str, int]) -> Any:
    """The query (see the module docstring)."""
    rows = spark.readStream.format("rate").option("rowsPerSecond", 20).option("numPartitions", 1).load()
    if knobs["poison"]:
        rows = rows.withColumn("checked", F.when(F.col("value") >= 0, F.raise_error(F.lit(POISONED))))
    return (rows.writeStream.queryName("poison").format("noop")
            .option("checkpointLocation", str(run_context().checkpoint)).trigger(processingTime="1 second").start())
