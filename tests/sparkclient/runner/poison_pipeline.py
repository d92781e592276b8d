"""A pipeline written to the README's contract whose query raises at its first batch when its ``poison``
knob is 1: the old configuration (``poison=0``) runs, a new one with ``poison=1`` dies at once
(``test_first_batch_deadline_spark.py``).

A ``rate`` source of 20 rows/s into a ``foreachBatch`` sink that counts each batch's rows, or raises
``PoisonedConfiguration`` on a batch with ``poison=1``; a 1 s trigger, the checkpoint under the
runner's work directory. ``cores`` is the executors knob (local mode: a change starts a new driver,
the warm handover); ``poison`` sets nothing else (a change restarts the query in the driver).

Run as ``python -m sparkclient run --pipeline tests.sparkclient.runner.poison_pipeline:build``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sparkclient.contract.spec import Knob, KnobTarget, pipeline, run_context

#: The text of the exception a poisoned batch raises (the runner's failure names it).
POISONED = "poisoned configuration: this batch raises"


class PoisonedConfiguration(RuntimeError):
    """What a batch of the poisoned configuration raises."""


@pipeline(knobs=[
    Knob("cores", default=1, min=1, max=2, sets=KnobTarget.EXECUTORS),
    Knob("poison", default=0, min=0, max=1, description="1: every batch raises"),
])
def build(spark: Any, knobs: Mapping[str, int]) -> Any:
    """The query (see the module docstring)."""
    poisoned = bool(knobs["poison"])

    def write(batch: Any, batch_id: int) -> None:
        if poisoned:
            raise PoisonedConfiguration(f"{POISONED} (batch {batch_id})")
        batch.count()

    rows = spark.readStream.format("rate").option("rowsPerSecond", 20).option("numPartitions", 1).load()
    return (rows.writeStream.queryName("poison").foreachBatch(write)
            .option("checkpointLocation", str(run_context().checkpoint)).trigger(processingTime="1 second").start())
