"""A pipeline written to the README's contract whose query raises once it has lived ``raise_after_s``
seconds: the crash-loop acceptance's job (``tests/browser/test_crash_loop_browser.py``).

A ``rate`` source of a few rows per second into a ``foreachBatch`` function that counts them and,
from the first batch that starts ``raise_after_s`` s after the query was built, raises
:class:`ValueError` with :data:`MESSAGE`: every driver lives that long, completes batches, and dies
of the same Python error inside Spark.

Run as ``python -m sparkclient run --pipeline tests.sparkclient.runner.crash_pipeline:build``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from sparkclient.contract.spec import Knob, KnobTarget, pipeline, run_context

#: The message the query raises with (``{s}``: its ``raise_after_s``).
MESSAGE = "the crash pipeline raises once it has lived {s} s"


@pipeline(knobs=[
    Knob("cores", default=1, min=1, max=2, sets=KnobTarget.EXECUTORS),
    Knob("raise_after_s", default=15, min=1, max=3600, description="seconds the query lives before it raises"),
])
def build(spark: Any, knobs: Mapping[str, int]) -> Any:
    """The query (see the module docstring): checkpoint under the runner's work directory, a 1 s trigger."""
    ctx = run_context()
    built = time.monotonic()
    after_s = knobs["raise_after_s"]

    def each_batch(frame: Any, _batch_id: int) -> None:
        if time.monotonic() - built >= after_s:
            raise ValueError(MESSAGE.format(s=after_s))
        frame.count()

    rows = spark.readStream.format("rate").option("rowsPerSecond", 5).option("numPartitions", 1).load()
    return (rows.writeStream.queryName("crash").foreachBatch(each_batch)
            .option("checkpointLocation", str(ctx.checkpoint)).trigger(processingTime="1 second").start())
