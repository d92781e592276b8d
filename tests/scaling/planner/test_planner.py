"""The micro-batch planner (ARCHITECTURE.md "DS2 on Spark micro-batches")."""

import math

import pytest

from scaling.planner.microbatch import plan_micro_batch
from scaling.policy.policy import Policy
from scaling.values.metrics import ClusterState, VertexMetrics
from scaling.values.reasons import Limit, PlanReason, Reason
from scaling.values.topology import Edge, Topology, Vertex
from tests.scaling.factories import three_stages


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
    limit = plan.limit(Limit.PINNED_STAGE)
    assert limit is not None and limit.vertex_id == "enrich" and limit.data["fill"] == pytest.approx(2 / 2 / 0.9)
    # Cores that cannot help the pinned stage are not added. The target (0.7) is out of reach (enrich
    # alone needs 1.11 of each trigger). From 1 to 2 cores U drops 3.06 -> 1.53, the linear gain; from
    # C ≥ 2, U(C) = (0.75 / C + 1) / 0.9 and a step brings (0.75 / C) / (0.75 / C + 1) of the linear
    # gain: 27 % at C = 2, below scale_up_min_efficiency (0.3), so the plan stops at 2.
    assert plan.executors_proposed == 2
    stop = plan.limit(Limit.DIMINISHING_RETURNS)
    assert stop is not None and stop.data["cores"] == 2 and stop.data["next_cores"] == 3
    assert stop.data["utilization"] == pytest.approx(1.375 / 0.9)
    assert stop.data["next_utilization"] == pytest.approx(1.25 / 0.9)
    assert stop.data["efficiency"] == pytest.approx(0.375 / 1.375)
    # Without the rule, every core within one point of the lowest U (at 16 executors: 1.163) is added.
    assert plan_micro_batch(topology, metrics, ClusterState(executors=1, trigger_interval_s=1.0),
                            Policy(restart_time_s=0, scale_up_min_efficiency=0)).executors_proposed == 14


def test_within_band_is_no_change_with_reason():
    topology, metrics = three_stages(pinned_second=False)
    plan = plan_micro_batch(topology, metrics, ClusterState(executors=4, trigger_interval_s=1.0),
                            Policy(restart_time_s=0))
    # load = 2.75 / (4 × 0.9) = 0.76, inside [0.4, 1.0]
    assert plan.decision == "no-change"
    assert plan.executors_proposed == 4
    assert all(v.proposed == v.current for v in plan.vertices)
    assert plan.reasons[0].code == PlanReason.WITHIN_BAND
    assert (plan.reasons[0].data["low"], plan.reasons[0].data["high"]) == (0.4, 1.0)


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


def micro_batch_scenario(*, adjustable_enrich: bool) -> dict:
    """The worked example above in SCENARIO.md's micro-batch format."""
    def m(records_in, records_out, busy):
        return {"records_in_per_s": records_in, "records_out_per_s": records_out, "busy_time_ms_per_s": busy,
                "batch_overhead_s": 0.1}
    return {"format": 1, "mode": "micro-batch", "policy": {"restart_time_s": 0},
            "cluster": {"executors": 1, "cores_per_executor": 1, "min_executors": 1, "max_executors": 16},
            "trigger_interval_s": 1.0,
            "vertices": [{"id": "scan", "parallelism": 1, "source": True},
                         {"id": "enrich", "parallelism": 2, "adjustable": adjustable_enrich},
                         {"id": "agg", "parallelism": 1}],
            "edges": [{"from": "scan", "to": "enrich", "ship": "hash"},
                      {"from": "enrich", "to": "agg", "ship": "hash"}],
            "steps": [{"at_s": 0, "metrics": {"scan": m(1000, 1000, 500), "enrich": m(1000, 1000, 1000),
                                              "agg": m(1000, 10, 250)}}]}


def test_worked_example_through_the_scenario_format():
    import json

    from scaling.scenario.format import evaluate_text

    step = evaluate_text(json.dumps(micro_batch_scenario(adjustable_enrich=True)))["steps"][0]
    assert step["decision"] == "scale"
    assert step["executors"] == {"current": 1, "proposed": 5, "cores_needed": 5, "bottleneck": None, "limits": []}
    assert {v: step["vertices"][v]["ideal_parallelism"] for v in ("scan", "enrich", "agg")} == {
        "scan": 1, "enrich": 3, "agg": 1}
    assert {v: step["vertices"][v]["true_processing_rate"] for v in ("scan", "enrich", "agg")} == {
        "scan": 2000.0, "enrich": 500.0, "agg": 4000.0}
    assert all(step["vertices"][v]["proposed"] == 5 for v in ("scan", "enrich", "agg"))
    pinned = evaluate_text(json.dumps(micro_batch_scenario(adjustable_enrich=False)))["steps"][0]
    assert pinned["executors"]["bottleneck"] == "enrich"
    assert pinned["vertices"]["enrich"]["proposed"] == 2


