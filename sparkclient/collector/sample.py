"""The collector's values: :class:`JobSample` (one collect of one streaming query over a window)
and :class:`VertexSample` (one DS2 vertex, a stage position, in it), which refuse any number that
is not finite and >= 0 (:class:`SampleError`). Built by :func:`sparkclient.collector.topology.sample_from_rest`;
the mapping rules are in :mod:`sparkclient.collector.topology`'s docstring."""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any

from scaling.policy.numbers import is_finite_number
from scaling.values.readiness import SampleIssue
from sparkclient.collector.memory import MemorySample
from sparkclient.collector.sources import BacklogUnknown

__all__ = ["JobSample", "RatesUnavailable", "SampleError", "VertexSample"]


class SampleError(ValueError):
    """A sample value is not a finite, non-negative number (``field``, ``value``): it is refused
    before it is stored. Raised by :class:`JobSample` and :class:`VertexSample` on construction."""

    def __init__(self, field: str, value: Any) -> None:
        self.field = field
        self.value = value
        super().__init__(f"sample refused: {field} must be a finite number >= 0, got {value!r}")


def _check_numbers(obj: Any, prefix: str) -> None:
    for f in fields(obj):
        value = getattr(obj, f.name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if not is_finite_number(value) or value < 0:
            raise SampleError(f"{prefix}{f.name}", value)


class RatesUnavailable(StrEnum):
    """Why a sample has no rates (they are then not reported as 0)."""

    NO_INPUT_RECORDS = "no-input-records"  # no progress published, and the stages report no inputRecords


@dataclass(frozen=True)
class VertexSample:
    """One vertex (a stage position of the micro-batch job) aggregated over a window.

    - ``vertex_id``: ``f"v{position}"`` (stable across batches and restarts).
    - ``name``: plan operators joined by ``" → "``, or ``f"stage {position}"``.
    - ``tasks``: tasks per batch (the partitions) in the newest batch of the window.
    - ``busy_s``: sum of ``executorRunTime`` over all its tasks in the window, task-seconds.
    - ``busy_max_s``: the busiest task's busy time over the window, seconds per task (compare
      ``busy_s / tasks``): per batch the slowest task's ``executorRunTime`` on the cores it had
      (``scaling.values.metrics.paced_task_busy_s``); None when Spark's task summaries were not available.
    - ``records_in``: ``inputRecords`` for the source vertex (the batch's ``numInputRows`` when
      the stage reports no input records, as Python data sources do), else
      ``shuffleReadRecords``; summed over the window.
    - ``records_out``: ``shuffleWriteRecords``; for the last vertex the sink rows: the
      progress's ``sink.numOutputRows`` when >= 0, else the stage's ``outputRecords`` when > 0,
      else its ``records_in`` (``foreachBatch`` reports -1 and writes nothing Spark can count).
    - ``spill_bytes``: ``memoryBytesSpilled + diskBytesSpilled`` over the window, bytes.
    - ``upstream``: vertex ids feeding this one.
    - ``span_s``: seconds spanned by the batches aggregated here (:func:`window_batches`); the
      vertex's per-second rates divide by it. 0 means "the sample's ``window_s``".

    Raises :class:`SampleError` for a negative or non-finite number.
    """

    vertex_id: str
    name: str
    position: int
    is_source: bool
    tasks: int
    busy_s: float
    records_in: int
    records_out: int
    spill_bytes: int
    upstream: tuple[str, ...]
    span_s: float = 0.0
    busy_max_s: float | None = None

    def __post_init__(self) -> None:
        _check_numbers(self, f"vertex {self.vertex_id}: ")


@dataclass(frozen=True)
class JobSample:
    """One collect of one streaming query (one ``runId``) over a window; see the field comments
    in ARCHITECTURE.md. Rates are records per second, durations seconds, sizes bytes.

    - ``window_s``: the seconds the window's batches span (:func:`window_batches`); every rate
      of the sample is a count over it.
    - ``arrival_rate_per_s``: records/s arriving at the sources, from their offsets over wall
      time (:mod:`sparkclient.collector.sources`), not from the rows the batches took.
    - ``input_rate_per_s``: rows the window's batches took, per second of ``window_s``.
    - ``processed_rate_per_s``: those rows per second of batch duration.
    - ``backlog``: records waiting at the sources whose backlog is known, at the window's end;
      ``backlog_unknown`` lists the others, with the reason.
    - ``batch_overhead_s``: mean time per batch spent outside tasks (module docstring).
    - ``rates_unavailable``: set when the rows are not known at all (then every rate is 0 and
      must not be read as a measurement).
    - ``not_ready``: why the sample is not ready (``scaling.values.readiness``; rules in
      :mod:`sparkclient.collector.readiness`), ``()`` when it is: no scale-down is planned on it.
    - ``memory``: the window's memory signals (:class:`sparkclient.collector.memory.MemorySample`);
      None when not read.

    Raises :class:`SampleError` for a negative or non-finite number.
    """

    run_id: str
    query_name: str | None
    app_id: str
    window_s: float
    batches: int
    first_batch_id: int | None
    last_batch_id: int | None
    vertices: tuple[VertexSample, ...]
    backlog: int
    arrival_rate_per_s: float
    input_rate_per_s: float
    processed_rate_per_s: float
    batch_duration_s: float
    trigger_interval_s: float
    batch_overhead_s: float
    batch_ratio: float
    executors: int
    cores: int
    state_rows: int
    state_bytes: int
    collected_at: float
    errors: tuple[str, ...] = ()
    backlog_unknown: tuple[BacklogUnknown, ...] = ()
    rates_unavailable: RatesUnavailable | None = None
    not_ready: tuple[SampleIssue, ...] = ()
    memory: MemorySample | None = None

    @property
    def ready(self) -> bool:
        """Whether the sample may lead to a scale-down (no ``not_ready`` issue)."""
        return not self.not_ready

    def __post_init__(self) -> None:
        _check_numbers(self, "")
