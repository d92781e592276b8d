"""scaling.sim: the simulator reproduces DS2's word count, is deterministic, and models
backpressure, retention, downtime, capacity curves and micro-batches as documented."""

import math

import pytest

from scaling.planner.microbatch import plan_micro_batch
from scaling.policy.policy import Policy
from scaling.sim import (
    CapacityCurve,
    Config,
    Downtime,
    Noise,
    PolicyController,
    SimJob,
    SimSettings,
    SimVertex,
    simulate,
    workloads,
)
from scaling.sim.baselines import DhalionPolicy, ScheduleController, UniformPolicy, config_for_load, oracle_configs
from scaling.sim.engine import capacity_per_s
from scaling.sim.topologies import CATALOG, wordcount
from scaling.sim.topologies import job as make_job
from scaling.values.metrics import ClusterState, VertexMetrics
from scaling.values.reasons import PlanReason
from scaling.values.topology import Edge, Topology, Vertex


def ds2_wordcount():
    """DS2 §5 on Heron: a throttled source at 10,000 sentences/s, FlatMap at 1,000 sentences/s per
    instance emitting 10 words each, Count at 5,000 words/s per instance; all start at 1."""
    job = wordcount(generator=True, source_rate=1e6, flatmap_rate=1000, count_rate=5000, words_per_sentence=10)
    trace = workloads.step(base_per_s=10_000, factor=1, duration_s=3 * 3600, up_at_s=math.inf, down_at_s=math.inf)
    settings = SimSettings(mode="continuous", downtime=Downtime(10))
    return job, trace, settings


def rescales(implementation=None):
    job, trace, settings = ds2_wordcount()
    controller = PolicyController(Policy(utilization_target=1.0, restart_time_s=0), mode="continuous",
                                  implementation=implementation)
    return simulate(job, trace, settings, controller, Config(job.start_parallelism)).rescales


def test_ds2_reaches_the_word_count_optimum_in_one_step_and_dhalion_needs_several():
    """DS2 paper §5.2: ds2 goes to FlatMap 10, Count 20 in one step."""
    ds2 = rescales()
    assert [dict(r.after.parallelism) for r in ds2] == [{"source": 1, "flatmap": 10, "count": 20}]
    dhalion = rescales(DhalionPolicy())
    assert len(dhalion) >= 5
    final = dhalion[-1].after.parallelism
    assert final["flatmap"] >= 10 and final["count"] >= 20
    # One vertex per action: Dhalion never changes two vertices at once.
    for r in dhalion:
        assert sum(r.before.parallelism[v] != r.after.parallelism[v] for v in r.after.parallelism) == 1


def run_once(seed, policy_name="ds2", mode="micro-batch", noise=0.05, *, controller_out=None):
    job = make_job("nexmark-q5")
    trace = workloads.random_walk(base_per_s=40_000, duration_s=2 * 3600, seed=seed)
    settings = SimSettings(mode=mode, noise=Noise(noise), downtime=Downtime(15, 0.5))
    start = config_for_load(job, settings, Policy(), trace.rates_per_s[0])
    controller = PolicyController(Policy(catch_up_duration_s=300, restart_time_s=15, algorithm=policy_name),
                                  mode=mode)
    if controller_out is not None:
        controller_out.append(controller)
    return simulate(job, trace, settings, controller, start, seed=seed)


def test_same_seed_same_run_and_another_seed_differs():
    a, b, c = run_once(3), run_once(3), run_once(4)
    assert (a.capacity_per_s, a.backlog, a.lag_s, a.resources) == (b.capacity_per_s, b.backlog, b.lag_s, b.resources)
    assert [(r.at_s, dict(r.after.parallelism), r.downtime_s) for r in a.rescales] == \
        [(r.at_s, dict(r.after.parallelism), r.downtime_s) for r in b.rescales]
    assert a.load_per_s != c.load_per_s


