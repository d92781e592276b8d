"""What the simulator simulates: capacity curves, vertices, jobs, rescale downtime and metric noise.

All values are frozen; units are in the names (``_s`` seconds, ``_per_s`` per second).
"""

from __future__ import annotations

import math
import random
import zlib
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from scaling.values.mode import Mode
from scaling.values.topology import Edge, Topology, Vertex

if TYPE_CHECKING:
    from scaling.sim.memory import SimMemory

CURVES = ("linear", "amdahl", "task-overhead")


def derive_seed(*parts: object) -> int:
    """A stable seed from names and numbers (``hash()`` of a str changes between processes)."""
    return zlib.crc32("/".join(map(str, parts)).encode())


class SimError(ValueError):
    """An invalid simulator input; the message names the field."""


@dataclass(frozen=True)
class CapacityCurve:
    """How much busy time a vertex needs for its records, as a function of its tasks.

    Attributes:
        records_per_core_s: records one task processes per busy second when it runs alone.
        kind: ``linear``: the cost per record does not depend on the tasks;
            ``amdahl``: each record costs ``1 + serial_fraction × (tasks − 1)`` times more (contention:
            a serial fraction, so capacity is ``r·p / (1 + s·(p − 1))``, Amdahl's law);
            ``task-overhead``: every task costs ``task_overhead_s`` core-seconds of fixed work per batch
            (micro-batch: scheduling, deserialization) or per second (continuous: heartbeats, state).
    """

    records_per_core_s: float
    kind: str = "linear"
    serial_fraction: float = 0.0
    task_overhead_s: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in CURVES:
            raise SimError(f"curve.kind: must be one of {', '.join(CURVES)}, got {self.kind!r}")
        if not self.records_per_core_s > 0:
            raise SimError(f"curve.records_per_core_s: must be > 0, got {self.records_per_core_s}")
        if not 0 <= self.serial_fraction < 1:
            raise SimError(f"curve.serial_fraction: must be within [0, 1), got {self.serial_fraction}")
        if self.task_overhead_s < 0:
            raise SimError(f"curve.task_overhead_s: must be >= 0, got {self.task_overhead_s}")

    def cost_s_per_record(self, tasks: int) -> float:
        """Busy core-seconds per record with ``tasks`` tasks (Amdahl: grows with the tasks)."""
        cost = 1.0 / self.records_per_core_s
        if self.kind == "amdahl":
            cost *= 1.0 + self.serial_fraction * (tasks - 1)
        return cost

    def fixed_core_s(self, tasks: int) -> float:
        """Fixed busy core-seconds per batch (micro-batch) or per second (continuous)."""
        return tasks * self.task_overhead_s if self.kind == "task-overhead" else 0.0

    def busy_core_s(self, records: float, tasks: int, periods: float = 1.0) -> float:
        """Busy core-seconds to process ``records`` with ``tasks`` tasks over ``periods`` batches or
        seconds of fixed cost."""
        return records * self.cost_s_per_record(tasks) + self.fixed_core_s(tasks) * periods

    def continuous_capacity_per_s(self, tasks: int) -> float:
        """Records/s that ``tasks`` instances, each busy all the time, process (continuous mode)."""
        free = tasks - self.fixed_core_s(tasks)
        return max(0.0, free) / self.cost_s_per_record(tasks)


