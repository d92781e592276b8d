"""The discrete-time simulator of a streaming job, in both modes (``continuous_engine``,
``micro_batch_engine``): what they share (configurations, samples in the collector's form, the
controllers, rescales and their costs, the result). A ``PolicyController`` runs a policy through
production's one door on the window the production metric path makes (docs/ARCHITECTURE.md, "The
simulator")."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol

from scaling.planner.algorithms import ScalingPolicy, resolve
from scaling.planner.door import decide
from scaling.policy.memory import MemoryPolicy
from scaling.policy.policy import Policy
from scaling.sim.continuous_engine import ContinuousEngine, capacity_continuous
from scaling.sim.memory import HeapModel, grown_heap_mb
from scaling.sim.micro_batch_engine import MicroBatchEngine, capacity_micro_batch
from scaling.sim.model import SimJob, SimSettings, derive_seed
from scaling.sim.sourcelog import EPSILON_RECORDS, Accumulator, SourceLog
from scaling.sim.workloads import Trace
from scaling.values.memory import MemoryInputs, MemoryKnob, MemoryReading
from scaling.values.metrics import ClusterState, MetricWindow, VertexMeasurement, VertexMetrics
from scaling.values.mode import Mode
from scaling.values.plan import JobPlan
from scaling.values.readiness import SampleIssue
from scaling.values.reasons import Decision, MemoryKind
from scaling.values.request import PlanRequest
from scaling.values.state import ScalerState
from scaling.values.topology import Topology

__all__ = ["EPSILON_RECORDS", "Config", "Controller", "Observation", "PolicyController", "Rescale", "RunResult",
           "Simulation", "capacity_per_s", "derive_seed", "simulate"]


@dataclass(frozen=True)
class Config:
    """A running configuration: parallelism (tasks) per vertex, cores in micro-batch mode, and each
    executor's heap, MB, when memory is simulated (None in a controller's answer: keep the heap)."""

    parallelism: Mapping[str, int]
    cores: int | None = None
    heap_mb: int | None = None

    def resources(self) -> int:
        """Cores held: micro-batch, the executors' cores; continuous, one slot per task."""
        return self.cores if self.cores is not None else sum(self.parallelism.values())


@dataclass(frozen=True)
class Observation:
    """What a controller sees at a policy tick: the metric window since the configuration started
    (None while it is not full), the running configuration, the memory readings of the window's
    collects (when memory is simulated) and the samples' readiness (the simulator's are ready)."""

    now_s: float
    config: Config
    topology: Topology
    cluster: ClusterState | None
    metrics: Mapping[str, VertexMetrics] | None
    batch_durations_s: tuple[float, ...] = ()
    memory: tuple[MemoryReading, ...] = ()
    not_ready: tuple[SampleIssue, ...] = ()


class Controller(Protocol):
    """Decides configurations. ``free_rescale`` controllers (the oracle) rescale without downtime."""

    name: str
    free_rescale: bool

    def decide(self, observation: Observation) -> Config | None: ...

    def restarted(self, downtime_s: float) -> None: ...


