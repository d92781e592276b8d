"""The scaling model: pure Python, no Django, no HTTP, no Spark.

Frozen dataclasses in, frozen dataclasses out; deterministic for a given input (which includes a
clock value). Follows FLIP-271 (the Flink Kubernetes operator autoscaler) and the DS2 paper
(Kalavri et al., "Three steps is all you need", OSDI 2018), mapped to Spark micro-batches as
described in ARCHITECTURE.md. ``python -m scaling evaluate FILE.json`` runs SCENARIO.md scenarios.
"""

from scaling.metrics import ClusterState, MetricWindow, VertexMeasurement, VertexMetrics, VertexSamples
from scaling.plan import JobPlan, VertexPlan
from scaling.planner import plan_job, plan_micro_batch
from scaling.algorithms import PlanRequest, evaluate
from scaling.policy import Policy
from scaling.state import ScalerState
from scaling.topology import Edge, Topology, Vertex

__all__ = [
    "ClusterState", "Edge", "JobPlan", "MetricWindow", "PlanRequest", "Policy", "ScalerState", "Topology", "Vertex",
    "VertexMeasurement", "VertexMetrics", "VertexPlan", "VertexSamples", "evaluate", "plan_job", "plan_micro_batch",
]
