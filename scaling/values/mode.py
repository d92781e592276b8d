"""How a job runs, as the model distinguishes it."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Mode"]


class Mode(StrEnum):
    """``continuous``: a dataflow with a slot per task (Flink, DS2); ``micro-batch``: Spark Structured
    Streaming, whose stages run one after another on the shared cores (docs/ARCHITECTURE.md)."""

    CONTINUOUS = "continuous"
    MICRO_BATCH = "micro-batch"