@dataclass
class PolicyController:
    """Runs a policy (``scaling.planner.algorithms``, or ``implementation``) on the simulated metrics
    through production's one door (``scaling.planner.door.decide``), carrying its ``ScalerState``:
    the memory gate at ``memory``'s thresholds and, with ``memory_apply``, the heap on the knob
    ``heap_knob`` within ``[memory_min_mb, memory_max_mb]``."""

    policy: Policy
    name: str = ""
    mode: Mode = Mode.MICRO_BATCH
    implementation: ScalingPolicy | None = None
    free_rescale: bool = False
    state: ScalerState = field(default_factory=ScalerState)
    plans: list[tuple[float, JobPlan]] = field(default_factory=list)
    memory: MemoryPolicy = field(default_factory=MemoryPolicy)
    heap_knob: str = "heap_mb"

    def __post_init__(self) -> None:
        if self.implementation is None:
            self.implementation = resolve(self.policy.algorithm)
        self.name = self.name or self.policy.algorithm

    def request(self, observation: Observation) -> PlanRequest | None:
        """What the door is asked at ``observation``; None while the metric window is not full."""
        if observation.metrics is None:
            return None
        heap = observation.config.heap_mb
        knobs = () if heap is None else (MemoryKnob(MemoryKind.HEAP, self.heap_knob, heap, self.memory.memory_min_mb,
                                                    self.memory.memory_max_mb),)
        return PlanRequest(topology=observation.topology, metrics=observation.metrics, policy=self.policy,
                           mode=self.mode, cluster=observation.cluster, state=self.state, now_s=observation.now_s,
                           batch_durations_s=observation.batch_durations_s, not_ready=observation.not_ready,
                           memory=MemoryInputs(observation.memory, self.memory, knobs) if observation.memory else None)

    def decide(self, observation: Observation) -> Config | None:
        request = self.request(observation)
        if request is None:
            return None
        plan = decide(request, self.implementation)
        self.plans.append((observation.now_s, plan))
        if plan.next_state is not None:
            self.state = plan.next_state
        if plan.decision != Decision.SCALE or not plan.executable or not plan.changes:
            return None
        cores = None
        if observation.cluster is not None and plan.executors_proposed is not None:
            cores = plan.executors_proposed * observation.cluster.cores_per_executor
        heap = plan.memory_proposed_mb if plan.memory_proposed_mb != plan.memory_current_mb else None
        return Config({v.vertex_id: v.proposed for v in plan.vertices}, cores, heap)

    def restarted(self, downtime_s: float) -> None:
        self.state = self.state.with_restart_time(downtime_s)


@dataclass(frozen=True)
class Rescale:
    """A configuration change at ``at_s``, seconds: ``restarted`` when the query restarted for it
    (False: executors added or removed in place)."""

    at_s: float
    before: Config
    after: Config
    downtime_s: float
    restarted: bool = True


@dataclass
class RunResult:
    """One simulated run: a point per collect tick, the rescales, and the totals.

    Series (one value per tick, at ``t_s``): ``load_per_s`` the true arrival rate; ``capacity_per_s``
    the arrival rate the running configuration sustains (0 while down); ``backlog`` unprocessed
    records at the sources; ``lag_s`` the age of the oldest unprocessed record; ``resources`` cores
    (micro-batch) or slots (continuous). With memory: ``executors`` and ``heap_needed_mb`` (the
    smallest heap not under pressure, ``HeapModel.smallest_calm_heap_mb``) per tick, ``memory_mb_s``
    Σ executors × heap × seconds, and ``memory_failures`` the batches that ran out of heap.
    """

    job: str
    controller: str
    mode: Mode
    t_s: list[float] = field(default_factory=list)
    load_per_s: list[float] = field(default_factory=list)
    capacity_per_s: list[float] = field(default_factory=list)
    backlog: list[float] = field(default_factory=list)
    lag_s: list[float] = field(default_factory=list)
    resources: list[int] = field(default_factory=list)
    rescales: list[Rescale] = field(default_factory=list)
    records_arrived: float = 0.0
    records_lost: float = 0.0
    core_seconds: float = 0.0
    duration_s: float = 0.0
    executors: list[int] = field(default_factory=list)
    heap_needed_mb: list[int] = field(default_factory=list)
    memory_mb_s: float = 0.0
    memory_failures: int = 0


def capacity_per_s(job: SimJob, config: Config, settings: SimSettings) -> float:
    """The arrival rate a configuration sustains, records/s."""
    if settings.mode == Mode.MICRO_BATCH:
        return capacity_micro_batch(job, config, settings)
    return capacity_continuous(job, config)


