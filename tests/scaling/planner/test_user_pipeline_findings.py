"""Findings of users' pipelines: a stage on Spark's default shuffle partitions, which no knob sets,
whose tasks dominate the batch; and pinned stages more cores cannot help, for which no cores are added."""

from __future__ import annotations

from scaling.planner.microbatch import plan_micro_batch
from scaling.policy.policy import Policy
from scaling.values.findings import PinnedAction
from scaling.values.metrics import ClusterState, VertexMetrics
from scaling.values.reasons import Limit
from scaling.values.topology import Edge, PinCause, Topology, Vertex


def _plan(state: Vertex, state_busy_ms: float, cores: int = 1, scan_tasks: int = 2, scan_busy_ms: float = 50.0,
          adjustable_scan: bool = True):
    topology = Topology((Vertex("v0", parallelism=scan_tasks, source=True, adjustable=adjustable_scan), state),
                        (Edge("v0", "v1"),))
    metrics = {"v0": VertexMetrics(100, 100, scan_busy_ms, batch_overhead_s=0.1),
               "v1": VertexMetrics(100, 100, state_busy_ms, batch_overhead_s=0.1)}
    cluster = ClusterState(executors=cores, cores_per_executor=1, min_executors=1, max_executors=8,
                           trigger_interval_s=2.0)
    return plan_micro_batch(topology, metrics, cluster, Policy())


def test_spark_default_partitions_that_dominate_the_batch_are_a_finding() -> None:
    # 200 tasks on 1 core, each busy 9 ms/s: 1.8 busy core-seconds per second, no knob sets them
    plan = _plan(Vertex("v1", parallelism=200, adjustable=False, pin_cause=PinCause.SHUFFLE_DEFAULT), 9.0)
    found = [f for f in plan.findings if f.action is PinnedAction.DEFAULT_SHUFFLE_PARTITIONS]
    assert [f.vertex_id for f in found] == ["v1"]
    assert found[0].data["tasks"] == 200 and found[0].data["cores"] == 1 and found[0].data["share"] > 0.5
    # light tasks do not dominate: no finding
    light = _plan(Vertex("v1", parallelism=200, adjustable=False, pin_cause=PinCause.SHUFFLE_DEFAULT), 0.01)
    assert not [f for f in light.findings if f.action is PinnedAction.DEFAULT_SHUFFLE_PARTITIONS]


def test_no_cores_are_added_where_pinned_stages_alone_stay_above_the_band() -> None:
    # every stage unbound (a foreachBatch query the binding cannot size): one task busy 0.98 s per
    # second, above the band on any number of cores; the scan's 8 tasks on 2 cores would take more
    plan = _plan(Vertex("v1", parallelism=1, adjustable=False, pin_cause=PinCause.NO_KNOB), 980.0, cores=2,
                 scan_tasks=8, scan_busy_ms=400.0, adjustable_scan=False)
    assert plan.executors_proposed == plan.executors_current == 2
    assert Limit.CORES_CANNOT_HELP in {limit.code for limit in plan.limits}
    assert any(f.vertex_id == "v1" for f in plan.findings)
