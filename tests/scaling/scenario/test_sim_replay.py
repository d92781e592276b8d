"""scaling.scenario.replay: the backtest's pure part replays recorded windows through a policy, carrying its
state, and follows what actually ran."""

from scaling.policy.policy import Policy
from scaling.scenario.replay import ReplayStep, describe, replay
from scaling.values.metrics import ClusterState, VertexMetrics
from scaling.values.topology import Edge, Topology, Vertex


def steps(executors_running: int, count: int, start_s: float = 0.0) -> list[ReplayStep]:
    topology = Topology((Vertex("scan", parallelism=executors_running, source=True), Vertex("agg", parallelism=2)),
                        (Edge("scan", "agg"),))
    metrics = {"scan": VertexMetrics(1000, 1000, 50), "agg": VertexMetrics(1000, 10, 100)}
    cluster = ClusterState(executors=executors_running, trigger_interval_s=1.0)
    return [ReplayStep(start_s + 60 * i, topology, metrics, cluster, (0.2,)) for i in range(count)]


def test_replay_holds_a_scale_down_as_a_running_autoscaler_would():
    """8 cores for 0.6 busy cores: ds2 wants 1, capped by scale_down_max_factor 0.6 at 4 (the
    factor applies in micro-batch mode too); with a 300 s scale-down delay (FLINK-36018) it
    proposes only once the delay is over; the job kept running 8, so later steps propose again."""
    decisions = replay(steps(8, 8), Policy(restart_time_s=0, scale_down_interval_s=300))
    assert [d.decision for d in decisions[:5]] == ["blocked"] * 5
    assert decisions[5].proposed and decisions[5].executors_proposed == 4
    assert "executors 8 -> 4" in describe(decisions[5])


def test_replay_with_batch_ratio_and_no_state_needed():
    decisions = replay(steps(8, 2), Policy(algorithm="batch-ratio"))
    assert [(d.executors_current, d.executors_proposed) for d in decisions] == [(8, 7), (8, 7)]
    assert all(d.proposed for d in decisions)