@dataclass(frozen=True)
class SimVertex:
    """One vertex of a simulated job. Raises ``SimError`` for a skew or straggler factor below 1, a serial
    fraction outside [0, 1) or a straggler probability outside [0, 1]."""

    id: str
    curve: CapacityCurve
    selectivity: float = 1.0  # records emitted per record consumed (DS2's output ratio)
    parallelism: int = 1  # the starting parallelism (tasks)
    max_parallelism: int = 720
    source: bool = False
    source_share: float = 1.0  # for a source, its share of the workload's arrival rate
    partitions: int | None = None  # a source's partitions (bounds its parallelism)
    #: False pins the vertex: a stateful stage whose task count its checkpoint's state partitions fix
    #: (``parallelism``), so more cores than that cannot make it faster.
    adjustable: bool = True
    #: a source that is throttled instead of queueing (DS2's Heron spouts): records it cannot emit are never
    #: produced, so it has no backlog; its reported backlog growth is the unmet demand, so the target data
    #: rate is the configured rate (DS2 §4).
    generator: bool = False
    name: str = ""
    skew: float = 1.0  # the slowest task's busy time over the median task's (1: even tasks; a hot key, >1)
    #: whether the collector sees the slowest task (Spark's task summary); False is a skew it misses (no
    #: summary, AQE-coalesced stages): the sample's busiest task is unknown.
    skew_seen: bool = True
    #: the share of the stage's work one task does alone (Amdahl's law: the slowest task does at least
    #: ``s × work + (1 − s) × work / tasks``).
    serial_fraction: float = 0.0
    #: micro-batch: each batch, with this probability the stage's slowest task runs ``straggler_factor``
    #: times longer (a slow node, a GC pause).
    straggler_probability: float = 0.0
    straggler_factor: float = 1.0

    def __post_init__(self) -> None:
        if not self.skew >= 1.0 or not self.straggler_factor >= 1.0:
            raise SimError(f"{self.id}: skew and straggler_factor must be >= 1, got {self.skew}, "
                           f"{self.straggler_factor}")
        if not 0 <= self.serial_fraction < 1 or not 0 <= self.straggler_probability <= 1:
            raise SimError(f"{self.id}: serial_fraction must be within [0, 1) and straggler_probability within "
                           f"[0, 1], got {self.serial_fraction}, {self.straggler_probability}")

    def effective_tasks(self, tasks: int) -> float:
        """Tasks as the busiest one sees them: a source's ``partitions`` spread over ``tasks`` give
        the busiest task ``ceil(partitions / tasks)`` of them (skew), so the stage runs as fast as
        ``partitions / ceil(partitions / tasks)`` even tasks."""
        if self.partitions and self.source:
            return self.partitions / math.ceil(self.partitions / tasks)
        return float(tasks)

    def slowest_task_share(self, tasks: int) -> float:
        """The slowest task's share of the stage's busy time (no straggler): the largest of the even
        share ``1 / n`` (``n`` the effective tasks), the skewed one ``skew / n`` and Amdahl's
        ``s + (1 − s) / n``."""
        n = self.effective_tasks(tasks)
        return max(self.skew / n, self.serial_fraction + (1.0 - self.serial_fraction) / n)

    def pace(self, tasks: int, cores: int) -> float:
        """Micro-batch: the stage's wall seconds per busy core-second on ``cores`` cores, without a
        straggler: ``max(ceil(tasks / cores) / n, slowest task's share)`` (the waves of even tasks,
        or the slowest task when it is longer)."""
        return max(math.ceil(tasks / max(1, cores)) / self.effective_tasks(tasks), self.slowest_task_share(tasks))

    def expected_pace(self, tasks: int, cores: int) -> float:
        """``pace`` averaged over the straggler draws: with probability ``straggler_probability`` the
        slowest task takes ``straggler_factor`` times its share."""
        pace = self.pace(tasks, cores)
        straggling = max(pace, self.slowest_task_share(tasks) * self.straggler_factor)
        return (1.0 - self.straggler_probability) * pace + self.straggler_probability * straggling


@dataclass(frozen=True)
class SimJob:
    """A simulated job: vertices and edges. Each edge carries the full output of its upstream
    vertex (DS2's adjacency entry 1). ``memory``: its heap use and GC (``scaling.sim.memory``,
    micro-batch mode); None: memory is not simulated."""

    name: str
    vertices: tuple[SimVertex, ...]
    edges: tuple[Edge, ...] = ()
    description: str = ""
    memory: SimMemory | None = None

    def __post_init__(self) -> None:
        shares = sum(v.source_share for v in self.vertices if v.source)
        if not math.isclose(shares, 1.0, rel_tol=1e-9):
            raise SimError(f"{self.name}: source shares must add up to 1, got {shares}")
        _ = self.topology({})

    @cached_property
    def by_id(self) -> dict[str, SimVertex]:
        return {v.id: v for v in self.vertices}

    def topology(self, parallelism: dict[str, int]) -> Topology:
        """The ``scaling`` topology with the given parallelism (others at their start value)."""
        return Topology(tuple(Vertex(v.id, name=v.name or v.id, parallelism=parallelism.get(v.id, v.parallelism),
                                     max_parallelism=v.max_parallelism, partitions=v.partitions,
                                     source=v.source, adjustable=v.adjustable) for v in self.vertices),
                        self.edges)

    @cached_property
    def order(self) -> tuple[str, ...]:
        return self.topology({}).order

    @cached_property
    def inputs(self) -> dict[str, tuple[str, ...]]:
        return {vid: tuple(e.source for e in self.edges if e.target == vid) for vid in self.order}

    @cached_property
    def outputs(self) -> dict[str, tuple[str, ...]]:
        return {vid: tuple(e.target for e in self.edges if e.source == vid) for vid in self.order}

    @cached_property
    def unit_rates(self) -> dict[str, float]:
        """Records/s each vertex consumes per record/s of total arrivals (DS2 Eq. 8 on the true
        selectivities)."""
        rates: dict[str, float] = {}
        for vid in self.order:
            v = self.by_id[vid]
            if v.source:
                rates[vid] = v.source_share
            else:
                rates[vid] = sum(rates[u] * self.by_id[u].selectivity for u in self.inputs[vid])
        return rates

    @property
    def start_parallelism(self) -> dict[str, int]:
        return {v.id: v.parallelism for v in self.vertices}


@dataclass(frozen=True)
class Downtime:
    """Downtime of one rescale: ``fixed_s``, or when ``spread`` > 0 a log-normal draw with median
    ``fixed_s`` and shape ``spread`` (seconds)."""

    fixed_s: float = 15.0
    spread: float = 0.0

    def draw(self, rng: random.Random) -> float:
        if self.spread <= 0:
            return self.fixed_s
        return self.fixed_s * math.exp(rng.gauss(0.0, self.spread))


