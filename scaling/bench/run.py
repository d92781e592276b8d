"""The policy benchmark: every policy on the same workloads (a load trace, step, diurnal, spikes or random walk,
on a topology in one mode), side by side, in one run, from the same start and with the same seeded trace,
metric noise and downtime draws. The oracle (``baselines.oracle_configs``) is hindsight no policy can beat:
``core_hours_vs_oracle`` is the price of a policy's headroom and dynamics, ``core_hours_vs_held`` compares with
the oracle holding each scale-down for ``scale_down_interval_s`` (``baselines.held_core_s``), and
``static-peak`` holds the peak. A micro-batch rescale costs what the runner's paths cost
(``scaling.sim.model.RUNNER_PAUSE`` and ``RUNNER_COSTS``), a continuous one 15 s. ds2 gets DS2's activation
time of 2 evaluations (``DS2_OPTIONS``). Two settings (``SETTINGS``): Flink's defaults and the tuned band. SLO
violation: the time the lag stays above 300 s (the catch-up duration) and above 60 s. The rules in full:
docs/ARCHITECTURE.md, "The policy benchmark".
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from scaling.planner.algorithms import resolve
from scaling.policy.options import flink_defaults
from scaling.policy.policy import Policy
from scaling.sim import workloads
from scaling.sim.baselines import (
    DhalionPolicy,
    ScheduleController,
    UniformPolicy,
    held_core_s,
    oracle_configs,
    peak_config,
)
from scaling.sim.engine import Config, Controller, PolicyController, RunResult, simulate
from scaling.sim.model import RUNNER_COSTS, RUNNER_PAUSE, Downtime, Noise, SimJob, SimSettings, derive_seed
from scaling.sim.topologies import CATALOG
from scaling.sim.topologies import job as make_job
from scaling.sim.workloads import Trace
from scaling.values.mode import Mode

ROW_KEYS = ("workload", "policy", "rescales", "max_steps_to_converge", "oscillations", "peak_backlog",
            "slo_violation_s", "slo_violation_60_s", "records_lost", "core_hours", "core_hours_vs_oracle",
            "core_hours_vs_held", "underprovisioned_fraction")
SLO_LAGS_S = (300.0, 60.0)
"""The lags whose violation the table gives: the catch-up duration (``slo_violation_s``) and 60 s."""
ORACLE_LAG_BUDGET_S = 10.0
"""The backlog the oracle may leave at an interval's end, seconds of arrivals: a third of the 60 s
SLO, the rest for the batches' own latency (a trigger and a batch) and the peaks inside an interval."""
MICRO_BATCH_POLICIES = ("ds2", "batch-ratio", "dhalion", "uniform", "static-peak", "oracle")
CONTINUOUS_POLICIES = ("ds2", "dhalion", "uniform", "static-peak", "oracle")
START_PARTITIONS_PER_PEAK_CORE = 4
BASE_BUSY_CORES = 4.0
"""The base load of every workload keeps this many cores busy (the step and spikes triple it)."""


SETTINGS = {
    "flink-defaults": dict(utilization_target=0.7, utilization_min=None, utilization_max=None,
                           scale_down_interval_s=3600.0),
    "tuned": dict(utilization_target=0.7, utilization_min=0.55, utilization_max=0.85, scale_down_interval_s=900.0),
}
"""The two settings of the bench: Flink's defaults (``job.autoscaler.utilization.target`` 0.7, band
± 0.3, ``scale-down.interval`` 1 h) and the tuned band (a Spark restart costs seconds, not Flink's
minutes)."""


DS2_OPTIONS = dict(activation_evaluations=2)
"""The options ds2 gets beyond the shared ones (printed with each table, ``describe_setting``): DS2's
activation time (Kalavri et al., OSDI 2018, §4; the DS2 controller's ``activation_time``), 2
consecutive evaluations recommending a rescale before it applies, so that a spike shorter than a
policy interval is not taken for a new load level. Every other policy keeps the shared options."""


def bench_policy(setting: str = "tuned", **overrides) -> Policy:
    """The policy options every policy of the benchmark shares at ``setting`` (``SETTINGS``), on
    Flink's defaults (``scaling.policy.options.flink_defaults``), plus: catch-up duration 5 min (Flink: 30
    min), restart time 15 s tracked, backlog lag threshold 60 s, vertex max parallelism 64."""
    options = dict(flink_defaults(), catch_up_duration_s=300.0, restart_time_s=15.0, restart_time_tracking_enabled=True,
                   backlog_lag_threshold_s=60.0, vertex_max_parallelism=64, **SETTINGS[setting])
    options.update(overrides)
    return Policy(**options)


