"""The bench's memory workloads: every micro-batch policy on jobs whose heap matters (``sessions``, a
session store that outgrows 1 GB; ``demo-8g``, over-provisioned at 8 GB), with the same inputs, in
memory GB-hours (Σ executors × heap GB × hours) against the memory oracles; target: ds2 at most
``MEMORY_TARGET`` × the oracle at 0 records lost (docs/ARCHITECTURE.md, "The memory bench")."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from scaling.bench.acceptance import Target
from scaling.bench.run import (
    MICRO_BATCH_POLICIES,
    ORACLE_LAG_BUDGET_S,
    Run,
    Workload,
    base_rate_per_s,
    bench_policy,
    bench_settings,
    make_controller,
    start_config,
)
from scaling.bench.table import fmt
from scaling.policy.memory import MemoryPolicy
from scaling.sim import workloads
from scaling.sim.baselines import oracle_configs
from scaling.sim.engine import PolicyController, Rescale, simulate
from scaling.sim.memory import SimMemory, interval_oracle_mb_s, rule_oracle_mb_s
from scaling.sim.model import CapacityCurve, SimJob, SimVertex, derive_seed
from scaling.sim.topologies import demo
from scaling.values.mode import Mode
from scaling.values.topology import Edge

__all__ = ["DS2_MEMORY", "MEMORY_TARGET", "MEMORY_WORKLOADS", "MemoryRow", "describe_memory", "format_memory_table",
           "memory_rows",
           "memory_target", "run_memory_bench"]

MEMORY_TARGET = 1.2
DS2_MEMORY = MemoryPolicy(memory_apply=True)
"""ds2's memory options: ``memory_apply`` on; the thresholds, overhead, growth and bounds at their defaults."""
SESSION_STATE_MB = 4096.0
"""The sessions job's whole state at the base load once its 30-minute sessions are full, MB."""
MB_PER_GB = 1024.0


def sessions() -> SimJob:
    """Scan (16 partitions) → sessionize (the state store, 32 state partitions pinned by the
    checkpoint) → sink; each record stays in the state for ``state_retention_s`` (the session gap)."""
    job = SimJob("sessions", (
        SimVertex("scan", CapacityCurve(20_000.0), 1.0, source=True, partitions=16, name="Kafka scan"),
        SimVertex("sessionize", CapacityCurve(4_000.0), 0.2, parallelism=32, adjustable=False,
                  name="Sessionize (state, pinned)"),
        SimVertex("sink", CapacityCurve(30_000.0), 1.0, name="Sink"),
    ), (Edge("scan", "sessionize", "hash"), Edge("sessionize", "sink", "forward")),
        "Sessions: the state grows for 30 minutes, then plateaus")
    per_record = SESSION_STATE_MB / (base_rate_per_s(job) * 1800.0)
    return replace(job, memory=SimMemory(start_heap_mb=1024, state_mb_per_record=per_record, state_retention_s=1800.0))


def demo_8g() -> SimJob:
    """The demo pipeline with a 10-minute windowed count (about 100 MB of state), at 8 GB per executor."""
    job = demo()
    per_record = 100.0 / (base_rate_per_s(job) * 600.0)
    return replace(job, name="demo-8g", description="The demo pipeline, over-provisioned at 8 GB per executor",
                   memory=SimMemory(start_heap_mb=8192, state_mb_per_record=per_record, state_retention_s=600.0))


MEMORY_JOBS = {"sessions": sessions, "demo-8g": demo_8g}
MEMORY_WORKLOADS = (
    Workload("steady", "sessions", Mode.MICRO_BATCH, 3.0),
    Workload("step", "sessions", Mode.MICRO_BATCH, 3.0),
    Workload("steady", "demo-8g", Mode.MICRO_BATCH, 2.0),
)
"""``steady``: the base load (2 % noise); ``step``: × 3 from a quarter of the run to its half."""


def run_memory_workload(workload: Workload, *, seed: int, setting: str = "tuned") -> list[Run]:
    """Every micro-batch policy on ``workload`` from the same start and heap (``scaling.bench.run``'s)."""
    job = MEMORY_JOBS[workload.topology]()
    settings = bench_settings(Mode.MICRO_BATCH)
    duration = workload.hours * 3600.0
    trace = workloads.step(base_per_s=base_rate_per_s(job), factor=3.0 if workload.kind == "step" else 1.0,
                           duration_s=duration, up_at_s=duration / 4, down_at_s=duration / 2,
                           step_s=settings.step_s, noise=0.02, seed=derive_seed(seed, workload.kind, job.name))
    policy = bench_policy(setting)
    oracle = oracle_configs(job, trace, settings, policy, utilization=1.0, lag_budget_s=ORACLE_LAG_BUDGET_S)
    at_target = oracle_configs(job, trace, settings, policy)
    start = start_config(job, at_target, Mode.MICRO_BATCH)
    runs = []
    for name in MICRO_BATCH_POLICIES:
        controller = make_controller(name, Mode.MICRO_BATCH, policy, oracle, settings.policy_interval_s, at_target)
        if isinstance(controller, PolicyController) and name == "ds2":
            controller.memory = DS2_MEMORY
        runs.append(Run(workload, name, simulate(job, trace, settings, controller, start, seed=seed), trace,
                        settings, controller))
    return runs


