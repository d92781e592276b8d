"""The micro-batch planner (ARCHITECTURE.md "DS2 on Spark micro-batches")."""

import math

import pytest

from scaling import ClusterState, Edge, Policy, Topology, Vertex, VertexMetrics, plan_micro_batch


def three_stages(*, pinned_second: bool) -> tuple[Topology, dict[str, VertexMetrics]]:
    """Three stages with true processing rates 2,000 / 500 / 4,000 records per busy core-second and
    selectivities 1 / 1 / 0.01, at 1,000 records/s arriving, no backlog, 10 % batch overhead.

    Busy time per task is chosen to give those rates: stage 1 (1 task) is busy 500 ms/s
    (1000 / 0.5 = 2000), stage 2 (2 tasks) 1000 ms/s each (1000 / 2 = 500), stage 3 (1 task)
    250 ms/s (1000 / 0.25 = 4000).
    """
    topology = Topology(
        (Vertex("scan", parallelism=1, source=True), Vertex("enrich", parallelism=2, adjustable=not pinned_second),
         Vertex("agg", parallelism=1)),
        (Edge("scan", "enrich"), Edge("enrich", "agg")))
    metrics = {
        "scan": VertexMetrics(1000, 1000, 500, batch_overhead_s=0.1),
        "enrich": VertexMetrics(1000, 1000, 1000, batch_overhead_s=0.1),
        "agg": VertexMetrics(1000, 10, 250, batch_overhead_s=0.1),
    }
    return topology, metrics


def test_worked_example_cores_executors_and_ideal_parallelism():
    """Worked by hand:
    busy cores needed per second = 1000/2000 + 1000/500 + 1000/4000 = 0.5 + 2 + 0.25 = 2.75;
    C* = ceil(2.75 / 0.7 / (1 - 0.1)) = ceil(4.365) = 5 -> 5 executors of 1 core;
    π = ceil(1000 / (2000 × 0.7)) = 1, ceil(1000 / (500 × 0.7)) = 3, ceil(1000 / (4000 × 0.7)) = 1.
    """
    topology, metrics = three_stages(pinned_second=False)
    plan = plan_micro_batch(topology, metrics, ClusterState(executors=1, trigger_interval_s=1.0),
                            Policy(restart_time_s=0))
    assert plan.cores_needed == 5
    assert (plan.executors_current, plan.executors_proposed, plan.cores_per_executor) == (1, 5, 1)
    assert [plan.vertex(v).true_processing_rate for v in ("scan", "enrich", "agg")] == [2000, 500, 4000]
    assert [plan.vertex(v).ideal_parallelism for v in ("scan", "enrich", "agg")] == [1, 3, 1]
    assert [plan.vertex(v).selectivity for v in ("scan", "enrich", "agg")] == [1, 1, 0.01]
    assert plan.overhead_fraction == pytest.approx(0.1)
    assert plan.decision == "scale" and plan.bottleneck is None
    assert all(plan.vertex(v).proposed == 5 for v in ("scan", "enrich", "agg"))
    assert plan.load == pytest.approx(2.75 / 0.9)


def test_pinned_stage_is_reported_as_bottleneck():
    """Stage 2 needs 2 busy core-seconds per second; pinned at 2 tasks it alone fills 100 % of each
    trigger interval (> 90 % left after overhead), so more cores cannot help it."""
    topology, metrics = three_stages(pinned_second=True)
    plan = plan_micro_batch(topology, metrics, ClusterState(executors=1, trigger_interval_s=1.0),
                            Policy(restart_time_s=0))
    assert plan.bottleneck == "enrich"
    assert plan.vertex("enrich").proposed == 2
    assert any("enrich is the bottleneck" in r for r in plan.reasons)


def test_within_band_is_no_change_with_reason():
    topology, metrics = three_stages(pinned_second=False)
    plan = plan_micro_batch(topology, metrics, ClusterState(executors=4, trigger_interval_s=1.0),
                            Policy(restart_time_s=0))
    # load = 2.75 / (4 × 0.9) = 0.76, inside [0.4, 1.0]
    assert plan.decision == "no-change"
    assert plan.executors_proposed == 4
    assert all(v.proposed == v.current for v in plan.vertices)
    assert "within the utilization band [0.4, 1.0]" in plan.reasons[0]


def test_backlog_adds_catch_up_rate_and_idle_vertex_has_infinite_rate():
    topology = Topology((Vertex("src", parallelism=1, source=True), Vertex("idle", parallelism=1)),
                        (Edge("src", "idle"),))
    metrics = {"src": VertexMetrics(100, 0, 100, backlog=60_000), "idle": VertexMetrics(0, 0, 0)}
    plan = plan_micro_batch(topology, metrics, ClusterState(executors=1), Policy(catch_up_duration_s=600,
                                                                                 restart_time_s=0))
    src = plan.vertex("src")
    assert src.catch_up_data_rate == pytest.approx(100.0)  # 60,000 records / 600 s
    assert src.true_processing_rate == pytest.approx(1000.0)
    assert plan.vertex("idle").true_processing_rate == math.inf
    # (100 + 100) / 1000 = 0.2 busy cores; / 0.7 -> 1 core
    assert plan.cores_needed == 1


def test_source_partitions_bound_the_source_vertex():
    topology = Topology((Vertex("src", parallelism=1, source=True, partitions=2), Vertex("map", parallelism=1)),
                        (Edge("src", "map"),))
    metrics = {"src": VertexMetrics(1000, 1000, 500), "map": VertexMetrics(1000, 1000, 1000)}
    plan = plan_micro_batch(topology, metrics, ClusterState(executors=1), Policy(restart_time_s=0))
    assert plan.executors_proposed == 3  # (0.5 + 1) / 0.7 = 2.14 -> 3
    assert plan.vertex("src").proposed == 2
    assert plan.vertex("map").proposed == 3