def describe_setting(setting: str) -> str:
    """The setting's options that differ between the tables, for the printed header."""
    policy = bench_policy(setting)
    return (f"setting {setting}: utilization target {policy.utilization_target}, band {list(policy.band)}, "
            f"scale-down interval {policy.scale_down_interval_s:g} s, catch-up {policy.catch_up_duration_s:g} s, "
            f"restart time {policy.restart_time_s:g} s (tracked); ds2 only: "
            + ", ".join(f"{name} {value}" for name, value in DS2_OPTIONS.items()))


def bench_settings(mode: Mode, **overrides) -> SimSettings:
    """The simulator's settings for ``mode``: micro-batch rescales cost the runner's paths, a
    continuous one a 15 s restart (log-normal spread 0.3); 3 % metric noise; ``overrides`` win."""
    costs = dict(downtime=RUNNER_PAUSE, rescale_costs=RUNNER_COSTS) if mode == Mode.MICRO_BATCH else dict(
        downtime=Downtime(15.0, 0.3))
    options = dict(mode=mode, step_s=5.0, collect_interval_s=30.0, policy_interval_s=60.0, metric_window_s=180.0,
                   stabilization_s=30.0, retention_s=3600.0, trigger_interval_s=10.0, batch_overhead_s=0.5,
                   max_executors=64, noise=Noise(0.03), **costs)
    options.update(overrides)
    return SimSettings(**options)


@dataclass(frozen=True)
class Workload:
    """A trace kind on a topology in a mode. ``name`` is ``kind/topology/mode``."""

    kind: str
    topology: str
    mode: Mode
    hours: float

    @property
    def name(self) -> str:
        return f"{self.kind}/{self.topology}/{self.mode}"


def base_rate_per_s(job: SimJob) -> float:
    """The arrival rate that keeps ``BASE_BUSY_CORES`` busy with one task per vertex."""
    cost = sum(job.unit_rates[v.id] * v.curve.cost_s_per_record(1) for v in job.vertices)
    return BASE_BUSY_CORES / cost


def make_trace(workload: Workload, job: SimJob, seed: int, step_s: float) -> Trace:
    base = base_rate_per_s(job)
    duration = workload.hours * 3600.0
    trace_seed = derive_seed(seed, workload.kind, workload.topology)
    if workload.kind == "step":
        return workloads.step(base_per_s=base, duration_s=duration, up_at_s=duration / 4, down_at_s=duration / 2,
                              step_s=step_s, noise=0.02, seed=trace_seed)
    if workload.kind == "diurnal":
        return workloads.diurnal(mean_per_s=base * 1.6, duration_s=duration, step_s=step_s, seed=trace_seed)
    if workload.kind == "spikes":
        return workloads.spikes(base_per_s=base, duration_s=duration, step_s=step_s, seed=trace_seed)
    if workload.kind == "random-walk":
        return workloads.random_walk(base_per_s=base * 1.5, duration_s=duration, step_s=step_s, seed=trace_seed)
    raise KeyError(f"unknown workload kind {workload.kind!r}")


QUICK = (
    Workload("step", "demo", Mode.MICRO_BATCH, 3.0),
    Workload("diurnal", "nexmark-q5", Mode.MICRO_BATCH, 24.0),
    Workload("spikes", "nexmark-q8", Mode.MICRO_BATCH, 2.0),
    Workload("random-walk", "two-branch", Mode.MICRO_BATCH, 4.0),
    Workload("step", "wordcount", Mode.CONTINUOUS, 3.0),
    Workload("random-walk", "two-branch", Mode.CONTINUOUS, 4.0),
)


def full_workloads() -> tuple[Workload, ...]:
    hours = {"step": 3.0, "diurnal": 24.0, "spikes": 2.0, "random-walk": 4.0}
    return tuple(Workload(kind, topology, mode, hours[kind]) for mode in (Mode.MICRO_BATCH, Mode.CONTINUOUS)
                 for topology in CATALOG for kind in workloads.KINDS)


@dataclass
class Run:
    workload: Workload
    policy: str
    result: RunResult
    trace: Trace
    settings: SimSettings
    controller: Controller
    wall_s: float = 0.0