def test_backpressure_propagates_upstream_in_continuous_mode():
    """A slow sink: the map ahead of it and the source are throttled (busy below 1000 ms/s) and the
    source's backlog grows by the difference."""
    job = SimJob("bp", (SimVertex("src", CapacityCurve(100_000), source=True), SimVertex("map", CapacityCurve(10_000)),
                        SimVertex("sink", CapacityCurve(1_000))),
                 (Edge("src", "map"), Edge("map", "sink")))
    trace = workloads.step(base_per_s=5_000, factor=1, duration_s=600, up_at_s=math.inf, down_at_s=math.inf)
    seen = []

    class Spy:
        name, free_rescale = "spy", False

        def decide(self, observation):
            seen.append(observation.metrics)

        def restarted(self, downtime_s):
            pass

    result = simulate(job, trace, SimSettings(mode="continuous"), Spy(), Config({"src": 1, "map": 1, "sink": 1}))
    metrics = [m for m in seen if m is not None][-1]
    assert metrics["sink"].busy_time_ms_per_s == pytest.approx(1000)
    assert metrics["map"].records_in_per_s == pytest.approx(1000, rel=0.01)
    assert metrics["map"].busy_time_ms_per_s == pytest.approx(100, rel=0.01)
    assert metrics["src"].backlog_growth_per_s == pytest.approx(4000, rel=0.01)
    assert result.capacity_per_s[-1] == pytest.approx(1000)


def test_retention_loses_what_was_not_read_in_time_and_downtime_piles_up_backlog():
    job = SimJob("r", (SimVertex("src", CapacityCurve(1_000), source=True, partitions=4),))
    trace = workloads.step(base_per_s=2_000, factor=1, duration_s=3600, up_at_s=math.inf, down_at_s=math.inf)
    for mode in ("continuous", "micro-batch"):
        config = Config({"src": 1}, 1 if mode == "micro-batch" else None)
        static = ScheduleController("static", [config], 60.0)
        settings = SimSettings(mode=mode, retention_s=600, batch_overhead_s=0.0, executors=1)
        result = simulate(job, trace, settings, static, config)
        assert result.rescales == []
        # Reads 1,000/s of the 2,000/s, oldest first: the oldest unread record is t/2 old, so from
        # t = 1,200 s on, 1,000 records/s expire unread.
        assert result.records_lost == pytest.approx(1000 * (3600 - 1200), rel=0.05), mode
        if mode == "continuous":
            assert max(result.lag_s) <= 600 + 30
        else:  # a batch reads everything and runs long; what it read is safe from retention
            assert max(result.lag_s) > 600
    down = ScheduleController("one rescale", [Config({"src": 4})] * 30 + [Config({"src": 3})] * 30, 60.0,
                              free_rescale=False)
    result = simulate(job, trace, SimSettings(mode="continuous", downtime=Downtime(120)), down, Config({"src": 4}))
    assert [r.downtime_s for r in result.rescales] == [120.0]
    peak = max(result.backlog)
    assert peak == pytest.approx(2000 * 120, rel=0.2)


def test_downtime_drawn_from_a_distribution_is_seeded():
    import random

    d = Downtime(15, 0.5)
    assert [d.draw(random.Random(1)) for _ in range(3)] == [d.draw(random.Random(1)) for _ in range(3)]
    draws = [d.draw(random.Random(i)) for i in range(200)]
    assert min(draws) < 15 < max(draws)


def test_capacity_curves():
    linear, amdahl = CapacityCurve(1000), CapacityCurve(1000, "amdahl", serial_fraction=0.1)
    overhead = CapacityCurve(1000, "task-overhead", task_overhead_s=0.05)
    assert linear.continuous_capacity_per_s(10) == pytest.approx(10_000)
    assert amdahl.continuous_capacity_per_s(10) == pytest.approx(10_000 / 1.9)  # r·p / (1 + s·(p − 1))
    assert overhead.continuous_capacity_per_s(10) == pytest.approx(9_500)
    assert overhead.busy_core_s(0, 8, periods=1) == pytest.approx(0.4)  # fixed cost per task and batch


