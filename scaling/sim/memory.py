"""Memory in the simulator: each executor's heap use (MB), the GC share it costs, the batch that fails
above the heap maximum, and the memory oracles' MB-seconds (docs/ARCHITECTURE.md, "The simulator's
memory model": its formulas and their sources)."""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate

from scaling.planner.memory import gc_share
from scaling.policy.memory import MemoryPolicy
from scaling.policy.options import default
from scaling.sim.model import SimError
from scaling.sim.workloads import Trace
from scaling.values.memory import GRANULARITY_MB, MB, MemoryReading

__all__ = ["HeapModel", "SimMemory", "collect_reading", "grown_heap_mb", "interval_oracle_mb_s",
           "rule_oracle_mb_s"]


@dataclass(frozen=True)
class SimMemory:
    """A job's memory (module docstring). Sizes MB, times seconds; ``start_heap_mb`` is the heap
    (``spark.executor.memory``) every policy starts with."""

    start_heap_mb: int
    base_mb: float = 350.0
    task_working_set_mb: float = 150.0
    state_mb_per_record: float = 0.0
    state_retention_s: float = 600.0
    max_state_mb: float = math.inf
    gc_cost: float = 0.05
    gc_onset: float = 0.5
    oom_growth: float = float(default("memory_pressure_growth"))

    def __post_init__(self) -> None:
        if self.start_heap_mb <= 0 or self.base_mb < 0 or self.task_working_set_mb < 0 or self.state_mb_per_record < 0:
            raise SimError(f"memory: sizes must be >= 0 and the heap > 0, got {self}")
        if self.state_retention_s <= 0 or not 0 <= self.gc_onset < 1 or self.gc_cost < 0 or self.oom_growth <= 1:
            raise SimError(f"memory: retention > 0, gc_onset in [0, 1), gc_cost >= 0, oom_growth > 1, got {self}")

    def gc_ratio(self, usage: float) -> float:
        """GC time / mutator time at heap usage ``usage`` (< 1)."""
        return self.gc_cost * max(0.0, usage - self.gc_onset) / (1.0 - usage)


class HeapModel:
    """``memory`` over ``trace``: the state and each executor's heap use at any time (module docstring)."""

    def __init__(self, memory: SimMemory, trace: Trace, cores_per_executor: int) -> None:
        self.memory, self.trace, self.cores_per_executor = memory, trace, cores_per_executor
        self._arrived = [0.0, *accumulate(rate * trace.step_s for rate in trace.rates_per_s)]

    def _arrived_by(self, t_s: float) -> float:
        steps = max(0.0, min(t_s / self.trace.step_s, len(self.trace.rates_per_s)))
        whole = int(steps)
        partial = self._arrived[whole + 1] - self._arrived[whole] if whole < len(self.trace.rates_per_s) else 0.0
        return self._arrived[whole] + partial * (steps - whole)

    def state_mb(self, t_s: float) -> float:
        """The whole state at ``t_s``, MB."""
        m = self.memory
        retained = self._arrived_by(t_s) - self._arrived_by(t_s - m.state_retention_s)
        return min(m.max_state_mb, m.state_mb_per_record * retained)

    def used_mb(self, t_s: float, executors: int) -> float:
        """One executor's live heap at ``t_s`` with ``executors`` executors, MB."""
        m = self.memory
        return m.base_mb + m.task_working_set_mb * self.cores_per_executor + self.state_mb(t_s) / max(1, executors)

    def smallest_calm_heap_mb(self, used_mb: float, policy: MemoryPolicy) -> int:
        """The smallest heap (a multiple of ``GRANULARITY_MB``, at least ``memory_min_mb``) at which
        ``used_mb`` is not under memory pressure at ``policy``'s thresholds: GC share at most
        ``memory_gc_pressure_threshold``, usage at most ``memory_heap_usage_threshold`` and below 1
        (the oracle's heap, known from the model)."""
        heap = max(policy.memory_min_mb, math.ceil(used_mb / GRANULARITY_MB) * GRANULARITY_MB)
        while True:
            usage = used_mb / heap
            ratio = self.memory.gc_ratio(usage) if usage < 1 else math.inf
            if usage < 1 and usage <= policy.memory_heap_usage_threshold \
                    and ratio / (1 + ratio) <= policy.memory_gc_pressure_threshold:
                return heap
            heap += GRANULARITY_MB