def make_controller(name: str, mode: Mode, policy: Policy, oracle: list[Config], interval_s: float,
                    at_target: list[Config] | None = None) -> Controller:
    """The controller of policy ``name``: the oracle's schedule, static-peak's one configuration, or a
    ``PolicyController`` (ds2 with ``DS2_OPTIONS``)."""
    if name == "oracle":
        return ScheduleController("oracle", oracle, interval_s)
    if name == "static-peak":
        return ScheduleController("static-peak", [peak_config(at_target or oracle)], interval_s)
    implementation = {"dhalion": DhalionPolicy(), "uniform": UniformPolicy()}.get(name) or resolve(name)
    if name == "ds2":
        policy = replace(policy, **DS2_OPTIONS)
    return PolicyController(policy, name=name, mode=mode, implementation=implementation)


def start_config(job: SimJob, oracle: list[Config], mode: Mode) -> Config:
    """Every policy starts from the oracle's first configuration; in micro-batch mode adjustable
    non-source stages start with ``START_PARTITIONS_PER_PEAK_CORE`` partitions per core the peak
    needs (at most 64), as an operator sets ``spark.sql.shuffle.partitions`` for executor-only
    scaling: policies that add executors but keep partitions can use the cores they add."""
    first = oracle[0]
    if mode != Mode.MICRO_BATCH:
        return first
    peak = peak_config(oracle)
    parallelism = dict(first.parallelism)
    for v in job.vertices:
        if v.adjustable and not v.source:
            parallelism[v.id] = min(v.max_parallelism, 64, START_PARTITIONS_PER_PEAK_CORE * peak.parallelism[v.id])
    return Config(parallelism, first.cores)


def run_workload(workload: Workload, *, seed: int, policies: Iterable[str] | None = None,
                 setting: str = "tuned", **overrides) -> list[Run]:
    """Every policy (``policies``, default all of the mode's) on ``workload``; ``overrides`` go to
    ``bench_settings``."""
    job = make_job(workload.topology)
    settings = bench_settings(workload.mode, **overrides)
    trace = make_trace(workload, job, seed, settings.step_s)
    policy = bench_policy(setting)
    oracle = oracle_configs(job, trace, settings, policy, utilization=1.0, lag_budget_s=ORACLE_LAG_BUDGET_S)
    at_target = oracle_configs(job, trace, settings, policy)
    names = policies or (MICRO_BATCH_POLICIES if workload.mode == Mode.MICRO_BATCH else CONTINUOUS_POLICIES)
    start = start_config(job, at_target, workload.mode)
    runs = []
    for name in names:
        controller = make_controller(name, workload.mode, policy, oracle, settings.policy_interval_s, at_target)
        began = time.perf_counter()
        result = simulate(job, trace, settings, controller, start, seed=seed)
        runs.append(Run(workload, name, result, trace, settings, controller, time.perf_counter() - began))
    return runs


@dataclass(frozen=True)
class Convergence:
    steps: int | None
    time_s: float | None
    up: bool = True


def convergence(result: RunResult, trace: Trace) -> list[Convergence]:
    """Per load change: the rescales from the change to the end of its segment, and the time until
    the last of them finished, when the job then sustains the load to the segment's end; ``None``
    (did not converge) when it is under-provisioned at the end of the segment."""
    points = list(trace.change_points_s)
    found = []
    for i, at in enumerate(points):
        end = points[i + 1] if i + 1 < len(points) else trace.duration_s
        rescales = [r for r in result.rescales if at <= r.at_s < end]
        tail = [k for k, t in enumerate(result.t_s) if end - 300.0 <= t < end]
        sustained = all(result.capacity_per_s[k] >= result.load_per_s[k] for k in tail)
        up = trace.rate_at(at + trace.step_s) > trace.rate_at(at - trace.step_s)
        if not sustained:
            found.append(Convergence(None, None, up))
        else:
            last = rescales[-1].at_s + rescales[-1].downtime_s - at if rescales else 0.0
            found.append(Convergence(len(rescales), last, up))
    return found


def oscillations(result: RunResult, interval_s: float) -> int:
    """Reversals: a rescale whose direction (resources up or down) is the opposite of the previous
    one's, within 3 policy intervals of it."""
    count = 0
    previous = None
    for r in result.rescales:
        direction = _direction(r.before, r.after)
        if previous is not None and direction and previous[1] and direction != previous[1] \
                and r.at_s - previous[0] <= 3 * interval_s:
            count += 1
        previous = (r.at_s, direction)
    return count


def _direction(before: Config, after: Config) -> int:
    delta = after.resources() - before.resources()
    if delta == 0:
        delta = sum(after.parallelism.values()) - sum(before.parallelism.values())
    return (delta > 0) - (delta < 0)