def test_micro_batch_metrics_are_the_collectors_and_batches_share_the_cores():
    """Two stages on 2 cores, 10 s trigger, 1 s overhead: each batch of 10 s × 1,000 records takes
    1 + 10,000/2,000/2 + 10,000/4,000/2 = 4.75 s; busy ms/s per task and batch durations reach the
    policy, and a batch-ratio policy sees R = 0.475."""
    job = SimJob("mb", (SimVertex("scan", CapacityCurve(2000), source=True, partitions=2, parallelism=2),
                        SimVertex("agg", CapacityCurve(4000), 0.1, parallelism=2)), (Edge("scan", "agg"),))
    trace = workloads.step(base_per_s=1000, factor=1, duration_s=900, up_at_s=math.inf, down_at_s=math.inf)
    settings = SimSettings(mode="micro-batch", trigger_interval_s=10, batch_overhead_s=1.0, executors=2)
    controller = PolicyController(Policy(algorithm="batch-ratio"), mode="micro-batch")
    simulate(job, trace, settings, controller, Config({"scan": 2, "agg": 2}, 2))
    _, plan = controller.plans[-1]
    assert plan.batch_ratio == pytest.approx(0.475)
    assert plan.vertex("scan").busy_core_s_per_s == pytest.approx(0.5, rel=0.02)
    assert plan.vertex("agg").selectivity == pytest.approx(0.1)
    assert capacity_per_s(job, Config({"scan": 2, "agg": 2}, 2), settings) == pytest.approx(
        (10 - 1) / (10 * (1 / 4000 + 1 / 8000)))


def test_a_batch_reads_what_arrived_since_the_previous_trigger_not_whole_trace_steps():
    """Records arrive all through a trace step (5 s) as a topic fills: with a 2 s trigger each batch
    reads 2 s × 1,000 records and takes 0.2 + 2,000/2,000/2 + 2,000/4,000/2 = 0.95 s, R = 0.475 (a
    query that keeps up has R below 1), not a whole step's 5,000 records (2.075 s, R = 1.04)."""
    job = SimJob("mb", (SimVertex("scan", CapacityCurve(2000), source=True, partitions=2, parallelism=2),
                        SimVertex("agg", CapacityCurve(4000), 0.1, parallelism=2)), (Edge("scan", "agg"),))
    trace = workloads.step(base_per_s=1000, factor=1, duration_s=900, up_at_s=math.inf, down_at_s=math.inf,
                           step_s=5.0)
    settings = SimSettings(mode="micro-batch", trigger_interval_s=2, batch_overhead_s=0.2, executors=2)
    controller = PolicyController(Policy(algorithm="batch-ratio"), mode="micro-batch")
    simulate(job, trace, settings, controller, Config({"scan": 2, "agg": 2}, 2))
    _, plan = controller.plans[-1]
    assert plan.batch_ratio == pytest.approx(0.475, rel=0.01)
    assert plan.vertex("scan").busy_core_s_per_s == pytest.approx(0.5, rel=0.02)


def test_real_policies_run_unchanged():
    """Each registered policy really runs (its name reaches the controller and
    every plan says which algorithm made it), and they do not all behave alike."""
    runs = {}
    for policy in ("ds2", "batch-ratio", "min-increase"):
        controllers = []
        result = run_once(1, policy, controller_out=controllers)
        assert len(result.t_s) == 2 * 3600 // 30
        plans = controllers[0].plans
        assert plans and {plan.algorithm for _, plan in plans} == {policy}, policy
        runs[policy] = [(r.at_s, r.after.cores) for r in result.rescales]
    assert runs["ds2"] != runs["batch-ratio"]


def test_uniform_policy_holds_within_its_tolerance_and_acts_outside():
    """HPA's 10 % tolerance: utilization 0.75 against 0.7 (ratio 1.07) is no change; 0.9 (1.29) scales."""
    from scaling.values.request import PlanRequest

    uniform = UniformPolicy()
    topology = Topology((Vertex("a", parallelism=4, source=True),))
    cluster = ClusterState(executors=4, trigger_interval_s=1.0)

    def plan(busy):
        return uniform.plan(PlanRequest(topology, {"a": VertexMetrics(100, 100, busy)}, Policy(), "micro-batch",
                                        cluster, now_s=0.0, batch_durations_s=(0.5,)))
    assert plan(750).decision == "no-change"
    scaled = plan(900)
    assert scaled.decision == "scale" and scaled.executors_proposed == 6  # ceil(4 × 0.9 / 0.7)


