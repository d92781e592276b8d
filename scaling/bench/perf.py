"""``python -m scaling perf``: time one evaluation of a random DAG (default 1,000 vertices, 240
samples per vertex in the metric window): window aggregation + FLIP-271 / DS2 evaluation + plan,
by the continuous planner and by the micro-batch planner (the DAG's vertices as stages). Prints the
median over the repeats, in milliseconds; then the CPU time (``time.process_time``) of ``python -m
scaling evaluate`` on a micro-batch scenario of that many stages and of 4× as many, whose ratio
should stay near 4 (the planner is linear in the stages; target: at most 5×)."""

from __future__ import annotations

import json
import random
import statistics
import time
from collections.abc import Callable

from scaling.planner.continuous import plan_job
from scaling.planner.microbatch import plan_micro_batch
from scaling.policy.policy import Policy
from scaling.scenario.format import evaluate_text
from scaling.values.metrics import ClusterState, MetricWindow, VertexSamples
from scaling.values.plan import JobPlan
from scaling.values.state import ScalerState
from scaling.values.topology import Edge, Topology, Vertex


def random_job(vertices: int = 1000, samples: int = 240, seed: int = 7) -> tuple[Topology, MetricWindow]:
    """A random layered DAG: about 5% sources with partitions, each other vertex with 1–3 inputs
    from earlier vertices (hash, forward or rebalance), and ``samples`` noisy samples per vertex."""
    rng = random.Random(seed)
    n_sources = max(1, vertices // 20)
    vs, edges = [], []
    for i in range(vertices):
        vid = f"v{i}"
        source = i < n_sources
        vs.append(Vertex(vid, parallelism=rng.randint(1, 64), max_parallelism=720,
                         partitions=rng.choice((16, 32, 64, 128)) if source else None, source=source))
        if not source:
            for upstream in rng.sample(range(i), k=min(i, rng.randint(1, 3))):
                edges.append(Edge(f"v{upstream}", vid, rng.choice(("hash", "forward", "rebalance"))))
    topology = Topology(tuple(vs), tuple(edges))
    columns = {}
    for v in vs:
        rate = rng.uniform(100, 10000)
        busy = rng.uniform(50, 1000)
        columns[v.id] = VertexSamples(
            records_in_per_s=tuple(rate * rng.uniform(0.9, 1.1) for _ in range(samples)),
            records_out_per_s=tuple(rate * rng.uniform(0.9, 1.1) for _ in range(samples)),
            busy_time_ms_per_s=tuple(min(1000.0, busy * rng.uniform(0.9, 1.1)) for _ in range(samples)),
            backlog=tuple(rng.uniform(0, 1e5) for _ in range(samples)) if v.source else (),
            backlog_growth_per_s=tuple(rng.uniform(-10, 10) for _ in range(samples)) if v.source else ())
    return topology, MetricWindow(columns)


def evaluate_once(topology: Topology, window: MetricWindow, policy: Policy) -> JobPlan:
    """One evaluation: aggregate the window, then plan."""
    return plan_job(topology, window.aggregate(), policy, ScalerState(), 0.0)


PERF_CLUSTER = ClusterState(executors=4, cores_per_executor=4, max_executors=64, trigger_interval_s=10.0)
"""The cluster the micro-batch timings plan for: 4 executors of 4 cores, at most 64."""


def evaluate_micro_batch_once(topology: Topology, window: MetricWindow, policy: Policy) -> JobPlan:
    """One micro-batch evaluation (``plan_micro_batch`` on ``PERF_CLUSTER``): aggregate, then plan."""
    return plan_micro_batch(topology, window.aggregate(), PERF_CLUSTER, policy, state=ScalerState(), now_s=0.0)


def timings_ms(*, vertices: int = 1000, samples: int = 240, repeat: int = 15, seed: int = 7,
               evaluate: Callable[[Topology, MetricWindow, Policy], JobPlan] = evaluate_once
               ) -> tuple[int, list[float]]:
    """Edges of the random DAG and the time of each of ``repeat`` evaluations (``evaluate``: the
    continuous planner by default, ``evaluate_micro_batch_once`` for micro-batches), milliseconds."""
    topology, window = random_job(vertices, samples, seed)
    policy = Policy()
    evaluate(topology, window, policy)  # warm-up (the topology's cached indexes)
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        evaluate(topology, window, policy)
        times.append((time.perf_counter() - started) * 1000.0)
    return len(topology.edges), times


def micro_batch_scenario(stages: int, seed: int = 7) -> str:
    """A SCENARIO.md document (micro-batch mode, one step) of the random DAG with ``stages`` stages:
    the window's averages as each stage's metrics, 0.1 s batch overhead, ``PERF_CLUSTER``."""
    topology, window = random_job(stages, samples=4, seed=seed)
    metrics = window.aggregate()
    doc = {"format": 1, "mode": "micro-batch", "trigger_interval_s": PERF_CLUSTER.trigger_interval_s,
           "cluster": {"executors": PERF_CLUSTER.executors, "cores_per_executor": PERF_CLUSTER.cores_per_executor,
                       "max_executors": PERF_CLUSTER.max_executors},
           "vertices": [{"id": v.id, "parallelism": v.parallelism, "max_parallelism": v.max_parallelism,
                         "source": v.source, **({"partitions": v.partitions} if v.partitions else {})}
                        for v in topology.vertices],
           "edges": [{"from": e.source, "to": e.target, "ship": e.ship} for e in topology.edges],
           "steps": [{"at_s": 0, "metrics": {vid: {
               "records_in_per_s": m.records_in_per_s, "records_out_per_s": m.records_out_per_s,
               "busy_time_ms_per_s": m.busy_time_ms_per_s, "backlog": m.backlog,
               "backlog_growth_per_s": m.backlog_growth_per_s, "batch_overhead_s": 0.1}
               for vid, m in metrics.items()}}]}
    return json.dumps(doc)


def evaluate_cpu_s(*stage_counts: int, repeat: int = 5, seed: int = 7) -> tuple[float, ...]:
    """Per stage count, the least CPU time (``time.process_time``, seconds) of ``repeat`` runs of
    what ``python -m scaling evaluate`` does (parse, plan, render as JSON) on
    ``micro_batch_scenario(stages)``; the sizes take turns, so a busy machine slows them alike."""
    texts = [micro_batch_scenario(stages, seed) for stages in stage_counts]
    best = [float("inf")] * len(texts)
    for _ in range(repeat):
        for i, text in enumerate(texts):
            started = time.process_time()
            json.dumps(evaluate_text(text), indent=2)
            best[i] = min(best[i], time.process_time() - started)
    return tuple(best)


TARGET_MS = 100.0
"""The benchmark's target for the median evaluation (1,000 vertices, 240 samples), milliseconds."""
SCALING_TARGET = 5.0
"""The most CPU ``python -m scaling evaluate`` may take on 4× the stages, as a multiple."""


def run(*, vertices: int = 1000, samples: int = 240, repeat: int = 15, seed: int = 7) -> str:
    """Time ``repeat`` evaluations by each planner and report the median, min and max in
    milliseconds, then the CPU of ``evaluate`` on ``vertices`` and 4 × ``vertices`` stages."""
    edges, times = timings_ms(vertices=vertices, samples=samples, repeat=repeat, seed=seed)
    median = statistics.median(times)
    verdict = "meets" if median < TARGET_MS else "MISSES"
    lines = [f"perf: {vertices} vertices, {edges} edges, {samples} samples per vertex: "
             f"median {median:.1f} ms (min {min(times):.1f}, max {max(times):.1f}, n={repeat}); "
             f"target {TARGET_MS:g} ms: {verdict}"]
    _, times = timings_ms(vertices=vertices, samples=samples, repeat=repeat, seed=seed,
                          evaluate=evaluate_micro_batch_once)
    lines.append(f"perf: micro-batch, {vertices} stages, {samples} samples per stage: median "
                 f"{statistics.median(times):.1f} ms (min {min(times):.1f}, max {max(times):.1f}, n={repeat})")
    small, large = evaluate_cpu_s(vertices, 4 * vertices, seed=seed)
    ratio = large / small if small > 0 else float("inf")
    lines.append(f"perf: evaluate, micro-batch scenario: {vertices} stages {small * 1000:.0f} ms CPU, "
                 f"{4 * vertices} stages {large * 1000:.0f} ms CPU: {ratio:.1f}x; target at most "
                 f"{SCALING_TARGET:g}x: {'meets' if ratio <= SCALING_TARGET else 'MISSES'}")
    return "\n".join(lines)