def violation_episodes_s(result: RunResult, threshold_s: float, tick_s: float) -> list[float]:
    """Lengths of the episodes with the lag above ``threshold_s``, seconds."""
    episodes, current = [], 0.0
    for lag in result.lag_s:
        if lag > threshold_s:
            current += tick_s
        elif current:
            episodes.append(current)
            current = 0.0
    if current:
        episodes.append(current)
    return episodes


@dataclass
class Row:
    workload: str
    policy: str
    rescales: int
    max_steps_to_converge: int | None
    oscillations: int
    peak_backlog: float
    slo_violation_s: float
    slo_violation_60_s: float
    records_lost: float
    core_hours: float
    core_hours_vs_oracle: float
    core_hours_vs_held: float
    underprovisioned_fraction: float
    extra: dict = field(default_factory=dict)

    def as_json(self) -> dict:
        """The row's ``ROW_KEYS`` and ``step_up_steps``: rescales after each step-up (None: did not
        converge)."""
        return {**{key: getattr(self, key) for key in ROW_KEYS}, "step_up_steps": self.extra.get("step_ups", [])}


def rows_for(runs: list[Run], policy: Policy) -> list[Row]:
    """One row per run; the ratios to the oracle's run, and to that oracle holding each scale-down
    for ``policy.scale_down_interval_s`` (``held_core_s``, scaled to the oracle run's core-seconds)."""
    oracle_run = next(r for r in runs if r.policy == "oracle")
    oracle = oracle_run.result.core_seconds
    configs, interval = oracle_run.controller.configs, oracle_run.settings.policy_interval_s
    plain = held_core_s(configs, interval, 0.0)
    held = oracle * held_core_s(configs, interval, policy.scale_down_interval_s) / plain if plain else 0.0
    rows = []
    for run in runs:
        result, tick = run.result, run.settings.collect_interval_s
        conv = convergence(result, run.trace)
        steps = None if not conv or any(c.steps is None for c in conv) else max(c.steps for c in conv)
        episodes = violation_episodes_s(result, policy.catch_up_duration_s, tick)
        under = sum(1 for capacity, load in zip(result.capacity_per_s, result.load_per_s) if capacity < load)
        days = result.duration_s / 86400.0
        rows.append(Row(
            workload=run.workload.name, policy=run.policy, rescales=len(result.rescales),
            max_steps_to_converge=steps, oscillations=oscillations(result, run.settings.policy_interval_s),
            peak_backlog=round(max(result.backlog, default=0.0)), slo_violation_s=round(sum(episodes), 1),
            slo_violation_60_s=round(sum(violation_episodes_s(result, SLO_LAGS_S[1], tick)), 1),
            records_lost=round(result.records_lost), core_hours=round(result.core_seconds / 3600.0, 3),
            core_hours_vs_oracle=round(result.core_seconds / oracle, 3) if oracle else math.inf,
            core_hours_vs_held=round(result.core_seconds / held, 3) if held else math.inf,
            underprovisioned_fraction=round(under / max(1, len(result.t_s)), 4),
            extra={"rescales_per_day": round(len(result.rescales) / days, 1),
                   "peak_lag_s": round(max(result.lag_s, default=0.0)),
                   "longest_violation_s": max(episodes, default=0.0),
                   "converge_s": [None if c.time_s is None else round(c.time_s) for c in conv],
                   "converged": all(c.steps is not None for c in conv),
                   "step_ups": [c.steps for c in conv if c.up],
                   "has_changes": bool(conv), "wall_s": round(run.wall_s, 2)}))
    return rows


@dataclass
class BenchResult:
    rows: list[Row]
    runs: list[Run]
    policy: Policy
    seed: int
    quick: bool
    wall_s: float
    setting: str = "tuned"


def run_bench(*, quick: bool = True, seed: int = 7, workloads_: Iterable[Workload] | None = None,
              progress: Callable[[str], None] | None = None, setting: str = "tuned") -> BenchResult:
    """Run every policy on every workload (``QUICK`` or the full matrix) at ``setting``."""
    began = time.perf_counter()
    chosen = tuple(workloads_) if workloads_ is not None else (QUICK if quick else full_workloads())
    policy = bench_policy(setting)
    rows: list[Row] = []
    runs: list[Run] = []
    for workload in chosen:
        found = run_workload(workload, seed=seed, setting=setting)
        runs.extend(found)
        rows.extend(rows_for(found, policy))
        if progress:
            progress(f"{workload.name}: {sum(r.wall_s for r in found):.1f} s")
    return BenchResult(rows, runs, policy, seed, quick, time.perf_counter() - began, setting)