def test_micro_batch_executor_scale_down_is_delayed_with_state():
    """FLINK-36018 on the executor count: 8 executors for a job needing 2 cores; with a state the
    scale-down is held for scale_down_interval_s (600 s), then applied; without one (the web app's
    stateless call) it is immediate."""
    from scaling.values.state import ScalerState

    topology, metrics = three_stages(pinned_second=False)
    cluster = ClusterState(executors=8, trigger_interval_s=1.0)
    policy = Policy(restart_time_s=0, scale_down_interval_s=600, utilization_target=0.9)
    # 2.75 busy cores / (8 × 0.9) = 0.38 < 0.6: below the band. C* = ceil(2.75 / 0.9 / 0.9) = 4.
    assert plan_micro_batch(topology, metrics, cluster, policy).executors_proposed == 4
    first = plan_micro_batch(topology, metrics, cluster, policy, state=ScalerState(), now_s=0)
    assert (first.decision, first.executors_proposed) == ("blocked", 8)
    assert Reason(PlanReason.HELD_EXECUTOR_SCALE_DOWN, None, {"current": 8, "target": 4, "due_s": 600,
                                                              "first_at_s": 0}) in first.reasons
    due = plan_micro_batch(topology, metrics, cluster, policy, state=first.next_state, now_s=600)
    assert (due.decision, due.executors_proposed) == ("scale", 4)


def _with_backlog(backlog: float) -> tuple[Topology, dict[str, VertexMetrics]]:
    topology, metrics = three_stages(pinned_second=False)
    metrics["scan"] = VertexMetrics(1000, 1000, 62.5, backlog=backlog, batch_overhead_s=0.1)
    return topology, metrics


BACKLOG_POLICY = dict(restart_time_s=0, catch_up_duration_s=300.0, backlog_lag_threshold_s=3600.0)


def test_catch_up_is_drained_with_the_utilization_headroom_not_added_on_top_of_it():
    """``microbatch_sizing.sizing_demand``: the target rate at the utilization target, and target +
    catch-up + restart at full capacity. 120,000 records of backlog over 300 s is 400 records/s more
    per stage: 0.2 + 0.8 + 0.1 = 1.1 busy cores on top of the 2.75 of the target rate. At 5 cores
    the target rate fills 2.75 / 5 / 0.9 = 0.611 <= 0.7 of each trigger interval and everything
    3.85 / 5 / 0.9 = 0.856 <= 1 (the backlog drains within the catch-up duration); 4 cores would be
    1.07. Flink's ``getTargetProcessingCapacity`` (λ / u + catch-up) gave ceil(3.52 / 0.63) = 6."""
    topology, metrics = _with_backlog(120_000)
    plan = plan_micro_batch(topology, metrics, ClusterState(executors=1, trigger_interval_s=1.0),
                            Policy(**BACKLOG_POLICY))
    assert plan.executors_proposed == 5 and plan.cores_needed == 5
    assert plan.predicted_utilization == pytest.approx(2.75 / 5 / 0.9)
    assert plan.utilization_now == pytest.approx(2.75 / 1 / 0.9)


def test_a_catch_up_never_sizes_the_target_rate_below_the_band():
    """600,000 records over 300 s: draining them within the catch-up duration needs
    ceil((2.75 + 5.5) / 0.9) = 10 cores, where the arrivals alone fill 0.306 < 0.4 (the next
    evaluation would scale down again). The plan takes the most cores whose utilization at the target
    rate is inside [0.4, 0.7]: 7 (0.437); in backlog mode (lag above the threshold) the drain sizing
    stands."""
    topology, metrics = _with_backlog(600_000)
    plan = plan_micro_batch(topology, metrics, ClusterState(executors=1, trigger_interval_s=1.0),
                            Policy(**BACKLOG_POLICY))
    assert plan.executors_proposed == 7
    assert plan.predicted_utilization == pytest.approx(2.75 / 7 / 0.9) and 0.4 <= plan.predicted_utilization <= 0.7
    backlog = plan_micro_batch(topology, metrics, ClusterState(executors=1, trigger_interval_s=1.0),
                               Policy(**{**BACKLOG_POLICY, "backlog_lag_threshold_s": 60.0}))
    assert backlog.backlog_mode and backlog.executors_proposed == 10


@pytest.mark.parametrize("busy_ms, reason, executors", [
    (800, PlanReason.WITHIN_BAND, 4),       # load exactly 0.8, the band's top: inside
    (801, PlanReason.LOAD_ABOVE_BAND, 7),
    (200, PlanReason.WITHIN_BAND, 4),       # load exactly 0.2, the band's bottom: inside
    (199, PlanReason.LOAD_BELOW_BAND, 2),
])
def test_a_load_exactly_on_an_edge_of_the_band_is_inside_it(busy_ms, reason, executors):
    """4 tasks on 4 cores busy ``busy_ms`` ms of each second, no overhead: the load is ``busy_ms / 1000``;
    target 0.5, band [0.2, 0.8] (FLIP-271 compares ``>`` max and ``<`` min)."""
    topology = Topology((Vertex("scan", parallelism=4, source=True),))
    cluster = ClusterState(executors=4, max_executors=16, trigger_interval_s=1.0)
    policy = Policy(restart_time_s=0, utilization_target=0.5, scale_down_interval_s=0)
    assert policy.band == (0.2, 0.8)
    plan = plan_micro_batch(topology, {"scan": VertexMetrics(1000, 1000, busy_ms)}, cluster, policy)
    assert plan.reasons[0].code == reason and plan.executors_proposed == executors
