"""The scaling model: pure Python, no Django, no HTTP, no Spark.

Frozen dataclasses in, frozen dataclasses out; deterministic for a given input.
Follows FLIP-271 (the Flink Kubernetes operator autoscaler) and the DS2 paper
(Kalavri et al., "Three steps is all you need", OSDI 2018), mapped to Spark micro-batches
as described in ARCHITECTURE.md.
"""

from scaling.metrics import ClusterState, VertexMetrics
from scaling.planner import JobPlan, VertexPlan, plan_micro_batch
from scaling.policy import Policy
from scaling.topology import Edge, Topology, Vertex

__all__ = [
    "ClusterState", "Edge", "JobPlan", "Policy", "Topology", "Vertex", "VertexMetrics",
    "VertexPlan", "plan_micro_batch",
]
