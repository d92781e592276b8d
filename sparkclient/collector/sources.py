"""Backlog and arrival rate of a streaming query's sources, read from the progress ``sources[]``.

Per source kind (:class:`SourceKind`, from the source ``description`` and the offsets' shape):

- **rate** (``RateStreamV2[rowsPerSecond=R, ...]``): offsets are *generation time*, whole seconds
  since the source was created (Spark keeps that creation time in the checkpoint, so it survives
  restarts). A progress whose ``latestOffset`` is ``L`` at ``timestamp`` ``t`` bounds the creation
  time ``c`` to ``(t − L − 1, t + triggerExecution − L]``; :func:`rate_creation_s` intersects those
  bounds over every progress of the query. Then:

  - arrival rate = records per offset second = ``Σ numInputRows / Σ (endOffset − startOffset)``
    over the window's batches (the catch-up batch after a restart carries ``R × downtime`` rows
    over a ``downtime``-second offset range, so it is not counted as a burst of arrivals);
  - backlog at time ``now`` = ``R × max(0, now − due)``, ``due = max(start + trigger, end)`` of the
    newest batch (``start``: its ``timestamp``, where Spark fetches the latest offset; ``end``: its
    completion): the rows generated that the next batch should already have taken and nothing has
    read yet. The source has no admission control, so every batch takes ``latestOffset`` whole
    (``latestOffset − endOffset`` is 0): a query that keeps up has no backlog, whatever part of a
    trigger has passed since its last batch; a batch running late makes it grow.

- **Kafka** (``KafkaV2[...]``; offsets ``{"topic": {"partition": offset}}``): backlog
  ``Σ_partitions max(0, latestOffset − endOffset)``; when ``latestOffset`` is absent,
  ``avgOffsetsBehindLatest × partitions`` from the source ``metrics`` (Kafka's
  ``ReportsSourceMetrics``, values rendered as strings). ``maxOffsetsBehindLatest`` is kept too.
- **partitioned log** (this project's Redis log, ``{"p0": n, ...}``): record positions per
  partition, backlog ``Σ max(0, latest − end)``.
- **numeric** (a plain number that is not the rate source's): ``(latest − end) × records per
  offset unit`` (``Σ numInputRows / Σ (end − start)`` over the window, 1 when unknown).
- **file** (``FileStreamSource[...]``): Spark 4.3 reports a metadata-log position, not records,
  and no outstanding files or bytes; when a source's ``metrics`` carry ``numFilesOutstanding`` /
  ``numBytesOutstanding`` (Databricks Auto Loader does) they are kept in the structured entry.

For offsets sources (Kafka, partitioned log, numeric) the arrival rate is the growth of
``Σ latestOffset`` over wall time, from the last progress before the window (any run of the
query: the offsets continue across restarts) to the newest one in it.

Where a source reports nothing usable, :class:`BacklogUnknown` says which source and why
(:class:`BacklogUnknownReason`), and the scaler works from rates alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sparkclient.collector.offsets import (
    SourceKind,
    flatten_offsets,
    offset_number,
    offset_total,
    progress_sources,
    progress_start_s,
    rate_creation_s,
    rate_rows_per_s,
    source_backlog,
    source_kind,
    trigger_execution_s,
)
from sparkclient.collector.sparkjson import MAX_COUNT

__all__ = [
    "BacklogUnknown",
    "BacklogUnknownReason",
    "SourcesReport",
    "measure_sources",
]

Json = dict[str, Any]

class BacklogUnknownReason(StrEnum):
    """Why the backlog of a source is not known."""

    NO_LATEST_OFFSET = "no-latest-offset"  # the source reports no latestOffset (and no lag metric)
    NOT_NUMERIC = "not-numeric"  # offsets that are not numbers (e.g. stream ids)
    SHAPES_DIFFER = "shapes-differ"  # latest and end offsets have no partition in common
    NOT_RECORDS = "not-records"  # offsets count something else (the file source's log batches)
    NO_CREATION_TIME = "no-creation-time"  # rate source without a consistent offset/time history
    NO_BATCH = "no-batch"  # no batch of the run has completed yet


_REASON_TEXT = {
    BacklogUnknownReason.NO_LATEST_OFFSET: "it reports no latest offset",
    BacklogUnknownReason.NOT_NUMERIC: "its offsets are not numbers",
    BacklogUnknownReason.SHAPES_DIFFER: "its latest and end offsets name different partitions",
    BacklogUnknownReason.NOT_RECORDS: "its offsets do not count records and it reports no outstanding records",
    BacklogUnknownReason.NO_CREATION_TIME: "its offsets and batch times disagree on when it started",
    BacklogUnknownReason.NO_BATCH: "no batch has completed",
}


@dataclass(frozen=True)
class BacklogUnknown:
    """The backlog of source ``index`` (its ``description``, cut to 120 characters) is unknown for
    ``reason``. ``outstanding_files`` / ``outstanding_bytes``: what the source reports instead,
    when it does."""

    index: int
    description: str
    kind: SourceKind
    reason: BacklogUnknownReason
    outstanding_files: int | None = None
    outstanding_bytes: int | None = None

    @property
    def message(self) -> str:
        """The sentence shown on the page, rendered from the fields."""
        extra = ""
        if self.outstanding_files is not None or self.outstanding_bytes is not None:
            extra = (f"; it reports {self.outstanding_files or 0} file(s), "
                     f"{self.outstanding_bytes or 0} byte(s) outstanding")
        return (f"backlog unknown for source {self.index} ({self.description}): "
                f"{_REASON_TEXT[self.reason]}{extra}; the scaler works from rates alone")

    def to_json(self) -> Json:
        return {"index": self.index, "description": self.description, "kind": self.kind.value,
                "reason": self.reason.value, "outstanding_files": self.outstanding_files,
                "outstanding_bytes": self.outstanding_bytes}


@dataclass(frozen=True)
class SourcesReport:
    """What the sources say over a window.

    - ``backlog``: records waiting at the known sources, at the window's end (>= 0).
    - ``arrival_per_s``: records/s arriving at all sources, or ``None`` when a source gives no
      offsets to measure it (the caller then falls back to the processed rows, with a note).
    - ``unknown``: one entry per source whose backlog is unknown.
    - ``max_behind``: Kafka's ``maxOffsetsBehindLatest`` summed over Kafka sources, when reported.
    - ``over_limit``: each source whose batches carried more rows than its own limit allows (a rate
      source's ``rowsPerSecond``): ``(index, rows per offset second, limit)``. Its rate is then
      taken at the limit, and the sample is not ready (``scaling.values.readiness.NotReady.IMPLAUSIBLE_RATE``).
    """

    backlog: int
    arrival_per_s: float | None
    unknown: tuple[BacklogUnknown, ...] = ()
    max_behind: int | None = None
    over_limit: tuple[tuple[int, float, float], ...] = ()


# -- measuring -----------------------------------------------------------------------------------


def _records_per_unit(batches: Sequence[Mapping[str, Any]], index: int) -> float | None:
    rows = units = 0.0
    for progress in batches:
        sources = progress_sources(progress)
        if index >= len(sources):
            continue
        start = flatten_offsets(sources[index].get("startOffset"))
        end = flatten_offsets(sources[index].get("endOffset"))
        count = offset_number(sources[index].get("numInputRows"))
        if isinstance(start, float) and isinstance(end, float) and end > start and count is not None and count >= 0:
            rows += count
            units += end - start
    return rows / units if units > 0 and rows > 0 else None


#: Slack on a rate source's ``rowsPerSecond`` for a row count rounded at a batch edge.
RATE_LIMIT_SLACK = 1.01


def _rate_within_limit(per_unit: float | None, source: Mapping[str, Any], index: int,
                       over_limit: list[tuple[int, float, float]]) -> float | None:
    """The rate source's rows per offset second (``per_unit``, else its ``rowsPerSecond``). Above
    ``rowsPerSecond`` × :data:`RATE_LIMIT_SLACK` (the source generates at most that) the rate is
    taken at the limit and ``(index, per_unit, rowsPerSecond)`` appended to ``over_limit``."""
    limit = rate_rows_per_s(source.get("description"))
    if per_unit is not None and limit is not None and per_unit > limit * RATE_LIMIT_SLACK:
        over_limit.append((index, round(per_unit, 3), limit))
        return limit
    return per_unit or limit


def _metric(source: Mapping[str, Any], name: str) -> float | None:
    metrics = source.get("metrics")
    if not isinstance(metrics, Mapping):
        return None
    value = offset_number(metrics.get(name))
    return value if value is not None and value >= 0 else None


def measure_sources(
    history: Sequence[Mapping[str, Any]],
    batches: Sequence[Mapping[str, Any]],
    *,
    now_s: float,
    trigger_interval_s: float = 0.0,
) -> SourcesReport:
    """Backlog at ``now_s`` and arrival rate of every source (module docstring).

    ``history``: the query's progresses up to the window's end, oldest first, any run (for the
    rate source's creation time and the offsets baseline); ``batches``: the window's batch
    progresses, oldest first; ``trigger_interval_s``: the query's trigger, seconds (0: none). A
    source it cannot read is reported in ``unknown``; a rate source whose batches carried more rows
    per offset second than its own ``rowsPerSecond`` in ``over_limit``.
    """
    if not batches:
        newest = history[-1] if history else None
        unknown = tuple(
            BacklogUnknown(i, _describe(s), source_kind(s), BacklogUnknownReason.NO_BATCH)
            for i, s in enumerate(progress_sources(newest) if newest else ())
        )
        return SourcesReport(backlog=0, arrival_per_s=None, unknown=unknown)
    newest = batches[-1]
    first_time = progress_start_s(batches[0])
    baseline = None
    if first_time is not None:
        earlier = [p for p in history
                   if (t := progress_start_s(p)) is not None and t < first_time and progress_sources(p)]
        baseline = earlier[-1] if earlier else None
    backlog = arrival = 0.0
    arrival_known = True
    unknown: list[BacklogUnknown] = []
    max_behind: int | None = None
    over_limit: list[tuple[int, float, float]] = []
    for index, source in enumerate(progress_sources(newest)):
        kind = source_kind(source)
        per_unit = _records_per_unit(batches, index)
        lag: float | None = None
        reason: BacklogUnknownReason | None = None
        rate: float | None = None
        if kind is SourceKind.RATE:
            rows_per_s = _rate_within_limit(per_unit, source, index, over_limit)
            creation = rate_creation_s(history, index)
            end = flatten_offsets(source.get("endOffset"))
            rate = rows_per_s
            if creation is None or not isinstance(end, float) or rows_per_s is None:
                reason = BacklogUnknownReason.NO_CREATION_TIME
            else:
                lag = rows_per_s * max(0.0, now_s - _rate_batch_due_s(newest, trigger_interval_s))
        else:
            raw = source_backlog(source) if kind is not SourceKind.FILE else None
            if raw is not None:
                lag = raw * (per_unit or 1.0) if kind is SourceKind.NUMERIC else raw
            if kind is SourceKind.KAFKA:
                behind = _metric(source, "maxOffsetsBehindLatest")
                if behind is not None:
                    max_behind = (max_behind or 0) + int(behind)
                if lag is None:
                    avg = _metric(source, "avgOffsetsBehindLatest")
                    end = flatten_offsets(source.get("endOffset"))
                    if avg is not None and isinstance(end, dict) and end:
                        lag = avg * len(end)
            if lag is None:
                reason = _why_unknown(source, kind)
            rate = _offsets_growth_per_s(baseline, batches, index, per_unit if kind is SourceKind.NUMERIC else 1.0)
        if lag is None:
            unknown.append(BacklogUnknown(
                index, _describe(source), kind, reason or BacklogUnknownReason.NO_LATEST_OFFSET,
                outstanding_files=_int_or_none(_metric(source, "numFilesOutstanding")),
                outstanding_bytes=_int_or_none(_metric(source, "numBytesOutstanding"))))
        else:
            backlog += lag
        if rate is None:
            arrival_known = False
        else:
            arrival += rate
    return SourcesReport(backlog=int(round(min(backlog, MAX_COUNT))),
                         arrival_per_s=arrival if arrival_known and progress_sources(newest) else None,
                         unknown=tuple(unknown), max_behind=max_behind, over_limit=tuple(over_limit))


def _rate_batch_due_s(newest: Mapping[str, Any], trigger_interval_s: float) -> float:
    """When the batch after ``newest`` is due, epoch seconds: a processing-time trigger starts it
    ``trigger_interval_s`` after ``newest`` started, or at once when ``newest`` ran longer
    (Spark's ``ProcessingTimeExecutor``)."""
    start = progress_start_s(newest) or 0.0
    return max(start + max(0.0, trigger_interval_s), start + trigger_execution_s(newest))


def _int_or_none(value: float | None) -> int | None:
    return None if value is None else int(value)


def _describe(source: Mapping[str, Any]) -> str:
    description = source.get("description")
    return description[:120] if isinstance(description, str) else "?"


def _why_unknown(source: Mapping[str, Any], kind: SourceKind) -> BacklogUnknownReason:
    if kind is SourceKind.FILE:
        return BacklogUnknownReason.NOT_RECORDS
    latest_raw = source.get("latestOffset")
    if latest_raw is None:
        return BacklogUnknownReason.NO_LATEST_OFFSET
    latest = flatten_offsets(latest_raw)
    end = flatten_offsets(source.get("endOffset"))
    if latest is None or end is None:
        return BacklogUnknownReason.NOT_NUMERIC
    return BacklogUnknownReason.SHAPES_DIFFER


def _latest_total(source: Mapping[str, Any]) -> float | None:
    """``Σ latestOffset`` of a source; for Kafka without ``latestOffset``, ``Σ endOffset +
    avgOffsetsBehindLatest × partitions`` from its metrics. ``None`` when neither is there."""
    kind = source_kind(source)
    if kind is SourceKind.FILE:
        return None
    total = offset_total(flatten_offsets(source.get("latestOffset")))
    if total is None and kind is SourceKind.KAFKA:
        end = flatten_offsets(source.get("endOffset"))
        avg = _metric(source, "avgOffsetsBehindLatest")
        if isinstance(end, dict) and end and avg is not None:
            total = offset_total(end) + avg * len(end)
    return total


def _offsets_growth_per_s(baseline: Mapping[str, Any] | None, batches: Sequence[Mapping[str, Any]],
                          index: int, per_unit: float | None) -> float | None:
    """Growth of source ``index``'s ``Σ latestOffset`` per second, from ``baseline`` (else the
    window's first batch) to the newest batch, times ``per_unit``; ``None`` when not measurable."""
    points = ([baseline] if baseline is not None else []) + list(batches)
    readings: list[tuple[float, float]] = []
    for progress in points:
        sources = progress_sources(progress)
        when = progress_start_s(progress)
        if index >= len(sources) or when is None:
            continue
        total = _latest_total(sources[index])
        if total is not None:
            readings.append((when, total))
    if len(readings) < 2:
        return None
    (t0, first), (t1, last) = readings[0], readings[-1]
    if t1 <= t0:
        return None
    return max(0.0, last - first) * (per_unit or 1.0) / (t1 - t0)

