"""The micro-batch engine of the simulator (:mod:`scaling.sim.engine`): batch by batch. A batch reads
everything the sources hold; its stages run one after another on the shared cores, each as long as
its ``ceil(tasks / cores)`` waves or its slowest task (skew, a serial fraction, a straggler:
``SimVertex.pace``), after a fixed per-batch overhead; the next batch starts at the next trigger, or
at once when the batch overran it. A rescale waits for the batch in flight; the first batch after it
takes the rescale path's extra seconds (``RescaleCosts``). Each stage of each batch also gives its
busiest task's busy time by the collector's formula (``scaling.values.metrics.paced_task_busy_s``).

With memory (:mod:`scaling.sim.memory`), GC stretches each stage's task time by the heap's GC ratio
at the batch's start, and a batch that would need more heap than the maximum fails before it reads
(``Simulation.memory_failure``); each collect gives the batches' GC share and heap at peak."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from typing import TYPE_CHECKING

from scaling.sim.memory import collect_reading
from scaling.sim.model import SimJob, SimSettings, SimVertex, derive_seed
from scaling.sim.sourcelog import EPSILON_RECORDS, Accumulator
from scaling.values.metrics import paced_task_busy_s

if TYPE_CHECKING:
    from scaling.sim.engine import Config, Simulation

__all__ = ["MicroBatchEngine", "capacity_micro_batch"]

#: Per stage of a batch: (records in, records out, busy core-seconds, busiest task's paced busy seconds).
StageSums = dict[str, tuple[float, float, float, float]]
#: A batch's memory: (GC seconds, task seconds, one executor's heap used, MB; None without memory).
BatchMemory = tuple[float, float, float | None]


def capacity_micro_batch(job: SimJob, config: Config, settings: SimSettings) -> float:
    """Arrival rate (records/s) whose batches take one trigger interval with this config on average
    (stragglers at their expected cost, ``SimVertex.expected_pace``)."""
    cores = config.cores or 1
    per_record = fixed = 0.0
    for vid in job.order:
        v = job.by_id[vid]
        tasks = config.parallelism[vid]
        waves_per_task = v.expected_pace(tasks, cores)
        per_record += waves_per_task * job.unit_rates[vid] * v.curve.cost_s_per_record(tasks)
        fixed += waves_per_task * v.curve.fixed_core_s(tasks)
    room = settings.trigger_interval_s - settings.batch_overhead_s - fixed
    return max(0.0, room) / (per_record * settings.trigger_interval_s)


class MicroBatchEngine:
    """Runs ``sim`` batch by batch; calls back ``sim._sample`` and ``sim._tick`` at each collect.

    ``batches``: the batches not yet complete at the last collect, as (complete_s, oldest record's
    arrival_s, records read per source); ``last_complete``: when the newest batch completes, seconds.
    """

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.batches: deque[tuple[float, float, dict[str, float]]] = deque()
        self.last_complete: float | None = None
        self.extra_next_batch_s = 0.0

    def run(self) -> None:
        """Feed the trace, run the batches and collect, to the end of the trace."""
        sim = self.sim
        job, s, trace = sim.job, sim.settings, sim.trace
        order = job.order
        dt = trace.step_s
        end_s = len(trace.rates_per_s) * dt
        fed_s = 0.0
        next_start = 0.0
        self.batches = deque()
        completed: list[tuple[float, float, StageSums, BatchMemory]] = []
        arrived = {vid: 0.0 for vid in sim.logs}
        ticks = int(trace.duration_s // s.collect_interval_s)
        self.last_complete = 0.0

        def feed(until_s: float) -> None:
            """Records arrive at the trace's rate all through each step (as a topic fills between
            triggers), so a batch reads what arrived since the previous one, not whole steps."""
            nonlocal fed_s
            until_s = min(until_s, end_s)
            while fed_s < until_s - 1e-9:
                i = min(int(fed_s / dt + 1e-9), len(trace.rates_per_s) - 1)
                upto = min(until_s, (i + 1) * dt)
                for vid, log in sim.logs.items():
                    records = trace.rates_per_s[i] * job.by_id[vid].source_share * (upto - fed_s)
                    log.append((fed_s + upto) / 2, records)
                    arrived[vid] += records
                fed_s = upto

        for k in range(1, ticks + 1):
            tick = k * s.collect_interval_s
            while True:
                start = max(next_start, sim.down_until_s)
                if start >= tick - 1e-9:
                    break
                feed(start)
                for log in sim.logs.values():
                    log.expire(start, s.retention_s)
                read = {vid: log.total for vid, log in sim.logs.items()}
                if sum(read.values()) <= EPSILON_RECORDS:
                    next_start = start + s.trigger_interval_s
                    continue
                use = sim.heap_use(start)
                if use is not None and math.isinf(use[1]):
                    sim.memory_failure(start)
                    next_start = sim.down_until_s
                    continue
                oldest = min(log.take(read[vid]) for vid, log in sim.logs.items())
                stages, duration, memory = self._batch(order, read, start, use)
                complete = start + duration
                self.batches.append((complete, oldest, read))
                completed.append((complete, duration, stages, memory))
                self.last_complete = complete
                next_start = max(start + s.trigger_interval_s, complete)
            feed(tick)
            for log in sim.logs.values():
                log.expire(tick, s.retention_s)
            while self.batches and self.batches[0][0] <= tick:
                self.batches.popleft()
            acc, durations, completed, (gc_s, task_s, peak_mb) = _collect(order, completed, tick)
            for vid in sim.logs:
                acc[vid].arrived = arrived[vid]
                arrived[vid] = 0.0
            sim._sample(tick, acc, tuple(durations), len(durations),
                        collect_reading(gc_s, task_s, peak_mb, sim.config.heap_mb, sim._executors()))
            sim._tick(tick)
            if sim.down_until_s > next_start:
                next_start = sim.down_until_s

    def _batch(self, order: tuple[str, ...], read: Mapping[str, float], start_s: float,
               use: tuple[float, float] | None = None) -> tuple[StageSums, float, BatchMemory]:
        """Run one batch: per stage (``StageSums``), its duration, seconds, and its memory; ``use``:
        the heap used, MB, and the GC ratio (``Simulation.heap_use``) that stretch its task time."""
        sim = self.sim
        job, p, cores = sim.job, sim.config.parallelism, sim.config.cores or 1
        records: dict[str, float] = {}
        stages = {}
        wall = sim.settings.batch_overhead_s + self.extra_next_batch_s
        self.extra_next_batch_s = 0.0
        ratio = use[1] if use is not None else 0.0
        gc_s = task_s = 0.0
        for vid in order:
            v = job.by_id[vid]
            if v.source:
                n = read[vid]
            else:
                n = sum(records[u] * job.by_id[u].selectivity for u in job.inputs[vid])
            records[vid] = n
            tasks = p[vid]
            mutator = v.curve.busy_core_s(n, tasks, 1.0)
            busy = mutator * (1.0 + ratio)
            gc_s, task_s = gc_s + mutator * ratio, task_s + busy
            straggler = self._straggler(v, start_s)
            slowest = busy * v.slowest_task_share(tasks) * straggler
            wall += max(busy * v.pace(tasks, cores), slowest)
            paced = paced_task_busy_s(slowest, busy, tasks, cores) if busy > 0 else 0.0
            stages[vid] = (n, n * v.selectivity, busy, paced)
        return stages, wall, (gc_s, task_s, use[0] if use is not None else None)

    def _straggler(self, vertex: SimVertex, start_s: float) -> float:
        """The straggler factor of ``vertex`` in the batch starting at ``start_s``: a draw that
        depends on the seed, the vertex and the start only, so every policy meets the same ones."""
        if vertex.straggler_probability <= 0:
            return 1.0
        draw = derive_seed(self.sim.seed, vertex.id, "straggler", round(start_s, 3)) / 2**32
        return vertex.straggler_factor if draw < vertex.straggler_probability else 1.0

    def in_flight(self, vid: str, now_s: float) -> float:
        """Records of ``vid`` read by a batch still running at ``now_s``."""
        return sum(read.get(vid, 0.0) for complete, _, read in self.batches if complete > now_s)

    def in_flight_oldest(self, now_s: float) -> float:
        """Arrival time of the oldest record read by a batch still running at ``now_s``; ``inf`` if none."""
        return min((oldest for complete, oldest, _ in self.batches if complete > now_s), default=math.inf)

    def restart_at(self, now_s: float) -> float:
        """A micro-batch job restarts after its batch in flight."""
        return now_s if self.last_complete is None else max(now_s, self.last_complete)


Completed = list[tuple[float, float, StageSums, BatchMemory]]


def _collect(order: tuple[str, ...], completed: Completed, tick: float
             ) -> tuple[dict[str, Accumulator], list[float], Completed, BatchMemory]:
    """The sums per vertex, the durations and the memory (GC and task seconds, the highest heap
    used) of the batches complete by ``tick``, and the batches still running."""
    acc = {vid: Accumulator() for vid in order}
    durations = []
    remaining = []
    gc_s = task_s = 0.0
    peaks = []
    for complete, duration, stages, (batch_gc_s, batch_task_s, used_mb) in completed:
        if complete <= tick:
            durations.append(duration)
            gc_s, task_s = gc_s + batch_gc_s, task_s + batch_task_s
            peaks.extend([used_mb] if used_mb is not None else [])
            for vid, (rin, rout, busy, paced) in stages.items():
                a = acc[vid]
                a.records_in += rin
                a.records_out += rout
                a.busy_core_s += busy
                a.busy_max_s += paced
        else:
            remaining.append((complete, duration, stages, (batch_gc_s, batch_task_s, used_mb)))
    return acc, durations, remaining, (gc_s, task_s, max(peaks, default=None))
