"""Memory as the model sees it: the window's readings, the pressure found in them, a recommended size
and what a plan does with it (the formulas and the rule: ``scaling.planner.memory``). Sizes are MB
(2^20 bytes, Spark's ``m`` suffix), shares 0..1."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from enum import StrEnum

from scaling.policy.memory import MemoryPolicy
from scaling.values.readiness import SampleIssue
from scaling.values.reasons import MemoryKind, MemoryStep, PlanReason, Reason

MB = 1024 * 1024
#: Recommended heaps are whole multiples of this, MB.
GRANULARITY_MB = 64


def heap_usage(peak: float | None, maximum: float | None) -> float | None:
    """Heap used at its peak / the heap maximum (both in one unit; a share, above 1 when the peak is
    overstated); None when either is unknown or the maximum is 0."""
    if peak is None or not maximum:
        return None
    return peak / maximum


class PressureSignal(StrEnum):
    """Which threshold a job under memory pressure is above."""

    GC = "gc"       # the GC share of task time
    HEAP = "heap"   # heap used at its peak / heap maximum


@dataclass(frozen=True)
class MemoryReading:
    """One sample's memory: GC share of task time (0..1); heap at peak and heap maximum of the JVM
    closest to its maximum, bytes; ``executors``, the JVMs that ran tasks; ``state_bytes``, the state
    stores' memory of one JVM; ``nonheap_peak_bytes``, the most a JVM used beyond its heap. Each None
    when not measured."""

    gc_share: float | None
    heap_peak_bytes: int | None
    heap_max_bytes: int | None
    executors: int = 1
    state_bytes: int | None = None
    nonheap_peak_bytes: int | None = None

    @property
    def measured(self) -> bool:
        """Whether the sample measured any memory figure."""
        return any(x is not None for x in (self.gc_share, self.heap_peak_bytes, self.state_bytes,
                                            self.nonheap_peak_bytes))

    @property
    def heap_usage(self) -> float | None:
        """:func:`heap_usage` of the reading."""
        return heap_usage(self.heap_peak_bytes, self.heap_max_bytes)


@dataclass(frozen=True)
class Pressure:
    """A job under memory pressure: the signals above their thresholds and the figures.

    ``gc_share``: the newest window's GC share; ``heap_usage``: the mean over the windows;
    ``heap_peak_mb`` / ``heap_max_mb``: the highest peak of the windows and its heap maximum."""

    signals: tuple[PressureSignal, ...]
    gc_share: float | None
    gc_threshold: float
    heap_usage: float | None
    heap_threshold: float
    heap_peak_mb: float | None
    heap_max_mb: float | None

    def reason(self) -> Reason:
        """``memory-pressure`` with the figures (``scaling.words.reason_text`` renders it)."""
        return Reason(PlanReason.MEMORY_PRESSURE, None, {
            "signal": ",".join(str(s) for s in self.signals), "gc_share": self.gc_share,
            "gc_threshold": self.gc_threshold, "heap_usage": self.heap_usage, "heap_threshold": self.heap_threshold,
            "heap_peak_mb": self.heap_peak_mb, "heap_max_mb": self.heap_max_mb})


@dataclass(frozen=True)
class HeapRecommendation:
    """A memory size for each executor (in local mode, the driver), of ``kind`` (the heap unless said).

    ``current_mb``: the size it runs with; ``recommended_mb``: the size recommended; ``peak_mb``:
    the use at its peak it is sized from; ``executors``: how many JVMs run with it."""

    current_mb: int
    recommended_mb: int
    peak_mb: float
    overhead: float
    executors: int = 1
    kind: MemoryKind = MemoryKind.HEAP

    @property
    def saves_mb(self) -> int:
        """Heap freed over every executor, MB (negative: the heap grows)."""
        return (self.current_mb - self.recommended_mb) * self.executors

    @property
    def changes(self) -> bool:
        """Whether the recommendation differs from the running size."""
        return self.recommended_mb != self.current_mb

    def on_executors(self, executors: int) -> HeapRecommendation:
        """The recommendation for the job run on ``executors`` JVMs instead: with fewer, each holds a
        larger share of the data (state, cached and shuffled blocks), so the peak is scaled by
        ``self.executors / executors`` (an upper bound: all heap use follows the data); with more, the
        peak stays (the JVM's own use does not shrink). Never below the recommendation as it was."""
        if executors < 1:
            raise ValueError(f"on_executors: {executors} executors")
        if executors >= self.executors or self.kind is not MemoryKind.HEAP:
            return replace(self, executors=executors)
        peak_mb = self.peak_mb * self.executors / executors
        wanted = math.ceil(peak_mb * (1 + self.overhead) / GRANULARITY_MB) * GRANULARITY_MB
        return replace(self, peak_mb=peak_mb, recommended_mb=max(self.recommended_mb, wanted), executors=executors)

    def to_json(self) -> dict:
        return {"kind": str(self.kind), "current_mb": self.current_mb, "recommended_mb": self.recommended_mb,
                "peak_mb": self.peak_mb, "overhead": self.overhead, "executors": self.executors,
                "saves_mb": self.saves_mb}


#: The steps whose plan changes the heap.
APPLIED = frozenset({MemoryStep.ALONE, MemoryStep.ALONG, MemoryStep.REQUESTED})


@dataclass(frozen=True)
class MemoryDecision:
    """What a plan does with a heap recommendation: ``step``; ``knob`` the memory knob and its value
    ``current_mb`` now and ``proposed_mb`` after (MB; equal when the plan leaves it; all three None
    without a memory knob); ``target_mb`` the recommendation within the knob's bounds."""

    step: MemoryStep
    heap: HeapRecommendation
    under_pressure: bool
    knob: str | None = None
    current_mb: int | None = None
    target_mb: int | None = None

    @property
    def proposed_mb(self) -> int | None:
        return self.target_mb if self.step in APPLIED else self.current_mb

    @property
    def changes(self) -> bool:
        return self.proposed_mb != self.current_mb

    def reason(self) -> Reason:
        """``memory-resize`` with the figures (``scaling.words.reason_text`` renders it): ``saves_mb`` over
        every executor (negative: the heap grows), ``under_pressure`` 1 or 0 (a reason's data holds no booleans)."""
        saves = ((self.current_mb or 0) - (self.target_mb or 0)) * self.heap.executors
        return Reason(PlanReason.MEMORY_RESIZE, None, {
            "knob": self.knob, "current_mb": self.current_mb, "recommended_mb": self.target_mb,
            "peak_mb": round(self.heap.peak_mb, 1), "saves_mb": saves, "under_pressure": int(self.under_pressure),
            "step": str(self.step), "kind": str(self.heap.kind)})


class Withheld(StrEnum):
    """Why a window's memory is not right-sized (``memory-withheld``'s ``cause``); its data in the comment."""

    NO_BATCH = "no-batch"                # the current run completed no micro-batch in the window (batches: 0)
    NOT_READY = "not-ready"              # code (the first sample's NotReady), samples (not ready)
    NOT_KEEPING_UP = "not-keeping-up"    # backlog_growth_per_s, noise_per_s (records/s)


@dataclass(frozen=True)
class SizingWindow:
    """What a window says of the load its memory was measured under (``scaling.planner.memory.
    sizing_withheld`` reads it): ``batches``, the micro-batches the current run completed in it;
    ``backlog_growth_per_s``, the sources' backlog growth, and ``noise_per_s``, the growth up to
    which it is noise (``scaling.planner.signals.backlog_growth_noise``), records/s; ``not_ready``,
    the issues of its samples (``scaling.values.readiness``)."""

    batches: int
    backlog_growth_per_s: float = 0.0
    noise_per_s: float = 0.0
    not_ready: tuple[SampleIssue, ...] = ()


@dataclass(frozen=True)
class MemoryKnob:
    """A pipeline knob that sets a memory of ``kind``: its name, the value it runs with and its
    declared bounds, MB."""

    kind: MemoryKind
    name: str
    running_mb: int
    min_mb: int
    max_mb: int


@dataclass(frozen=True)
class MemoryInputs:
    """What the memory part of a decision reads: the window's ``readings`` (oldest first), the
    memory ``policy``, the pipeline's memory ``knobs``; ``local_mode`` (the driver's JVM runs every
    task, whatever the cores: the heap never follows the executors) and ``state_in_rocksdb`` (False
    when the runner names another state store: the state-memory knob sets RocksDB's bound only);
    ``sizing``, the window's load (None: the caller knows no more of the window than its readings;
    the one door sets it from its request)."""

    readings: tuple[MemoryReading, ...]
    policy: MemoryPolicy = MemoryPolicy()
    knobs: tuple[MemoryKnob, ...] = ()
    local_mode: bool = False
    state_in_rocksdb: bool = True
    sizing: SizingWindow | None = None

    def knob(self, kind: MemoryKind) -> MemoryKnob | None:
        """The knob of ``kind``, or None."""
        return next((k for k in self.knobs if k.kind is kind), None)


@dataclass(frozen=True)
class WindowMemory:
    """A window's memory as the pages, the API and the decision read it (``scaling.planner.memory.
    window_memory``): the newest GC share; the highest heap at peak and its maximum, MB; the
    ``pressure`` or None; the heap ``recommendation`` when it saves memory or answers the pressure;
    ``apply`` (``memory_apply``); the state stores' memory of one JVM and the highest non-heap use,
    MB; ``sizes``, the other memories' recommendations that change a running knob; ``withheld``, the
    ``memory-withheld`` reason when the window's load says no right-sizing (then no size, and a heap
    only to relieve the pressure), else None."""

    gc_share: float | None
    heap_peak_mb: float | None
    heap_max_mb: float | None
    pressure: Pressure | None
    recommendation: HeapRecommendation | None
    apply: bool
    state_mb: float | None = None
    nonheap_peak_mb: float | None = None
    sizes: tuple[HeapRecommendation, ...] = ()
    withheld: Reason | None = None

    @property
    def heap_usage(self) -> float | None:
        """:func:`heap_usage` of the window."""
        return heap_usage(self.heap_peak_mb, self.heap_max_mb)

    @property
    def pressure_reason(self) -> Reason | None:
        """The ``memory-pressure`` reason (code and figures), or None."""
        return self.pressure.reason() if self.pressure else None

    def to_json(self) -> dict:
        """The API's form: shares 0..1, sizes MB; the pressure's reason as a code with data (an infinite
        number as null)."""
        pressure = self.pressure_reason
        return {"gc_share": self.gc_share, "heap_peak_mb": self.heap_peak_mb, "heap_max_mb": self.heap_max_mb,
                "heap_usage": self.heap_usage,
                "pressure": pressure.to_json(infinity_as_null=True) if pressure else None,
                "recommendation": self.recommendation.to_json() if self.recommendation else None,
                "apply": self.apply, "state_mb": self.state_mb, "nonheap_peak_mb": self.nonheap_peak_mb,
                "sizes": [size.to_json() for size in self.sizes],
                "withheld": self.withheld.to_json() if self.withheld else None}