def test_every_catalog_topology_runs_in_both_modes():
    for name in CATALOG:
        job = make_job(name)
        for mode in ("continuous", "micro-batch"):
            settings = SimSettings(mode=mode)
            trace = workloads.spikes(base_per_s=1000, duration_s=1200)
            oracle = oracle_configs(job, trace, settings, Policy())
            result = simulate(job, trace, settings, ScheduleController("oracle", oracle, 60.0), oracle[0])
            assert result.records_lost == 0 and len(result.t_s) == 40, (name, mode)


def test_micro_batch_planner_aligns_source_partitions_within_the_cores():
    """Found by the simulator: 64 source partitions on 6 planned cores were aligned to 7 tasks, a
    second wave on 6 cores. The plan now keeps one wave (6 tasks, at most 11 partitions each)."""
    topology = Topology((Vertex("src", parallelism=9, source=True, partitions=64), Vertex("map", parallelism=9)),
                        (Edge("src", "map"),))
    metrics = {"src": VertexMetrics(1000, 1000, 100), "map": VertexMetrics(1000, 1000, 300)}
    plan = plan_micro_batch(topology, metrics, ClusterState(executors=9, trigger_interval_s=1.0),
                            Policy(restart_time_s=0, utilization_target=0.7, utilization_min=0.6))
    assert plan.executors_proposed == 6
    assert plan.vertex("src").proposed == 6


def test_uniform_policy_scales_down_to_the_highest_recommendation_of_its_window():
    """HPA's scale-down stabilization (``horizontal.go``): recommendations of the last 300 s are kept
    and a scale-down goes to the highest of them at once. It used to keep only recommendations newer
    than 300 s and then require the oldest to be 300 s old, so it never scaled down."""
    from scaling.values.request import PlanRequest
    from scaling.values.state import ScalerState

    uniform = UniformPolicy()
    topology = Topology((Vertex("a", parallelism=8, source=True),))
    cluster = ClusterState(executors=8, trigger_interval_s=1.0)
    state = ScalerState()
    decisions = []
    for now, busy in ((0, 350), (60, 280), (120, 350)):   # utilization 0.35, 0.28, 0.35 against 0.7
        plan = uniform.plan(PlanRequest(topology, {"a": VertexMetrics(100, 100, busy)}, Policy(), "micro-batch",
                                        cluster, state, now_s=now, batch_durations_s=(0.3,)))
        state = plan.next_state
        decisions.append((plan.decision, plan.executors_proposed))
    assert decisions[0] == ("scale", 4)                    # ceil(8 × 0.5)
    assert decisions[1] == ("scale", 4)                    # highest of (0.5, 0.4): 0.5
    # Without a completed batch the busy time is missing, not zero: no action.
    plan = uniform.plan(PlanRequest(topology, {"a": VertexMetrics(0, 0, 0)}, Policy(), "micro-batch", cluster,
                                    ScalerState(), now_s=0))
    assert plan.decision == "no-change"


def test_dhalion_scales_by_heron_scale_up_resolver_capped_at_4x_and_waits_180_s():
    """Heron ``ScaleUpResolver``: factor 1 / (1 − f) for backpressure fraction f, capped at 4×; Dhalion
    waits 180 s after an action (Floratou et al., VLDB 2017)."""
    d = DhalionPolicy()
    assert d.scale_up_factor(0.5) == pytest.approx(2.0)
    assert d.scale_up_factor(0.2) == pytest.approx(1.25)
    assert d.scale_up_factor(0.9) == 4.0 and d.wait_s == 180.0
    from scaling.values.request import PlanRequest

    topology = Topology((Vertex("src", parallelism=2, source=True), Vertex("map", parallelism=4)),
                        (Edge("src", "map"),))
    # Sources blocked half the time: 1,000 read + 1,000 growth per second -> f = 0.5; map saturated.
    metrics = {"src": VertexMetrics(1000, 1000, 300, backlog_growth_per_s=1000), "map": VertexMetrics(1000, 1000, 990)}
    plan = d.plan(PlanRequest(topology, metrics, Policy(), "continuous", now_s=0))
    assert plan.vertex("map").proposed == 8
    again = d.plan(PlanRequest(topology, metrics, Policy(), "continuous", state=plan.next_state, now_s=120))
    assert again.decision == "no-change" and again.reasons[0].code == PlanReason.WAITING_AFTER_ACTION
    assert again.reasons[0].data == {"wait_s": 180.0, "last_at_s": 0}


