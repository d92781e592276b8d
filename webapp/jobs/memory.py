"""A job's memory over its metric window: whether it is under memory pressure and the recommended heap
size, from the stored snapshots and the job's policy (the formulas: ``scaling.planner.memory``). The evaluation
gates its plan and decides on the heap with :func:`window_memory` and :func:`heap_decision`; the job
page and the API show :func:`job_memory`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from scaling.planner.memory import (
    memory_decision,
    memory_pressure,
    recommend_heap,
    recommend_overhead,
    recommend_state_memory,
)
from scaling.values.memory import MB, HeapRecommendation, MemoryDecision, MemoryReading, Pressure
from scaling.values.plan import JobPlan
from scaling.values.reasons import MemoryKind, Reason
from sparkclient.contract.binding import ROCKSDB_PROVIDER
from sparkclient.contract.spec import Knob, KnobTarget
from webapp.jobs.bindings import published_plan
from webapp.jobs.models import Job, MetricSnapshot
from webapp.jobs.selectors import snapshots_in_window

__all__ = ["KIND_TARGETS", "JobMemory", "executors_after", "heap_decision", "job_memory", "knob_of_kind", "memory_knob",
           "size_decisions", "window_memory", "window_pressure"]

#: The pipeline knob target of each memory kind.
KIND_TARGETS = {MemoryKind.HEAP: KnobTarget.MEMORY, MemoryKind.OVERHEAD: KnobTarget.MEMORY_OVERHEAD,
                MemoryKind.STATE: KnobTarget.STATE_MEMORY}


def _reading(snapshot: MetricSnapshot) -> MemoryReading:
    return MemoryReading(snapshot.gc_share, snapshot.heap_peak_bytes, snapshot.heap_max_bytes)


def window_pressure(*, job: Job, snapshots: Sequence[MetricSnapshot]) -> Pressure | None:
    """The memory pressure of ``snapshots`` (oldest first) under the job's thresholds
    (``memory_gc_pressure_threshold``, ``memory_heap_usage_threshold``), or None."""
    policy = job.policy
    return memory_pressure([_reading(s) for s in snapshots], gc_threshold=policy.memory_gc_pressure_threshold,
                           heap_threshold=policy.memory_heap_usage_threshold)


@dataclass(frozen=True)
class JobMemory:
    """What the job page and the API show of a job's memory over its metric window.

    ``gc_share``: the newest measured GC share of task time; ``heap_peak_mb`` / ``heap_max_mb``: the
    window's highest heap at peak and the heap maximum, MB; ``pressure``: the gate's finding, or None;
    ``recommendation``: the heap recommended when it differs from the running one and it either
    saves memory or answers the pressure (None otherwise); ``apply``: the job's ``memory_apply``
    (off: recommend-only, nothing restarts for it); ``state_mb``: the state stores' memory of each
    JVM at its peak in the window; ``nonheap_peak_mb``: the highest an executor used beyond its heap;
    ``sizes``: the recommendations for the other memories the pipeline has a knob for (the
    executors' overhead on a cluster, the RocksDB state memory), each when it differs from the
    running value."""

    gc_share: float | None
    heap_peak_mb: float | None
    heap_max_mb: float | None
    pressure: Pressure | None
    recommendation: HeapRecommendation | None
    apply: bool
    state_mb: float | None = None
    nonheap_peak_mb: float | None = None
    sizes: tuple[HeapRecommendation, ...] = ()

    @property
    def heap_usage(self) -> float | None:
        if self.heap_peak_mb is None or not self.heap_max_mb:
            return None
        return self.heap_peak_mb / self.heap_max_mb

    @property
    def pressure_reason(self) -> Reason | None:
        """The ``memory-pressure`` reason (code and figures), or None."""
        return self.pressure.reason() if self.pressure else None

    def to_json(self) -> dict:
        """The API's form: shares 0..1, sizes MB; the pressure's reason as a code with data."""
        return {"gc_share": self.gc_share, "heap_peak_mb": self.heap_peak_mb, "heap_max_mb": self.heap_max_mb,
                "heap_usage": self.heap_usage,
                "pressure": self.pressure_reason.to_json() if self.pressure_reason else None,
                "recommendation": self.recommendation.to_json() if self.recommendation else None,
                "apply": self.apply, "state_mb": self.state_mb, "nonheap_peak_mb": self.nonheap_peak_mb,
                "sizes": [size.to_json() for size in self.sizes]}


def job_memory(*, job: Job, now: datetime | None = None) -> JobMemory | None:
    """The memory of ``job`` over its metric window (``metric_window_s``), or None when no snapshot
    in it measured any."""
    return window_memory(job=job, snapshots=snapshots_in_window(job=job, window_s=job.policy.metric_window_s,
                                                                now=now))


def window_memory(*, job: Job, snapshots: Sequence[MetricSnapshot]) -> JobMemory | None:
    """The memory of ``job`` over ``snapshots`` (oldest first), or None when none of them measured any."""
    snapshots = [s for s in snapshots if s.gc_share is not None or s.heap_peak_bytes is not None
                 or s.state_memory_bytes is not None or s.nonheap_peak_bytes is not None]
    if not snapshots:
        return None
    policy = job.policy
    shares = [s.gc_share for s in snapshots if s.gc_share is not None]
    sized = [s for s in snapshots if s.heap_peak_bytes and s.heap_max_bytes]  # a 0 peak was not measured
    peak = max(sized, key=lambda s: s.heap_peak_bytes or 0, default=None)
    pressure = window_pressure(job=job, snapshots=snapshots)
    recommendation = None
    if peak is not None:
        heap = recommend_heap(peak_bytes=peak.heap_peak_bytes or 0, max_bytes=peak.heap_max_bytes or 0,
                              overhead=policy.memory_tuning_overhead, min_mb=policy.memory_min_mb,
                              max_mb=policy.memory_max_mb, executors=max(1, peak.executors),
                              pressure_growth=policy.memory_pressure_growth if pressure is not None else None)
        if heap.changes and (heap.recommended_mb < heap.current_mb or pressure is not None):
            recommendation = heap
    state = [s.state_memory_bytes / (1 if job.local_mode else max(1, s.executors))
             for s in snapshots if s.state_memory_bytes is not None]
    nonheap = [s.nonheap_peak_bytes for s in snapshots if s.nonheap_peak_bytes is not None]
    state_bytes = round(max(state)) if state else None
    nonheap_bytes = max(nonheap) if nonheap else None
    return JobMemory(gc_share=shares[-1] if shares else None,
                     heap_peak_mb=peak.heap_peak_bytes / MB if peak else None,
                     heap_max_mb=peak.heap_max_bytes / MB if peak else None,
                     pressure=pressure, recommendation=recommendation, apply=policy.memory_apply,
                     state_mb=None if state_bytes is None else state_bytes / MB,
                     nonheap_peak_mb=None if nonheap_bytes is None else nonheap_bytes / MB,
                     sizes=_sizes(job, state_bytes, nonheap_bytes, executors=max(1, snapshots[-1].executors)))


def _running_mb(job: Job, kind: MemoryKind) -> tuple[Knob, int] | None:
    """The knob of ``kind`` and its running value, MB; None without the knob or a value of it."""
    knob = knob_of_kind(job, kind)
    value = (job.config or {}).get(knob.name) if knob is not None else None
    if knob is None or not isinstance(value, int) or isinstance(value, bool):
        return None
    return knob, value


def _sizes(job: Job, state_bytes: int | None, nonheap_bytes: int | None, *,
           executors: int) -> tuple[HeapRecommendation, ...]:
    """The recommendations of the non-heap memories ``job`` has a knob for, each when it changes the
    running value: the state memory from the state stores' use of one JVM (``state_bytes``), the
    overhead (a cluster only) from an executor's non-heap peak and the state memory it may hold."""
    overhead, out = job.policy.memory_tuning_overhead, []
    state = _running_mb(job, MemoryKind.STATE)
    if state is not None and state_bytes is not None and not _state_off_rocksdb(job):
        knob, bound = state
        size = recommend_state_memory(used_bytes=state_bytes, bound_mb=bound, overhead=overhead, min_mb=knob.min,
                                      max_mb=knob.max, growth=job.policy.memory_pressure_growth, executors=executors)
        if size is not None:
            out.append(size)
    running = _running_mb(job, MemoryKind.OVERHEAD)
    if running is not None and nonheap_bytes is not None and not job.local_mode:
        knob, current = running
        held = state[1] * MB if state is not None else (state_bytes or 0)
        size = recommend_overhead(nonheap_peak_bytes=nonheap_bytes, state_bytes=held, current_mb=current,
                                  overhead=overhead, min_mb=knob.min, max_mb=knob.max, executors=executors)
        if size.changes:
            out.append(size)
    return tuple(out)


def _state_off_rocksdb(job: Job) -> bool:
    """Whether the runner's plan names a state store other than RocksDB's for a stateful stage: the
    state memory knob sets RocksDB's bound only, so nothing is recommended for it then (the store is
    named once the checkpoint holds state; unnamed, the knob is taken at its word)."""
    stores = {stage.state_store for stage in published_plan(job=job) or () if stage.state_store}
    return bool(stores - {ROCKSDB_PROVIDER})


def knob_of_kind(job: Job, kind: MemoryKind) -> Knob | None:
    """The knob of ``job`` that sets the memory of ``kind`` (:data:`KIND_TARGETS`), or None."""
    return next((k for k in job.knob_specs() if k.sets == KIND_TARGETS[kind]), None)


def memory_knob(job: Job) -> Knob | None:
    """The knob of ``job`` that sets the heap (``KnobTarget.MEMORY``), or None when it declares none."""
    return knob_of_kind(job, MemoryKind.HEAP)


def executors_after(job: Job, plan: JobPlan | None) -> int | None:
    """The executors ``plan`` runs ``job`` on when it changes their number on a cluster, for
    :meth:`scaling.planner.memory.HeapRecommendation.on_executors`; None otherwise (no plan, no change, or
    local mode, where one JVM runs every task whatever the cores)."""
    if plan is None or job.local_mode or plan.executors_proposed is None \
            or plan.executors_proposed == plan.executors_current:
        return None
    return plan.executors_proposed


def heap_decision(*, job: Job, memory: JobMemory | None, ready: bool = True, other_changes: bool = False,
                  requested: bool = False, executors_after: int | None = None) -> MemoryDecision | None:
    """What a plan of ``job`` does with the heap recommendation of ``memory`` (``scaling.planner.memory.memory_decision``
    with the job's memory knob, its running value and bounds, its ``memory_apply``, and
    ``guard_max_change_factor`` as the most a heap riding along may move; ``executors_after``: the
    executors a plan runs on when it changes them on a cluster); None without a recommendation."""
    if memory is None or memory.recommendation is None:
        return None
    return _decision(job, memory, memory.recommendation, ready=ready, other_changes=other_changes,
                     requested=requested, executors_after=executors_after)


def size_decisions(*, job: Job, memory: JobMemory | None, ready: bool = True, other_changes: bool = False,
                   requested: bool = False) -> tuple[MemoryDecision, ...]:
    """What a plan of ``job`` does with each recommendation of ``memory.sizes`` (as
    :func:`heap_decision`, on the knob of its kind; never alone: the pressure is the heap's); none
    for a kind whose knob is not running."""
    if memory is None:
        return ()
    decisions = (_decision(job, memory, size, ready=ready, other_changes=other_changes, requested=requested)
                 for size in memory.sizes)
    return tuple(d for d in decisions if d.knob is not None)


def _decision(job: Job, memory: JobMemory, size: HeapRecommendation, *, ready: bool, other_changes: bool,
              requested: bool, executors_after: int | None = None) -> MemoryDecision:
    running = _running_mb(job, size.kind)  # None: no knob, or no value of it running: recommend-only
    knob, value = running if running is not None else (None, None)
    return memory_decision(size, knob=knob.name if knob else None, current_mb=value,
                           bounds=(knob.min, knob.max) if knob else (1, 1), apply=memory.apply,
                           under_pressure=memory.pressure is not None, ready=ready, other_changes=other_changes,
                           requested=requested, along_factor=job.policy.guard_max_change_factor,
                           executors_after=executors_after)