@dataclass(frozen=True)
class MemoryRow:
    """One run on a memory workload: memory GB-hours, its ratios to the oracle per interval, to the
    oracle that keeps the rule and to the one fixed heap, the batches that ran out of heap, rescales
    (restarts included), records lost, seconds of lag above 60 s, core-hours."""

    workload: str
    policy: str
    memory_gb_hours: float
    memory_vs_oracle: float
    memory_vs_rule: float
    memory_vs_fixed: float
    memory_failures: int
    rescales: int
    records_lost: float
    slo_violation_60_s: float
    core_hours: float


def _restarts_anyway(rescale: Rescale) -> bool:
    """A restart that changes more than the heap: one a heap may ride along with."""
    return rescale.restarted and (rescale.before.cores != rescale.after.cores
                                  or rescale.before.parallelism != rescale.after.parallelism)


def memory_rows(runs: list[Run]) -> list[MemoryRow]:
    """One :class:`MemoryRow` per run (``scaling.sim.memory.interval_oracle_mb_s`` for the oracle)."""
    rows = []
    for run in runs:
        r, s = run.result, run.settings
        start_mb = MEMORY_JOBS[run.workload.topology]().memory.start_heap_mb
        per_interval, fixed = interval_oracle_mb_s(r.t_s, r.executors, r.heap_needed_mb, s.policy_interval_s,
                                                   s.collect_interval_s, start_mb)
        rule = rule_oracle_mb_s(r.t_s, r.executors, r.heap_needed_mb,
                                [x.at_s for x in r.rescales if _restarts_anyway(x)], s.collect_interval_s, start_mb)
        above_60 = sum(s.collect_interval_s for lag in r.lag_s if lag > 60.0)
        rows.append(MemoryRow(run.workload.name, run.policy, round(r.memory_mb_s / MB_PER_GB / 3600.0, 3),
                              *(round(r.memory_mb_s / ref, 3) if ref else math.inf
                                for ref in (per_interval, rule, fixed)),
                              r.memory_failures,
                              len(r.rescales), round(r.records_lost), above_60, round(r.core_seconds / 3600.0, 3)))
    return rows


def run_memory_bench(*, seed: int = 7, setting: str = "tuned") -> list[MemoryRow]:
    """Every policy on every memory workload at ``setting``."""
    return [row for w in MEMORY_WORKLOADS for row in memory_rows(run_memory_workload(w, seed=seed, setting=setting))]


def memory_target(rows: list[MemoryRow]) -> Target:
    """ds2's memory GB-hours at most ``MEMORY_TARGET`` × the oracle's on every memory workload, 0 records lost."""
    ds2 = [r for r in rows if r.policy == "ds2"]
    worst = max(ds2, key=lambda r: r.memory_vs_oracle, default=None)
    lost = sum(r.records_lost for r in ds2)
    met = bool(ds2) and worst is not None and worst.memory_vs_oracle <= MEMORY_TARGET and lost == 0
    measured = "no memory workload" if worst is None else (
        f"max {worst.memory_vs_oracle:.3f}x ({worst.workload}; {worst.memory_vs_rule:.3f}x the oracle that keeps "
        f"the rule), records lost {lost:,.0f}")
    return Target("memory", f"memory GB-hours <= {MEMORY_TARGET:.2f}x the oracle at 0 records lost", met, measured)


def describe_memory() -> str:
    """The memory options of the memory workloads' table (ds2's apply; the rest every policy's)."""
    m = DS2_MEMORY
    return (f"memory: gc threshold {m.memory_gc_pressure_threshold}, heap threshold {m.memory_heap_usage_threshold}, "
            f"overhead {m.memory_tuning_overhead}, growth under pressure {m.memory_pressure_growth}, "
            f"heap {m.memory_min_mb}-{m.memory_max_mb} MB; ds2 only: memory_apply on")


def format_memory_table(rows: list[MemoryRow]) -> str:
    """The memory workloads' table, one line per workload and policy."""
    header = ("workload", "policy", "mem_gb_h", "vs_oracle", "vs_rule", "vs_fixed", "oom", "rescales", "lost",
              "slo60_s", "core_h")
    lines = [(r.workload, r.policy, *(fmt(getattr(r, key)) for key in (
        "memory_gb_hours", "memory_vs_oracle", "memory_vs_rule", "memory_vs_fixed", "memory_failures", "rescales",
        "records_lost", "slo_violation_60_s", "core_hours"))) for r in rows]
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(header)]
    return "\n".join("  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths)))
                     for line in (header, *lines))