def test_learning_the_scaling_coefficient_converges_in_fewer_steps_on_a_sub_linear_job():
    """Learning from history (Flink observed scalability, FLINK-30571's follow-up): a stage
    on a sub-linear (Amdahl, serial fraction 0.2) curve, load stepping 1,500 <-> 6,000 records/s every
    30 min. Convergence as the bench counts it (``bench.run.convergence``: rescales after a step-up
    until the job sustains the load at the end of its segment; None when it never does). Without
    learning the linear plans of the later step-ups fall short (the serial fraction leaves cores idle
    while the batches overrun, so the busy time reads inside the band): only the batch overrun
    (``PlanReason.BATCH_OVERRUN``: every batch above the trigger, the backlog growing) triggers a
    second rescale, or none in time; with the coefficient fitted to the job's own rescales, those
    step-ups converge in fewer rescales."""
    from scaling.bench.run import convergence
    from scaling.sim.workloads import Trace

    job = SimJob("amdahl", (SimVertex("src", CapacityCurve(50_000), source=True, parallelism=2),
                            SimVertex("agg", CapacityCurve(2_000, "amdahl", serial_fraction=0.2), parallelism=2)),
                 (Edge("src", "agg"),))
    segment, step = 1800, 5.0
    rates = [r for k in range(8) for r in [1500.0 if k % 2 == 0 else 6000.0] * int(segment / step)]
    changes = tuple(float(k * segment) for k in range(1, 8))
    trace = Trace("steps", step, tuple(rates), changes)
    steps = {}
    for cap in (False, True):
        for learn in (False, True):
            settings = SimSettings(mode="micro-batch", noise=Noise(0.0), downtime=Downtime(15), metric_window_s=120,
                                   busy_cap=cap)
            policy = Policy(catch_up_duration_s=300, restart_time_s=15, scale_down_interval_s=0,
                            observed_scalability_enabled=learn, observed_scalability_min_observations=2)
            result = simulate(job, trace, settings, PolicyController(policy, mode="micro-batch"),
                              Config({"src": 2, "agg": 2}, 2))
            steps[cap, learn] = [c.steps for c in convergence(result, trace) if c.up]
    # Measured as production measures (busy time not capped): every step-up converges; the first
    # one's rescales teach the coefficient (2 observations), after which each step-up takes one.
    assert steps[False, False] == [3, 2, 2, 2]
    assert steps[False, True] == [3, 1, 1, 1]
    # With each sample's busy time capped at 1000 ms/s (the simulator before it measured as
    # production does), a batch longer than the collect loses busy time: the second step-up stalls
    # just under the load without learning, a non-convergence production would not see.
    assert steps[True, False] == [2, None, 2, 2]
    assert steps[True, True] == [2, 2, 1, 1]


def _spy():
    seen = []

    class Spy:
        name, free_rescale = "spy", False

        def decide(self, observation):
            seen.append(observation)

        def restarted(self, downtime_s):
            pass

    return Spy(), seen