def grown_heap_mb(heap_mb: int, growth: float, max_mb: int) -> int:
    """The heap after an OutOfMemoryError: ``heap × growth`` rounded up to ``GRANULARITY_MB``, at most
    ``max_mb`` (and at least one step more)."""
    return min(max_mb, max(heap_mb + GRANULARITY_MB, math.ceil(heap_mb * growth / GRANULARITY_MB) * GRANULARITY_MB))


def interval_oracle_mb_s(t_s: Sequence[float], executors: Sequence[int], needed_mb: Sequence[int],
                         interval_s: float, tick_s: float, start_heap_mb: int) -> tuple[float, float]:
    """The memory oracle's MB-seconds over a run's ticks (``executors`` and ``needed_mb``, the
    smallest calm heap, per tick): per policy interval the largest heap its ticks need (a heap that
    never enters pressure in it), and over the whole run the one heap that never does. Like every
    controller it starts with ``start_heap_mb`` and changes the heap at a policy tick, so the first
    interval runs at least that. Returns ``(per interval, whole run)``, MB·s; both on the run's own
    executors."""
    if not t_s:
        return 0.0, 0.0
    starts = [k * interval_s for k in range(int(t_s[-1] // interval_s) + 2)]
    worst: dict[int, int] = {0: start_heap_mb}
    for t, need in zip(t_s, needed_mb):
        k = bisect.bisect_left(starts, t) - 1
        worst[k] = max(worst.get(k, 0), need)
    intervals = [bisect.bisect_left(starts, t) - 1 for t in t_s]
    one_heap = max(needed_mb)
    per_interval = sum(n * worst[k] * tick_s for k, n in zip(intervals, executors))
    whole = sum(n * (worst[0] if k == 0 else one_heap) * tick_s for k, n in zip(intervals, executors))
    return per_interval, whole


def rule_oracle_mb_s(t_s: Sequence[float], executors: Sequence[int], needed_mb: Sequence[int],
                     restarts_at_s: Sequence[float], tick_s: float, start_heap_mb: int) -> float:
    """The MB-seconds of the memory oracle that keeps production's rule (``scaling.planner.memory.memory_decision``:
    the heap changes on its own only under pressure, else with a restart that happens anyway), with
    hindsight on a run's own ticks, executors and ``restarts_at_s`` (its restarts that change more
    than the heap, seconds). From the start the heap stays ``start_heap_mb`` until a tick needs more
    (the pressure), then it is the largest need left before the first restart; after each restart,
    the largest need until the next. MB·s."""
    segments: dict[int, list[int]] = {}
    for i, t in enumerate(t_s):
        segments.setdefault(bisect.bisect_left(restarts_at_s, t), []).append(i)
    total = 0.0
    for k, ticks in segments.items():
        first = next((n for n, i in enumerate(ticks) if needed_mb[i] > start_heap_mb), len(ticks)) if k == 0 else 0
        rest = max((needed_mb[i] for i in ticks[first:]), default=start_heap_mb)
        total += sum(executors[i] * (start_heap_mb if n < first else rest) * tick_s for n, i in enumerate(ticks))
    return total


def collect_reading(gc_s: float, task_s: float, peak_mb: float | None, heap_mb: int | None,
                    executors: int = 1) -> MemoryReading | None:
    """One collect's ``MemoryReading`` as the collector makes it: production's ``gc_share`` of the
    GC and task seconds, the heap at peak (capped by the maximum, as a JVM's is), the maximum and the
    ``executors`` it ran on; None without a heap."""
    if not heap_mb:
        return None
    peak = None if peak_mb is None else round(min(peak_mb, heap_mb) * MB)
    return MemoryReading(gc_share(gc_s * 1000.0, task_s * 1000.0), peak, heap_mb * MB, executors=executors)
