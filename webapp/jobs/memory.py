"""A job's memory inputs from its stored snapshots and its knobs (``scaling.values.memory.MemoryInputs``),
and its window's memory as the pages and the API show it (``scaling.planner.memory.window_memory``, the
one definition the decision reads too)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from scaling.planner.memory import window_memory
from scaling.policy.memory import MEMORY_OPTIONS, MemoryPolicy
from scaling.values.memory import MemoryInputs, MemoryKnob, MemoryReading, SizingWindow, WindowMemory
from scaling.values.reasons import MemoryKind
from sparkclient.contract.binding import ROCKSDB_PROVIDER, PlanStage
from sparkclient.contract.spec import Knob, KnobTarget
from webapp.jobs.bindings import published_plan
from webapp.jobs.models import Job, MetricSnapshot
from webapp.jobs.selectors import snapshots_in_window
from webapp.jobs.window import window_sizing

__all__ = ["KIND_TARGETS", "job_memory", "knob_of_kind", "memory_inputs", "memory_knob", "window_memory_inputs"]

#: The pipeline knob target of each memory kind.
KIND_TARGETS = {MemoryKind.HEAP: KnobTarget.MEMORY, MemoryKind.OVERHEAD: KnobTarget.MEMORY_OVERHEAD,
                MemoryKind.STATE: KnobTarget.STATE_MEMORY}


def _reading(snapshot: MetricSnapshot, *, local_mode: bool) -> MemoryReading:
    """A snapshot's memory; the state stores' memory of the query shared over its JVMs (one in local mode)."""
    executors = max(1, snapshot.executors)
    state = snapshot.state_memory_bytes
    return MemoryReading(snapshot.gc_share, snapshot.heap_peak_bytes, snapshot.heap_max_bytes, executors=executors,
                         state_bytes=None if state is None else round(state / (1 if local_mode else executors)),
                         nonheap_peak_bytes=snapshot.nonheap_peak_bytes)


def _knobs(job: Job) -> tuple[MemoryKnob, ...]:
    """The job's memory knobs that run with a value (MB); a knob without one is recommend-only."""
    knobs = []
    for kind in KIND_TARGETS:
        knob = knob_of_kind(job, kind)
        value = (job.config or {}).get(knob.name) if knob is not None else None
        if knob is not None and isinstance(value, int) and not isinstance(value, bool):
            knobs.append(MemoryKnob(kind, knob.name, value, knob.min, knob.max))
    return tuple(knobs)


def _state_in_rocksdb(stages: Sequence[PlanStage]) -> bool:
    """False when the runner's plan names a state store other than RocksDB's for a stateful stage (the
    store is named once the checkpoint holds state; unnamed, the knob is taken at its word)."""
    stores = {stage.state_store for stage in stages if stage.state_store}
    return not (stores - {ROCKSDB_PROVIDER})


def memory_inputs(*, job: Job, snapshots: Sequence[MetricSnapshot], stages: Sequence[PlanStage] | None = None,
                  sizing: SizingWindow | None = None) -> MemoryInputs:
    """The memory part of a decision on ``snapshots`` (oldest first): their readings, the job's memory
    options (``scaling.policy.memory.MemoryPolicy``) and memory knobs, local mode, the state store of
    the runner's plan ``stages`` (default: the published plan, read here) and the window's load
    ``sizing`` (None: the one door sets it from its request)."""
    policy = job.policy
    stages = published_plan(job=job) or () if stages is None else stages
    return MemoryInputs(readings=tuple(_reading(s, local_mode=job.local_mode) for s in snapshots),
                        policy=MemoryPolicy(**{name: getattr(policy, name) for name in MEMORY_OPTIONS}),
                        knobs=_knobs(job), local_mode=job.local_mode, state_in_rocksdb=_state_in_rocksdb(stages),
                        sizing=sizing)


def window_memory_inputs(*, job: Job, now: datetime | None = None) -> MemoryInputs:
    """:func:`memory_inputs` of the metric window of ``job`` (``metric_window_s`` up to ``now``) with its
    load (``webapp.jobs.window.window_sizing``): what the pages, the API and a person's request read."""
    snapshots = snapshots_in_window(job=job, window_s=job.policy.metric_window_s, now=now)
    return memory_inputs(job=job, snapshots=snapshots, sizing=window_sizing(job=job, snapshots=snapshots))


def job_memory(*, job: Job, now: datetime | None = None) -> WindowMemory | None:
    """The memory of ``job`` over its metric window (``metric_window_s``), or None when no snapshot
    in it measured any (``scaling.planner.memory.window_memory`` of :func:`window_memory_inputs`)."""
    return window_memory(window_memory_inputs(job=job, now=now))


def knob_of_kind(job: Job, kind: MemoryKind) -> Knob | None:
    """The knob of ``job`` that sets the memory of ``kind`` (:data:`KIND_TARGETS`), or None."""
    return next((k for k in job.knob_specs() if k.sets == KIND_TARGETS[kind]), None)


def memory_knob(job: Job) -> Knob | None:
    """The knob of ``job`` that sets the heap (``KnobTarget.MEMORY``), or None when it declares none."""
    return knob_of_kind(job, MemoryKind.HEAP)