def test_skew_sets_the_batch_pace_and_the_collector_sees_it_only_when_it_can():
    """A stage whose slowest task is busy 3x the median: its batches take 3x as long on one wave, the
    window's busiest-task busy time reads 3x the mean when the collector sees it (production's
    ``paced_task_busy_s``), and only the mean when it misses it."""
    def run(skew_seen):
        job = SimJob("s", (SimVertex("src", CapacityCurve(100_000), source=True, parallelism=4),
                           SimVertex("agg", CapacityCurve(1_000), skew=3.0, skew_seen=skew_seen, parallelism=4)),
                     (Edge("src", "agg"),))
        trace = workloads.step(base_per_s=500, factor=1, duration_s=600, up_at_s=math.inf, down_at_s=math.inf)
        spy, seen = _spy()
        settings = SimSettings(mode="micro-batch", batch_overhead_s=0.0, noise=Noise(0.0))
        simulate(job, trace, settings, spy, Config({"src": 4, "agg": 4}, 4))
        observed = [o for o in seen if o.metrics is not None][-1]
        return job, settings, observed

    job, settings, observed = run(True)
    agg = observed.metrics["agg"]
    assert agg.busy_time_ms_per_s == pytest.approx(125, rel=0.02)  # 500 records/s x 1 ms / 4 tasks
    assert agg.busy_time_max_ms_per_s == pytest.approx(375, rel=0.02)
    assert observed.batch_durations_s[-1] == pytest.approx(10 * 0.5 * 3 / 4 + 10 * 500 / 100_000 / 4, rel=0.02)
    # Capacity: the 4 tasks' slowest takes 3/4 of the stage's busy time.
    assert capacity_per_s(job, Config({"src": 4, "agg": 4}, 4), settings) == pytest.approx(
        1 / (3 / 4 / 1_000 + 1 / 4 / 100_000), rel=1e-6)
    _, _, missed = run(False)
    assert missed.metrics["agg"].busy_time_max_ms_per_s is None
    assert missed.metrics["agg"].busy_time_ms_per_s == pytest.approx(125, rel=0.02)


def test_a_serial_fraction_and_a_pinned_stage_cap_what_more_cores_give():
    """Amdahl: with half of the work on one task, 8 tasks are at most 2x one; a stage pinned to 2
    state partitions is as fast on 16 cores as on 2."""
    serial = SimVertex("a", CapacityCurve(1_000), serial_fraction=0.5)
    assert serial.pace(8, 8) == pytest.approx(0.5 + 0.5 / 8)
    assert 1 / serial.pace(64, 64) < 2.0
    job = SimJob("p", (SimVertex("src", CapacityCurve(1e9), source=True, parallelism=16),
                       SimVertex("state", CapacityCurve(1_000), parallelism=2, adjustable=False)),
                 (Edge("src", "state"),))
    settings = SimSettings(mode="micro-batch", batch_overhead_s=0.0)
    two, sixteen = (capacity_per_s(job, Config({"src": 16, "state": 2}, c), settings) for c in (2, 16))
    assert sixteen == pytest.approx(two, rel=1e-3)


def test_micro_batch_rescales_cost_the_runners_paths():
    """New partitions restart in-process (1.17 s); executors only change in place (no pause) or, when
    the executors cannot move in place, by a warm driver handover (1.48 s); the first batch after
    each pays its measured extra."""
    from scaling.sim.model import RUNNER_COSTS, RUNNER_PAUSE, RescaleCosts

    job = SimJob("r", (SimVertex("src", CapacityCurve(100_000), source=True, parallelism=2),
                       SimVertex("agg", CapacityCurve(10_000), parallelism=2)), (Edge("src", "agg"),))
    trace = workloads.step(base_per_s=1_000, factor=1, duration_s=600, up_at_s=math.inf, down_at_s=math.inf)
    schedule = [Config({"src": 2, "agg": 2}, 2)] * 2 + [Config({"src": 2, "agg": 2}, 4)] * 3 + \
        [Config({"src": 2, "agg": 4}, 4)] * 6
    for in_place, pauses in ((True, [0.0, 1.17]), (False, [1.48, 1.17])):
        costs = RescaleCosts(**{**RUNNER_COSTS.__dict__, "handover": Downtime(1.48),
                                "executors_move_in_place": in_place})
        settings = SimSettings(mode="micro-batch", downtime=Downtime(RUNNER_PAUSE.fixed_s), rescale_costs=costs)
        controller = ScheduleController("s", schedule, 60.0, free_rescale=False)
        result = simulate(job, trace, settings, controller, schedule[0])
        assert [round(r.downtime_s, 2) for r in result.rescales] == pauses
