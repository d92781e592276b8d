"""Evaluated metrics per vertex, the metric window that produces them, and the cluster's shape.

The fields follow SCENARIO.md ("Metrics per vertex"): averages over the metric window, per second.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from scaling.policy.numbers import is_finite_number
from scaling.values.load_change import change_point


class MetricsError(ValueError):
    """A metric value is out of its domain (negative rate, busy time above 1000 ms/s, ...)."""


def _check_rate(name: str, value: float | None) -> None:
    if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool)
                              or math.isnan(value) or value < 0):
        raise MetricsError(f"{name}: must be a number >= 0, got {value}")


def _check_finite(name: str, value: float) -> None:
    if not is_finite_number(value):
        raise MetricsError(f"{name}: must be a finite number, got {value}")


@dataclass(frozen=True)
class VertexMetrics:
    """One vertex's metrics averaged over the window; rates are vertex totals, records/s. Raises ``MetricsError``
    for a value out of its domain, or without busy time and input rate when no true processing rate is given."""

    #: records consumed per second; None: unknown, each edge into the vertex then carries the full output of
    #: its upstream vertex (DS2, adjacency entry 1).
    records_in_per_s: float | None = None
    records_out_per_s: float | None = None
    #: busy time per second averaged over the tasks (subtasks), 0..1000 ms/s (Flink ``busyTimeMsPerSecond``);
    #: in micro-batch mode Σ executorRunTime / W / tasks.
    busy_time_ms_per_s: float | None = None
    backlog: float = 0.0  # records waiting at a source (latest − committed offset; Flink ``pendingRecords``)
    backlog_growth_per_s: float = 0.0  # the backlog's derivative, records/s
    batch_overhead_s: float = 0.0  # micro-batch mode: seconds of each batch spent outside tasks
    #: DS2's aggregated rates ``o[λ_p]`` and ``o[λ_o]`` (DS2 §3.2), records/s over all instances, given
    #: directly instead of busy time.
    true_processing_rate: float | None = None
    true_output_rate: float | None = None
    #: the busiest task's busy time, 0..1000 ms/s, optional (FLIP-271 aggregates busy time with MAX by
    #: default): with skew the slowest task sets the pace.
    busy_time_max_ms_per_s: float | None = None

    def __post_init__(self) -> None:
        for name in ("records_in_per_s", "records_out_per_s", "backlog", "batch_overhead_s",
                     "true_processing_rate", "true_output_rate"):
            _check_rate(name, getattr(self, name))
        for name in ("records_in_per_s", "records_out_per_s", "backlog", "batch_overhead_s"):
            value = getattr(self, name)
            if value is not None and not is_finite_number(value):
                raise MetricsError(f"{name}: must be finite, got {value}")
        for name in ("busy_time_ms_per_s", "busy_time_max_ms_per_s"):
            busy = getattr(self, name)
            if busy is not None and (isinstance(busy, bool) or not isinstance(busy, (int, float))
                                     or not 0 <= busy <= 1000):
                raise MetricsError(f"{name}: must be within 0..1000, got {busy}")
        _check_finite("backlog_growth_per_s", self.backlog_growth_per_s)
        if self.true_processing_rate is None and (self.busy_time_ms_per_s is None or self.records_in_per_s is None):
            missing = "busy_time_ms_per_s" if self.busy_time_ms_per_s is None else "records_in_per_s"
            raise MetricsError(f"{missing}: required unless true_processing_rate is given")
        if self.true_processing_rate is not None and self.true_processing_rate == 0:
            raise MetricsError("true_processing_rate: must be > 0")


@dataclass(frozen=True)
class VertexMeasurement:
    """One vertex's measured sums over one collect (one sample of the metric window), before they become
    per-second rates: what a Spark collect or a simulator tick counts. Raises ``MetricsError`` for a negative
    or non-finite count, or fewer than 1 task."""

    span_s: float  # seconds the counts cover (> 0; the sample's weight in the window)
    tasks: int  # tasks (subtasks) of the vertex, >= 1
    #: summed task busy time, task-seconds (Σ executorRunTime); above ``span_s × tasks`` when a batch longer
    #: than the collect reports all its busy time at its end.
    busy_s: float
    records_in: float  # records consumed over the span
    records_out: float  # records emitted over the span
    backlog: float = 0.0  # records waiting at a source at the span's end
    backlog_growth_per_s: float = 0.0  # arrival rate − input rate at a source, records/s
    batch_overhead_s: float = 0.0  # micro-batch mode: mean seconds of a batch spent outside tasks
    batches: int = 0  # micro-batches completed in the span (the weight of ``batch_overhead_s``)
    #: the busiest task's busy time over the span, seconds per task (compare ``busy_s / tasks``): in
    #: micro-batch mode the sum over the batches of :func:`paced_task_busy_s`; None when not measured (then
    #: the mean stands for it).
    busy_max_s: float | None = None

    def __post_init__(self) -> None:
        for name in ("span_s", "busy_s", "records_in", "records_out", "backlog", "batch_overhead_s", "batches"):
            _check_finite(name, getattr(self, name))
            _check_rate(name, getattr(self, name))
        if self.busy_max_s is not None:
            _check_finite("busy_max_s", self.busy_max_s)
            _check_rate("busy_max_s", self.busy_max_s)
        _check_finite("backlog_growth_per_s", self.backlog_growth_per_s)
        if self.tasks < 1:
            raise MetricsError(f"tasks: must be >= 1, got {self.tasks}")


@dataclass(frozen=True)
class VertexSamples:
    """The samples of one vertex in the metric window, one per collect, as columns (fast to reduce).

    Each tuple holds one value per sample, oldest first, in the units of ``VertexMetrics``, except
    that ``busy_time_ms_per_s`` is not capped at 1000 (a batch longer than the collect reports all
    its busy time at its end). ``span_s`` (seconds each sample covers) weighs the samples; empty means
    equal weights. ``batches`` (micro-batches completed per sample) weighs ``batch_overhead_s``;
    empty means the span weights. ``busy_time_max_ms_per_s`` (the busiest task's busy time, uncapped)
    is empty when no sample measured it.
    """

    records_in_per_s: tuple[float, ...]
    records_out_per_s: tuple[float, ...]
    busy_time_ms_per_s: tuple[float, ...]
    backlog: tuple[float, ...] = ()
    backlog_growth_per_s: tuple[float, ...] = ()
    batch_overhead_s: tuple[float, ...] = ()
    span_s: tuple[float, ...] = ()
    batches: tuple[float, ...] = ()
    busy_time_max_ms_per_s: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if not self.records_in_per_s:
            raise MetricsError("samples: a vertex needs at least one sample")
        n = len(self.records_in_per_s)
        for name in _SAMPLE_COLUMNS[1:]:
            count = len(getattr(self, name))
            if count not in (0, n) or (count == 0 and name in ("records_out_per_s", "busy_time_ms_per_s")):
                raise MetricsError(f"samples.{name}: expected {n} values, got {count}")

    def tail(self, start: int) -> VertexSamples:
        """The samples from index ``start`` on."""
        return VertexSamples(**{name: getattr(self, name)[start:] for name in _SAMPLE_COLUMNS})

    def aggregate(self) -> VertexMetrics:
        """Window averages, each sample weighted by its span (FLIP-271: rates and busy time are averaged
        over the metric window; the backlog is the latest value, as Flink's ``LAG`` uses the current lag).

        A mean busy time above 1000 ms/s (batches longer than the window) is reported as 1000 with the
        true processing rate given directly: records over busy time, ``records_in_per_s × 1000 / busy``
        (DS2 Eq. 1, vertex total). The busiest task's busy time, when measured, is averaged the same way,
        is never below the mean, and is capped at 1000 ms/s.
        """
        n = len(self.records_in_per_s)
        weights = self.span_s if self.span_s and sum(self.span_s) > 0 else (1.0,) * n

        def avg(column: tuple[float, ...], by: tuple[float, ...] = weights) -> float:
            total = sum(by)
            return sum(x * w for x, w in zip(column, by)) / total if column and total > 0 else 0.0

        records_in = avg(self.records_in_per_s)
        busy = avg(self.busy_time_ms_per_s)
        # A denormal input rate can underflow to a TPR of 0 (found by hypothesis): then the capped busy time serves.
        overfull_tpr = records_in * 1000.0 / busy if busy > 1000.0 else 0.0
        busy_max = (min(1000.0, max(busy, avg(self.busy_time_max_ms_per_s)))
                    if self.busy_time_max_ms_per_s else None)
        return VertexMetrics(
            records_in_per_s=records_in,
            records_out_per_s=avg(self.records_out_per_s),
            busy_time_ms_per_s=min(1000.0, busy),
            backlog=self.backlog[-1] if self.backlog else 0.0,
            backlog_growth_per_s=avg(self.backlog_growth_per_s),
            batch_overhead_s=avg(self.batch_overhead_s, self.batches if any(self.batches) else weights),
            true_processing_rate=overfull_tpr if overfull_tpr > 0 else None,
            busy_time_max_ms_per_s=busy_max)


_SAMPLE_COLUMNS = ("records_in_per_s", "records_out_per_s", "busy_time_ms_per_s", "backlog", "backlog_growth_per_s",
                   "batch_overhead_s", "span_s", "batches", "busy_time_max_ms_per_s")


@dataclass(frozen=True)
class MetricWindow:
    """The metric window (FLIP-271 ``job.autoscaler.metrics.window``): samples per vertex id."""

    samples: Mapping[str, VertexSamples] = field(default_factory=dict)

    @classmethod
    def from_metrics(cls, rows: Iterable[Mapping[str, VertexMetrics]]) -> MetricWindow:
        """Build a window from one ``{vertex_id: VertexMetrics}`` mapping per collect (equal weights)."""
        columns: dict[str, dict[str, list[float]]] = {}
        names = _SAMPLE_COLUMNS[:6]
        for row in rows:
            for vertex_id, m in row.items():
                col = columns.setdefault(vertex_id, {n: [] for n in names})
                for n in names:
                    col[n].append(getattr(m, n) or 0.0)
        return cls({v: VertexSamples(**{n: tuple(c) for n, c in col.items()}) for v, col in columns.items()})

    @classmethod
    def from_measurements(cls, rows: Iterable[Mapping[str, VertexMeasurement]]) -> MetricWindow:
        """Build a window from one ``{vertex_id: VertexMeasurement}`` mapping per collect, oldest first.

        Each sample's counts become per-second rates over its span (busy time through
        :func:`busy_time_ms_per_s`, uncapped) and the span weighs it, so the window's averages are
        its totals over its total time: Σ records / Σ span, Σ busy / Σ span / tasks. The busiest
        task's busy time is ``busy_max_s × 1000 / span``; a sample that did not measure it counts its
        mean, and when no sample of a vertex measured it the column stays empty. Every row must
        name the same vertices (a collect without a batch counts zeros over its span). Raises
        ``MetricsError`` when a row names other vertices than the first.
        """
        columns: dict[str, dict[str, list[float]]] = {}
        measured: set[str] = set()  # vertices with a busiest task in at least one sample
        vertices: tuple[str, ...] | None = None
        for row in rows:
            if vertices is None:
                vertices = tuple(row)
            elif set(row) != set(vertices):
                raise MetricsError(f"window: a sample names vertices {sorted(row)}, the first {sorted(vertices)}")
            for vertex_id, m in row.items():
                col = columns.setdefault(vertex_id, {n: [] for n in _SAMPLE_COLUMNS})
                span = m.span_s
                col["records_in_per_s"].append(m.records_in / span if span > 0 else 0.0)
                col["records_out_per_s"].append(m.records_out / span if span > 0 else 0.0)
                mean = busy_time_ms_per_s(m.busy_s, span, m.tasks, cap=False) if span > 0 else 0.0
                col["busy_time_ms_per_s"].append(mean)
                col["backlog"].append(m.backlog)
                col["backlog_growth_per_s"].append(m.backlog_growth_per_s)
                col["batch_overhead_s"].append(m.batch_overhead_s)
                col["span_s"].append(span)
                col["batches"].append(float(m.batches))
                if m.busy_max_s is not None:
                    measured.add(vertex_id)
                col["busy_time_max_ms_per_s"].append(
                    mean if m.busy_max_s is None else m.busy_max_s * 1000.0 / span if span > 0 else 0.0)
        for vertex_id in columns.keys() - measured:
            columns[vertex_id]["busy_time_max_ms_per_s"] = []
        return cls({v: VertexSamples(**{n: tuple(c) for n, c in col.items()}) for v, col in columns.items()})

    def aggregate(self, sources: Sequence[str] = (), *, after_change: bool = False) -> dict[str, VertexMetrics]:
        """Evaluated metrics per vertex (``VertexSamples.aggregate``); with ``after_change`` and ``sources``,
        of the samples after a load change in the sources' arrival rate only (``change_index``; DS2 §4, see
        docs/ARCHITECTURE.md, "The window after a load change")."""
        start = self.change_index(sources) if after_change and sources else None
        if start:
            return {vertex_id: s.tail(start).aggregate() for vertex_id, s in self.samples.items()}
        return {vertex_id: s.aggregate() for vertex_id, s in self.samples.items()}

    def change_index(self, sources: Sequence[str]) -> int | None:
        """The first sample after a load change in the window, or None (``change_point`` of the
        sources' arrival rate)."""
        present = [self.samples[v] for v in sources if v in self.samples]
        if not present:
            return None
        n = min(len(s.records_in_per_s) for s in present)
        arrival = [sum(s.records_in_per_s[i] + (s.backlog_growth_per_s[i] if s.backlog_growth_per_s else 0.0)
                       for s in present) for i in range(n)]
        return change_point(arrival)


@dataclass(frozen=True)
class ClusterState:
    """The executors of a Spark application (micro-batch mode).

    In local mode (``local[N]``) a core is modelled as one executor of one core, so
    ``executors × cores_per_executor`` is always the number of task slots.

    Attributes:
        available_executors: executors the cluster could grant now (FLIP-160 "new resources
            available"), or None when unknown. Used by the ``min-increase`` policy.
        executors_adjustable: whether the pipeline can change the executor count (it declares an
            executors knob); False pins it in every plan (``scaling.planner.signals.cores_fixed``).
    """

    executors: int
    cores_per_executor: int = 1
    min_executors: int = 1
    max_executors: int = 16
    trigger_interval_s: float = 1.0
    available_executors: int | None = None
    executors_adjustable: bool = True

    def __post_init__(self) -> None:
        if self.executors < 1:
            raise MetricsError(f"cluster.executors: must be >= 1, got {self.executors}")
        if self.cores_per_executor < 1:
            raise MetricsError(f"cluster.cores_per_executor: must be >= 1, got {self.cores_per_executor}")
        if self.min_executors < 1:
            raise MetricsError(f"cluster.min_executors: must be >= 1, got {self.min_executors}")
        if self.min_executors > self.max_executors:
            raise MetricsError(f"cluster.min_executors: {self.min_executors} is above max_executors "
                               f"{self.max_executors}")
        if not self.trigger_interval_s > 0:
            raise MetricsError(f"trigger_interval_s: must be > 0, got {self.trigger_interval_s}")
        if self.available_executors is not None and self.available_executors < 0:
            raise MetricsError(f"cluster.available_executors: must be >= 0, got {self.available_executors}")

    @property
    def cores(self) -> int:
        """Task slots: executors × cores per executor."""
        return self.executors * self.cores_per_executor


def mean(values: Sequence[float]) -> float:
    """Arithmetic mean; 0.0 for no values."""
    return sum(values) / len(values) if values else 0.0


# --- the per-stage formulas every reader of measured sums uses (one definition each) ---------------

def busy_time_ms_per_s(busy_s: float, span_s: float, tasks: int, *, cap: bool = True) -> float:
    """Busy time per task, ms/s (Flink's ``busyTimeMsPerSecond``): ``busy_s × 1000 / span_s / tasks`` for ``busy_s``
    task-seconds over ``span_s`` seconds, capped at 1000 unless ``cap`` is False (the metric window averages
    uncapped samples: a batch longer than the window reports all its busy time at its end)."""
    value = busy_s * 1000.0 / max(span_s, 1e-9) / max(1, tasks)
    return min(1000.0, value) if cap else value


def paced_task_busy_s(slowest_task_s: float, busy_s: float, tasks: int, slots: int) -> float:
    """The busy time, seconds per task, of one micro-batch stage at the pace its slowest task sets:
    ``max(slowest × s / n, busy / n)`` for ``n = tasks`` on ``s = min(n, slots)`` slots, never below the mean;
    with ``n ≤ slots`` FLIP-271's MAX busy time (docs/ARCHITECTURE.md, "A stage's pace"). ``slowest_task_s``:
    the slowest task's ``executorRunTime``, seconds; ``busy_s``: Σ ``executorRunTime``, task-seconds.
    Raises ``MetricsError`` for a negative or non-finite time or fewer than 1 task or slot.
    """
    for name, value in (("slowest_task_s", slowest_task_s), ("busy_s", busy_s)):
        _check_finite(name, value)
        _check_rate(name, value)
    if tasks < 1 or slots < 1:
        raise MetricsError(f"tasks and slots: must be >= 1, got {tasks} and {slots}")
    used = min(tasks, slots)
    return max(slowest_task_s * used / tasks, busy_s / tasks)


def task_skew(busiest: float, mean: float) -> float:
    """How much longer a stage's busiest task is busy than its mean task: ``busiest / mean`` (same
    units, e.g. ms/s or seconds per task), at least 1; 1.0 when the stage was not busy."""
    return max(1.0, busiest / mean) if mean > 0 else 1.0


def true_processing_rate(records: float, busy_s: float) -> float:
    """DS2 Eq. 1: records per busy task-second (records/s), ``records / busy_s``; ``inf`` when the
    stage was never busy (no input: an idle stage)."""
    return records / busy_s if busy_s > 0 else math.inf


def stage_utilization(busy_s: float, window_s: float, tasks: int, cores: int) -> float:
    """Busy share of the slots a stage can use, 0..1: ``busy_s / window_s / min(tasks, cores)`` (a
    stage of ``tasks`` tasks runs at most ``min(tasks, cores)`` at once on ``cores`` cores)."""
    slots = max(1, min(tasks, cores))
    return min(1.0, busy_s / max(window_s, 1e-9) / slots)


def job_utilization(busy_core_s_per_s: float, cores: int) -> float:
    """Busy share of the job's cores, ``Σ busy / cores`` (busy core-seconds per second over cores;
    above 1 when the stages need more than the cores give)."""
    return busy_core_s_per_s / max(1, cores)