class Simulation:
    """One run of ``controller`` on ``job`` under ``trace``. Deterministic for a given ``seed``."""

    def __init__(self, job: SimJob, trace: Trace, settings: SimSettings, controller: Controller,
                 start: Config, *, seed: int = 0) -> None:
        if settings.step_s != trace.step_s:
            raise ValueError(f"step_s: the trace has {trace.step_s} s steps, the settings {settings.step_s}")
        self.job, self.trace, self.settings, self.controller = job, trace, settings, controller
        self.heap_model = HeapModel(job.memory, trace, settings.cores_per_executor) \
            if job.memory is not None and settings.mode == Mode.MICRO_BATCH else None
        self.memory_policy = MemoryPolicy()
        self.config = replace(start, heap_mb=start.heap_mb or job.memory.start_heap_mb) if self.heap_model else start
        self.seed = seed
        # The same noise draws for every policy: the seed does not depend on the controller,
        # and every collect draws the same number of values whatever the configuration.
        self.noise_rng = random.Random(derive_seed(seed, job.name, trace.kind, "noise"))
        self.downtime_rng = random.Random(derive_seed(seed, job.name, trace.kind, "downtime"))
        self.logs = {v.id: SourceLog() for v in job.vertices if v.source}
        self.result = RunResult(job.name, controller.name, settings.mode)
        self.samples: list[tuple[float, dict[str, VertexMeasurement], tuple[float, ...], MemoryReading | None]] = []
        self.active_since_s = 0.0
        self.down_until_s = 0.0
        self.engine = MicroBatchEngine(self) if settings.mode == Mode.MICRO_BATCH else ContinuousEngine(self)

    # -- shared ----------------------------------------------------------------------------------
    def _cluster(self) -> ClusterState | None:
        s = self.settings
        if s.mode != Mode.MICRO_BATCH:
            return None
        return ClusterState(executors=max(1, (self.config.cores or 1) // s.cores_per_executor),
                            cores_per_executor=s.cores_per_executor, min_executors=s.min_executors,
                            max_executors=s.max_executors, trigger_interval_s=s.trigger_interval_s)

    def _sample(self, now_s: float, acc: Mapping[str, Accumulator], batch_durations_s: tuple[float, ...], batches: int,
                memory: MemoryReading | None = None) -> None:
        """One collect: a ``VertexMeasurement`` per vertex over the last collect interval, with noise
        (records and busy time; the busiest task's time moves with the busy time), and ``memory``."""
        window_s, s = self.settings.collect_interval_s, self.settings
        row = {}
        for vid in self.job.order:
            v, a = self.job.by_id[vid], acc[vid]
            tasks = self.config.parallelism[vid]
            f_records, f_busy = s.noise.factor(self.noise_rng), s.noise.factor(self.noise_rng)
            kwargs: dict[str, float] = {}
            if v.source:
                if v.generator:
                    kwargs["backlog_growth_per_s"] = a.unmet / window_s
                else:
                    kwargs["backlog"] = self.logs[vid].total + self._in_flight(vid, now_s)
                    kwargs["backlog_growth_per_s"] = a.arrived / window_s - a.records_in / window_s
            if s.mode == Mode.MICRO_BATCH and batches:
                kwargs["batch_overhead_s"] = s.batch_overhead_s
            busy_s, busy_max_s = a.busy_core_s * f_busy, a.busy_max_s * f_busy if v.skew_seen else None
            if s.busy_cap:
                busy_s, busy_max_s = min(busy_s, window_s * tasks), None
            row[vid] = VertexMeasurement(
                span_s=window_s, tasks=tasks, busy_s=busy_s, busy_max_s=busy_max_s, records_in=a.records_in * f_records,
                records_out=a.records_out * f_records, batches=batches, **kwargs)
        mean_batch = (sum(batch_durations_s) / len(batch_durations_s),) if batch_durations_s else ()
        if now_s - window_s >= self.active_since_s + s.stabilization_s - 1e-9:
            self.samples.append((now_s, row, mean_batch, memory))

    def _observe(self, now_s: float) -> Observation:
        s = self.settings
        valid = [x for x in self.samples if x[0] > now_s - s.metric_window_s - 1e-9]
        covered = len(valid) * s.collect_interval_s
        metrics = None
        durations: tuple[float, ...] = ()
        if valid and covered >= s.metric_window_s - 1e-9:
            window = MetricWindow.from_measurements(m for _, m, _, _ in valid)
            sources = tuple(v.id for v in self.job.vertices if v.source)
            start = window.change_index(sources) if s.detect_change else None
            metrics = window.aggregate(sources, after_change=s.detect_change)
            durations = tuple(d for _, _, ds, _ in valid[start or 0:] for d in ds)
        memory = tuple(r for _, _, _, r in valid if r is not None) if metrics is not None else ()
        return Observation(now_s, self.config, self.job.topology(dict(self.config.parallelism)), self._cluster(),
                           metrics, durations, memory)

    def _in_place(self, new: Config) -> bool:
        """Micro-batch: only the executors change (the partitions stay)."""
        return self.settings.mode == Mode.MICRO_BATCH and not any(
            new.parallelism.get(k, v) != v for k, v in self.config.parallelism.items())

    def _rescale_cost(self, new: Config) -> tuple[float, float, bool]:
        """The pause, seconds, the first batch's extra seconds, and whether the query restarts: new
        partitions (or any continuous rescale) restart after ``downtime``; in micro-batch mode new
        executors only are added in place (Spark dynamic allocation, SPARK-12133's path) or by a warm
        driver handover (``RescaleCosts``)."""
        s = self.settings
        costs = s.rescale_costs
        if new.heap_mb is not None and new.heap_mb != self.config.heap_mb:  # a new JVM: the new driver's cost
            return costs.handover.draw(self.downtime_rng), costs.handover_first_batch_s, True
        if s.mode != Mode.MICRO_BATCH or not self._in_place(new):
            extra = costs.partitions_first_batch_s if s.mode == Mode.MICRO_BATCH else 0.0
            return s.downtime.draw(self.downtime_rng), extra, True
        if costs.executors_move_in_place:
            return costs.executors_in_place_s, costs.executors_in_place_first_batch_s, False
        return costs.handover.draw(self.downtime_rng), costs.handover_first_batch_s, True

    def _apply(self, now_s: float, new: Config, restart_at_s: float, *, forced: bool = False) -> None:
        """Run ``new`` from ``restart_at_s`` after its cost (none for a ``free_rescale`` controller,
        unless ``forced``: a restart after a failure costs every controller the same)."""
        restarts = True
        if self.controller.free_rescale and not forced:
            downtime, extra, restart_at_s = 0.0, 0.0, now_s
        else:
            downtime, extra, restarts = self._rescale_cost(new)
            if restarts:
                self.controller.restarted(downtime)
            else:
                restart_at_s = now_s
        running = Config(dict(new.parallelism), new.cores, new.heap_mb or self.config.heap_mb)
        self.result.rescales.append(Rescale(now_s, self.config, running, downtime, restarts))
        self.config = running
        self.down_until_s = restart_at_s + downtime
        self.active_since_s = self.down_until_s
        self.engine.extra_next_batch_s = extra
        self.samples.clear()

    def _record(self, now_s: float) -> None:
        r = self.result
        r.t_s.append(now_s)
        r.load_per_s.append(self.trace.rate_at(now_s - 1e-9))
        down = now_s < self.down_until_s
        r.capacity_per_s.append(0.0 if down else capacity_per_s(self.job, self.config, self.settings))
        r.backlog.append(sum(log.total for log in self.logs.values()) + sum(
            self._in_flight(vid, now_s) for vid in self.logs))
        oldest = min([log.oldest_s() for log in self.logs.values()] + [self._in_flight_oldest(now_s)])
        r.lag_s.append(max(0.0, now_s - oldest) if oldest < math.inf else 0.0)
        r.resources.append(self.config.resources())
        if self.heap_model is not None:
            executors = self._executors()
            r.executors.append(executors)
            r.heap_needed_mb.append(self.heap_model.smallest_calm_heap_mb(self.heap_model.used_mb(now_s, executors),
                                                                          self.memory_policy))

    def _tick(self, now_s: float) -> None:
        """Record the tick, then let the controller decide at policy ticks."""
        self._record(now_s)
        self.result.core_seconds += self.config.resources() * self.settings.collect_interval_s
        if self.heap_model is not None:
            self.result.memory_mb_s += self._executors() * (self.config.heap_mb or 0) * self.settings.collect_interval_s
        s = self.settings
        at_policy_tick = abs(now_s / s.policy_interval_s - round(now_s / s.policy_interval_s)) < 1e-9
        if at_policy_tick and now_s >= self.down_until_s:
            new = self.controller.decide(self._observe(now_s))
            if new is not None and self._differs(new):
                self._apply(now_s, new, self._restart_at(now_s))

    def _differs(self, new: Config) -> bool:
        return (new.cores != self.config.cores or (new.heap_mb is not None and new.heap_mb != self.config.heap_mb)
                or any(new.parallelism.get(k, v) != v for k, v in self.config.parallelism.items()))

    def run(self) -> RunResult:
        """Run the mode's engine over the whole trace; the totals at the end."""
        self.engine.run()
        self.result.records_lost = sum(log.lost for log in self.logs.values())
        self.result.records_arrived = sum(self.trace.rates_per_s) * self.trace.step_s
        self.result.duration_s = self.trace.duration_s
        return self.result

    # -- memory ----------------------------------------------------------------------------------
    def _executors(self) -> int:
        return max(1, (self.config.cores or 1) // self.settings.cores_per_executor)

    def heap_use(self, t_s: float) -> tuple[float, float] | None:
        """One executor's live heap at ``t_s``, MB, and the GC time per mutator second it costs
        (``inf``: above the heap maximum, the batch fails); None when memory is not simulated."""
        if self.heap_model is None or not self.config.heap_mb:
            return None
        used = self.heap_model.used_mb(t_s, self._executors())
        usage = used / self.config.heap_mb
        return used, self.heap_model.memory.gc_ratio(usage) if usage < 1 else math.inf

    def memory_failure(self, now_s: float) -> None:
        """An OutOfMemoryError in the batch starting at ``now_s``: its records stay in the source, and
        the job restarts in a new JVM with the heap × ``oom_growth``, at the handover's cost."""
        memory = self.heap_model.memory if self.heap_model else None
        if memory is None or not self.config.heap_mb:
            raise ValueError("memory_failure: memory is not simulated")
        self.result.memory_failures += 1
        heap = grown_heap_mb(self.config.heap_mb, memory.oom_growth, self.memory_policy.memory_max_mb)
        self._apply(now_s, replace(self.config, heap_mb=heap), now_s, forced=True)

    def _in_flight(self, vid: str, now_s: float) -> float:
        """Records of ``vid`` read by a batch still running at ``now_s`` (micro-batch)."""
        return self.engine.in_flight(vid, now_s)

    def _in_flight_oldest(self, now_s: float) -> float:
        return self.engine.in_flight_oldest(now_s)

    def _restart_at(self, now_s: float) -> float:
        """A micro-batch job restarts after its batch in flight; a continuous one at once."""
        return self.engine.restart_at(now_s)


def simulate(job: SimJob, trace: Trace, settings: SimSettings, controller: Controller, start: Config,
             *, seed: int = 0) -> RunResult:
    """Run ``controller`` on ``job`` under ``trace`` from configuration ``start``."""
    return Simulation(job, trace, settings, controller, start, seed=seed).run()
