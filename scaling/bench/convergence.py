"""``python -m scaling bench --convergence``: DS2's convergence experiment (Kalavri et al., OSDI 2018,
§5.2) on every topology of the catalog in both modes: a constant load, ds2 started at an eighth of
the parallelism it needs, and the rescales (steps) and seconds until the job keeps up for good.

The needed configuration is the cheapest one at the policy's utilization target
(``baselines.config_for_load``); the start gives every adjustable vertex, and in micro-batch mode the
cores, an eighth of it (at least 1). With ``busy_cap`` the simulator caps each sample's busy time at
1000 ms/s per task, as production does not: a table printed for comparison only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from scaling.bench.run import DS2_OPTIONS, base_rate_per_s, bench_policy, bench_settings
from scaling.sim import workloads
from scaling.sim.baselines import config_for_load
from scaling.sim.engine import Config, PolicyController, RunResult, capacity_per_s, simulate
from scaling.sim.model import derive_seed
from scaling.sim.topologies import CATALOG
from scaling.sim.topologies import job as make_job
from scaling.values.mode import Mode

START_FRACTION = 8
"""The start is the needed parallelism divided by this (DS2's experiments start far below it)."""
LOAD_FACTOR = 2.0
"""The constant load, in base loads (``bench.run.base_rate_per_s``)."""
DURATION_S = 3600.0


@dataclass(frozen=True)
class ConvergenceRow:
    """One workload: the needed and start resources (cores, or slots in continuous mode), the
    rescales until the job keeps up to the end (``None``: it never did), when, the resources then,
    all rescales of the run and the records lost."""

    workload: str
    needed: int
    start: int
    steps: int | None
    converge_s: float | None
    final: int
    rescales: int
    lost: float


def _start(needed: Config, mode: Mode, adjustable: set[str]) -> Config:
    parallelism = {vid: max(1, p // START_FRACTION) if vid in adjustable else p
                   for vid, p in needed.parallelism.items()}
    cores = max(1, (needed.cores or 1) // START_FRACTION) if mode == Mode.MICRO_BATCH else None
    return Config(parallelism, cores)


def converged(result: RunResult) -> tuple[int | None, float | None]:
    """The rescales before the job keeps up with the load to the end of the run, and the second the
    last of them finished; ``(None, None)`` when it does not keep up at the end."""
    behind = [t for t, c, load in zip(result.t_s, result.capacity_per_s, result.load_per_s) if c < load]
    if behind and behind[-1] >= result.t_s[-1]:
        return None, None
    since = behind[-1] if behind else 0.0
    done = [r for r in result.rescales if r.at_s <= since]
    return len(done), (done[-1].at_s + done[-1].downtime_s if done else 0.0)


def convergence_rows(*, seed: int, busy_cap: bool, setting: str = "tuned",
                     progress: Callable[[str], None] | None = None) -> list[ConvergenceRow]:
    """ds2 from an eighth of the needed parallelism under a constant load, per topology and mode."""
    policy = bench_policy(setting)
    rows = []
    for mode in (Mode.MICRO_BATCH, Mode.CONTINUOUS):
        settings = bench_settings(mode, busy_cap=busy_cap)
        for name in CATALOG:
            job = make_job(name)
            load = LOAD_FACTOR * base_rate_per_s(job)
            trace = workloads.step(base_per_s=load, factor=1.0, duration_s=DURATION_S, up_at_s=DURATION_S,
                                   down_at_s=DURATION_S, step_s=settings.step_s, noise=0.02,
                                   seed=derive_seed(seed, name, "convergence"))
            needed = config_for_load(job, settings, policy, load)
            start = _start(needed, mode, {v.id for v in job.vertices if v.adjustable})
            controller = PolicyController(replace(policy, **DS2_OPTIONS), name="ds2", mode=mode)
            result = simulate(job, trace, settings, controller, start, seed=seed)
            steps, at = converged(result)
            rows.append(ConvergenceRow(f"{name}/{mode}", needed.resources(), start.resources(), steps, at,
                                       result.resources[-1], len(result.rescales), round(result.records_lost)))
            if progress:
                progress(f"{name}/{mode}: start {start.resources()} of {needed.resources()}, "
                         f"capacity {capacity_per_s(job, start, settings):.0f} of {load:.0f} records/s")
    return rows


def format_convergence(rows: list[ConvergenceRow]) -> str:
    """The convergence table, one line per workload, and the totals."""
    header = ("workload", "needed", "start", "steps", "converge_s", "final", "rescales", "lost")
    lines = [(r.workload, str(r.needed), str(r.start), "never" if r.steps is None else str(r.steps),
              "-" if r.converge_s is None else f"{r.converge_s:,.0f}", str(r.final), str(r.rescales),
              f"{r.lost:,.0f}") for r in rows]
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(header)]
    out = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
           for row in (header, *lines)]
    done = [r.steps for r in rows if r.steps is not None]
    out.append(f"converged {len(done)} of {len(rows)}; steps: {sum(done)} in total, at most {max(done, default=0)}; "
               f"rescales {sum(r.rescales for r in rows)}; records lost {sum(r.lost for r in rows):,.0f}")
    return "\n".join(out)


def run_convergence_cli(*, seed: int, compare_busy_cap: bool, setting: str = "tuned") -> int:
    """Print the convergence table measured as production does, and with ``compare_busy_cap`` the
    same with each sample's busy time capped at 1000 ms/s (production does not cap it)."""
    caps = (False, True) if compare_busy_cap else (False,)
    for cap in caps:
        title = ("busy time capped at 1000 ms/s per sample (the old simulator; comparison only)" if cap
                 else "measured as production does (busy time not capped)")
        print(f"== convergence of ds2 from 1/{START_FRACTION} of the needed parallelism, constant load "
              f"{LOAD_FACTOR:g}x base, {DURATION_S:g} s, setting {setting}, seed {seed}: {title} ==")
        print(format_convergence(convergence_rows(seed=seed, busy_cap=cap, setting=setting)))
        print()
    return 0