@dataclass(frozen=True)
class RescaleCosts:
    """What a micro-batch rescale costs beyond ``SimSettings.downtime`` (the pause of a restart with new
    partitions): the extra seconds of the first batch after each path (a cold query, driver or executor), and
    the executors-only paths. Defaults: free; ``RUNNER_COSTS`` has the runner's."""

    partitions_first_batch_s: float = 0.0  # an in-process restart with new partitions
    #: executors added or removed on a running application (dynamic allocation on a cluster, SPARK-12133's
    #: path): its pause (none) and first batch's extra seconds.
    executors_in_place_s: float = 0.0
    executors_in_place_first_batch_s: float = 0.0
    #: a warm driver handover that changes the cores (local mode): its pause and extra seconds.
    handover: Downtime = field(default_factory=lambda: Downtime(0.0))
    handover_first_batch_s: float = 0.0
    #: whether an executors-only change takes the in-place path (True) or the handover (False).
    executors_move_in_place: bool = True


RUNNER_PAUSE = Downtime(1.17, 0.1)
"""The runner's in-process restart with new partitions: 1.17 s pause (README, ``python -m sparkclient
bench-rescale --runs 5``, median)."""

RUNNER_COSTS = RescaleCosts(partitions_first_batch_s=0.59, executors_in_place_first_batch_s=1.14,
                            handover=Downtime(1.48, 0.1), handover_first_batch_s=3.33)
"""The runner's paths (README, ``bench-rescale``, medians of 5 runs): the first batch's extra seconds
are the measured added lag minus the pause (in-process 1.76 − 1.17; executors in place 1.14 − 0; warm
handover 4.81 − 1.48, its pause 1.48 s)."""


@dataclass(frozen=True)
class Noise:
    """Multiplicative noise on reported metrics: each sample's records and busy time are multiplied
    by ``1 + N(0, relative)`` (clipped at 0). The simulated truth is not noisy."""

    relative: float = 0.0

    def factor(self, rng: random.Random) -> float:
        if self.relative <= 0:
            return 1.0
        return max(0.0, 1.0 + rng.gauss(0.0, self.relative))


@dataclass(frozen=True)
class SimSettings:
    """How a run is simulated and when the autoscaler looks; durations in seconds. Raises ``SimError`` for an
    unknown mode, or a step, collect, policy, window or trigger interval that is not > 0."""

    mode: Mode = Mode.MICRO_BATCH  # or ``Mode.CONTINUOUS``
    step_s: float = 5.0  # time step of the continuous simulation and of the arrival trace
    collect_interval_s: float = 30.0  # one metric sample per this many seconds (the collector's beat)
    policy_interval_s: float = 60.0  # the autoscaler evaluates this often ...
    #: ... over this many seconds of samples, all taken since the running configuration started (FLIP-271
    #: ``metrics.window``; the window restarts after a rescale).
    metric_window_s: float = 120.0
    #: samples are taken only this long after the configuration started (FLIP-271 ``stabilization.interval``),
    #: so buffers filling after a restart do not distort the rates.
    stabilization_s: float = 30.0
    retention_s: float = 3600.0  # the source log keeps records this long; older unread records are lost
    #: continuous mode: a vertex's input buffer holds this many steps of its capacity (full buffers
    #: backpressure the upstream vertex).
    buffer_steps: float = 2.0
    trigger_interval_s: float = 10.0  # micro-batch: the processing-time trigger
    batch_overhead_s: float = 0.5  # micro-batch: each batch's seconds outside tasks (planning, offsets, commit)
    cores_per_executor: int = 1  # micro-batch cluster: cores_per_executor, min, max and starting executors
    min_executors: int = 1
    max_executors: int = 64
    executors: int = 4
    #: a restart's pause (continuous: a Flink restart; micro-batch: new partitions).
    downtime: Downtime = field(default_factory=Downtime)
    noise: Noise = field(default_factory=Noise)
    #: the metric window keeps only the samples after a load change inside it
    #: (``MetricWindow.aggregate(after_change=True)``), for every controller alike.
    detect_change: bool = True
    rescale_costs: RescaleCosts = field(default_factory=RescaleCosts)  # micro-batch: the runner's other paths
    #: caps each sample's busy time at 1000 ms/s per task, as production does NOT (a batch longer than the
    #: collect reports all its busy time at its end); only to compare with a simulator that caps it.
    busy_cap: bool = False

    def __post_init__(self) -> None:
        if self.mode not in (Mode.CONTINUOUS, Mode.MICRO_BATCH):
            raise SimError(f"mode: must be continuous or micro-batch, got {self.mode!r}")
        for name in ("step_s", "collect_interval_s", "policy_interval_s", "metric_window_s", "trigger_interval_s"):
            if not getattr(self, name) > 0:
                raise SimError(f"{name}: must be > 0, got {getattr(self, name)}")
