"""What one evaluation is asked: the window's values, the policy, the autoscaler's memory and the clock."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from scaling.policy.policy import Policy
from scaling.values.memory import MemoryInputs
from scaling.values.metrics import ClusterState, VertexMetrics
from scaling.values.mode import Mode
from scaling.values.readiness import SampleIssue
from scaling.values.state import ScalerState
from scaling.values.topology import Topology


@dataclass(frozen=True)
class PlanRequest:
    """Everything one evaluation needs.

    Attributes:
        mode: ``continuous`` or ``micro-batch``.
        cluster: the executors (micro-batch mode), else None.
        batch_durations_s: batch durations in the scaling interval, seconds (SPARK-12133's R).
        not_ready: the issues of the window's samples that are not ready (``scaling.values.readiness``); the
            DS2 micro-batch plan never scales down on them.
        now_s: the clock, seconds since the Unix epoch.
        memory: the window's memory readings, the memory policy and knobs (micro-batch mode), or None:
            no memory gate and no memory decision.
    """

    topology: Topology
    metrics: Mapping[str, VertexMetrics]
    policy: Policy
    mode: Mode = Mode.CONTINUOUS
    cluster: ClusterState | None = None
    state: ScalerState = field(default_factory=ScalerState)
    now_s: float = 0.0
    batch_durations_s: tuple[float, ...] = ()
    not_ready: tuple[SampleIssue, ...] = ()
    memory: MemoryInputs | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", Mode(self.mode))  # ValueError for a mode that is not one

    @property
    def batch_duration_s(self) -> float | None:
        """Mean batch duration over the scaling interval, seconds, or None without batches."""
        return sum(self.batch_durations_s) / len(self.batch_durations_s) if self.batch_durations_s else None
