"""Evaluated metrics per vertex and the cluster's current shape.

The fields follow SCENARIO.md ("Metrics per vertex"): averages over the metric window,
per second.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


class MetricsError(ValueError):
    """A metric value is out of its domain (negative rate, busy time above 1000 ms/s, ...)."""


@dataclass(frozen=True)
class VertexMetrics:
    """One vertex's metrics averaged over the window.

    Attributes:
        records_in_per_s: records consumed per second, vertex total (records/s).
        records_out_per_s: records emitted per second, vertex total (records/s).
        busy_time_ms_per_s: busy time per second averaged over the vertex's tasks
            (subtasks), 0..1000 ms/s. In micro-batch mode: Σ executorRunTime / W / tasks.
        backlog: records waiting at a source (latest − committed offset).
        backlog_growth_per_s: derivative of the backlog (records/s).
        batch_overhead_s: micro-batch mode: seconds of each batch spent outside tasks.
    """

    records_in_per_s: float
    records_out_per_s: float
    busy_time_ms_per_s: float
    backlog: float = 0.0
    backlog_growth_per_s: float = 0.0
    batch_overhead_s: float = 0.0

    def __post_init__(self) -> None:
        for name in ("records_in_per_s", "records_out_per_s", "backlog", "batch_overhead_s"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise MetricsError(f"{name}: must be a finite number >= 0, got {value}")
        if not math.isfinite(self.busy_time_ms_per_s) or not 0 <= self.busy_time_ms_per_s <= 1000:
            raise MetricsError(f"busy_time_ms_per_s: must be within 0..1000, got {self.busy_time_ms_per_s}")
        if not math.isfinite(self.backlog_growth_per_s):
            raise MetricsError(f"backlog_growth_per_s: must be finite, got {self.backlog_growth_per_s}")


@dataclass(frozen=True)
class ClusterState:
    """The executors of a Spark application (micro-batch mode).

    In local mode (``local[N]``) a core is modelled as one executor of one core, so
    ``executors × cores_per_executor`` is always the number of task slots.
    """

    executors: int
    cores_per_executor: int = 1
    min_executors: int = 1
    max_executors: int = 16
    trigger_interval_s: float = 1.0

    def __post_init__(self) -> None:
        if self.executors < 1 or self.cores_per_executor < 1:
            raise MetricsError("cluster: executors and cores_per_executor must be >= 1")
        if not 1 <= self.min_executors <= self.max_executors:
            raise MetricsError(f"cluster: need 1 <= min_executors <= max_executors, got "
                               f"{self.min_executors}..{self.max_executors}")
        if self.trigger_interval_s <= 0:
            raise MetricsError(f"trigger_interval_s: must be > 0, got {self.trigger_interval_s}")

    @property
    def cores(self) -> int:
        """Task slots: executors × cores per executor."""
        return self.executors * self.cores_per_executor
