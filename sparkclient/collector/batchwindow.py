"""The progress of a micro-batch (``StreamingQueryProgress`` dicts: when it started and completed,
checked field by field) and THE window rule (:func:`window_batches`): which batches a window
counts and the seconds they span, for a live collect and for a folder of captures alike."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sparkclient.collector.offsets import batch_cut_s, rate_creation_s
from sparkclient.collector.sparkjson import (
    Problem,
    SparkDataError,
    as_dict,
    get_count,
    get_dict,
    get_float,
    get_list,
    get_str,
)
from sparkclient.collector.stages import rest_time_s

__all__ = ["BatchWindow", "batch_end_s", "check_progress", "duration_s", "progress_time_s", "progress_where",
           "query_progresses", "window_batches"]

Json = dict[str, Any]


def progress_where(progress: Mapping[str, Any]) -> str:
    batch = progress.get("batchId")
    return f"progress[batch {batch}]" if isinstance(batch, int) and not isinstance(batch, bool) else "progress"


def progress_time_s(progress: Mapping[str, Any]) -> float:
    """The batch start of a progress (its ``timestamp``, ISO 8601 with ``Z``) in epoch seconds.

    Raises :class:`SparkDataError` (a ``ValueError``) if the timestamp is missing or not ISO 8601.
    """
    where = progress_where(progress)
    stamp = progress.get("timestamp")
    if not isinstance(stamp, str):
        raise SparkDataError(f"{where}.timestamp", Problem.MISSING if stamp is None else Problem.WRONG_TYPE,
                             "an ISO 8601 time string", stamp)
    value = rest_time_s(stamp)
    if value is None:
        raise SparkDataError(f"{where}.timestamp", Problem.MALFORMED, "an ISO 8601 time string", stamp)
    return value


def _durations(progress: Mapping[str, Any]) -> Mapping[str, Any]:
    return get_dict(progress, "durationMs", progress_where(progress))


def duration_s(progress: Mapping[str, Any], key: str) -> float:
    return get_float(_durations(progress), key, f"{progress_where(progress)}.durationMs") / 1000.0


def batch_end_s(progress: Mapping[str, Any]) -> float:
    """When the trigger of a progress completed, in epoch seconds: its ``timestamp`` plus
    ``durationMs.triggerExecution``. A batch belongs to the window that holds its completion, so
    consecutive windows count every batch exactly once.

    Raises :class:`SparkDataError` if the timestamp is missing or not ISO 8601, or the duration
    is not a finite number >= 0.
    """
    return progress_time_s(progress) + duration_s(progress, "triggerExecution")


def _is_batch_progress(progress: Mapping[str, Any]) -> bool:
    """An idle-trigger progress (no data, nothing run) has no ``addBatch`` duration."""
    durations = progress.get("durationMs")
    return isinstance(durations, Mapping) and "addBatch" in durations


#: The counts (rows, ms, bytes, partitions) of a progress's ``stateOperators[]`` (``StateOperatorProgress``).
_STATE_COUNTS = ("numRowsTotal", "numRowsUpdated", "allUpdatesTimeMs", "numRowsRemoved", "allRemovalsTimeMs",
                 "commitTimeMs", "memoryUsedBytes", "numRowsDroppedByWatermark", "numShufflePartitions",
                 "numStateStoreInstances")


def check_progress(progress: Any, position: int | str = 0) -> Json:
    """``progress`` (a ``StreamingQueryProgress`` dict) when every field the collector reads is well
    formed: ids and names strings, ``timestamp`` ISO 8601, ``durationMs`` an object of finite
    durations >= 0 ms, row counts integers >= 0 (``sink.numOutputRows`` >= -1, Spark's "unknown"),
    rates finite >= 0 rows/s, ``sources`` and ``stateOperators`` lists of objects (their counts
    integers >= 0). Else :class:`SparkDataError` naming the field (``progress[<position>]`` or
    ``progress[batch N]``)."""
    p = as_dict(progress, position if isinstance(position, str) else f"progress[{position}]")
    where = progress_where(p)
    if p.get("batchId") is None:
        raise SparkDataError(f"{where}.batchId", Problem.MISSING, "an integer")
    get_count(p, "batchId", where)
    get_str(p, "runId", where)
    get_str(p, "id", where)
    get_str(p, "name", where)
    progress_time_s(p)
    for key, value in _durations(p).items():
        get_float({key: value}, key, f"{where}.durationMs")
    get_count(p, "numInputRows", where)
    get_float(p, "batchDuration", where)
    for key in ("inputRowsPerSecond", "processedRowsPerSecond"):
        get_float(p, key, where)
    sink = get_dict(p, "sink", where)
    get_count(sink, "numOutputRows", f"{where}.sink", minimum=-1)
    for index, op in enumerate(get_list(p, "stateOperators", where)):
        op = as_dict(op, f"{where}.stateOperators[{index}]")
        get_str(op, "operatorName", f"{where}.stateOperators[{index}]")
        for key in _STATE_COUNTS:
            get_count(op, key, f"{where}.stateOperators[{index}]")
    for index, source in enumerate(get_list(p, "sources", where)):
        source = as_dict(source, f"{where}.sources[{index}]")
        get_count(source, "numInputRows", f"{where}.sources[{index}]")
        get_str(source, "description", f"{where}.sources[{index}]")
        for key in ("inputRowsPerSecond", "processedRowsPerSecond"):
            get_float(source, key, f"{where}.sources[{index}]")
    return p


def query_progresses(progresses: Sequence[Any], run_id: str) -> list[Json]:
    """The checked progresses of the query that ran ``run_id`` (same ``id``; all when no ``id``)."""
    checked = [check_progress(p, i) for i, p in enumerate(progresses)]
    query_ids = {p.get("id") for p in checked if p.get("runId") == run_id and p.get("id")}
    return [p for p in checked if not query_ids or p.get("id") in query_ids or p.get("runId") == run_id]


# -- the window rule ---------------------------------------------------------------------------


@dataclass(frozen=True)
class BatchWindow:
    """The batches of one window and the time they span (:func:`window_batches`).

    ``batches``: batch progresses counted, by ``batchId``; ``spans``: per batch id, its span
    ``(start_s, end_s)`` in epoch seconds; ``start_s``/``end_s``: the window's span.
    """

    batches: tuple[Json, ...]
    spans: Mapping[int, tuple[float, float]]
    start_s: float
    end_s: float

    @property
    def span_s(self) -> float:
        return max(0.0, self.end_s - self.start_s)

    def span_of(self, batch_ids: Iterable[int]) -> float:
        """Seconds spanned by the given batches of the window (sum of their spans)."""
        return sum(self.spans[b][1] - self.spans[b][0] for b in batch_ids if b in self.spans)


def window_batches(
    progresses: Sequence[Json],
    *,
    run_id: str,
    window_start_s: float | None,
    window_end_s: float,
) -> BatchWindow:
    """THE window rule, for a live collect and for captures alike.

    **Which batches.** A batch of run ``run_id`` (a progress with an ``addBatch`` duration) is in
    the window ``[window_start_s, window_end_s)`` when it *completed* inside it:
    ``timestamp + triggerExecution ∈ [window_start_s, window_end_s)``; ``window_start_s=None``
    takes every batch of the run that completed before ``window_end_s``. Consecutive windows
    therefore count every batch exactly once.

    **What time they span.** Each batch carries the data that arrived between two *cuts*: the
    moment the previous batch of the query fixed its end offsets and the moment it fixed its own.
    The cut ``c_i`` of batch ``i`` is its start (``timestamp``, where Spark fetches the latest
    offsets); for a query whose only source is the ``rate`` source it is exactly
    ``creation + endOffset`` (its offsets are generation seconds, :mod:`sparkclient.collector.sources`).
    The span of batch ``i`` is ``[c_{i−1}, c_i)``, where ``i−1`` is the query's previous batch,
    *of any run*: the catch-up batch after a restart spans the downtime whose rows it carries.
    The query's very first batch has no previous one; its span starts at its own start.

    **Rates.** Every rate of a window is ``Σ_counted rows / (c_last − c_{before first})``: the
    window's span is ``[c_{i₀−1}, c_{i₁})`` for the first and last counted batches ``i₀, i₁``.
    For a steady source at R rows/s every batch carries ``R × (c_i − c_{i−1})`` rows, so the
    rate is R for any number of batches (no fencepost: N batches, N spans).

    ``progresses``: the query's progress dicts (any order, any run; other runs of the query are
    used only to find the previous batch). Raises :class:`SparkDataError` for a malformed
    progress, ``ValueError`` for an inverted window.
    """
    if window_start_s is not None and not window_end_s > window_start_s:
        raise ValueError(f"window must have window_end_s > window_start_s, got [{window_start_s}, {window_end_s})")
    query = query_progresses(progresses, run_id)
    batch_by_id: dict[int, Json] = {}
    for p in query:
        if _is_batch_progress(p):
            batch_id = int(p["batchId"])
            # a batch id re-run after a failure: the newest attempt counts
            if batch_id not in batch_by_id or progress_time_s(p) >= progress_time_s(batch_by_id[batch_id]):
                batch_by_id[batch_id] = p
    counted = [
        batch_by_id[b] for b in sorted(batch_by_id)
        if batch_by_id[b].get("runId", run_id) == run_id
        and batch_end_s(batch_by_id[b]) < window_end_s
        and (window_start_s is None or batch_end_s(batch_by_id[b]) >= window_start_s)
    ]
    creation = rate_creation_s([p for p in query if batch_end_s(p) < window_end_s])
    spans: dict[int, tuple[float, float]] = {}
    ordered_ids = sorted(batch_by_id)
    for p in counted:
        batch_id = int(p["batchId"])
        cut = batch_cut_s(p, creation)
        assert cut is not None  # check_progress validated the timestamp
        position = ordered_ids.index(batch_id)
        previous = batch_by_id[ordered_ids[position - 1]] if position > 0 else None
        before = batch_cut_s(previous, creation) if previous is not None else None
        start = progress_time_s(p) if before is None or before > cut else before
        spans[batch_id] = (min(start, cut), cut)
    if not counted:
        end = window_end_s
        return BatchWindow((), {}, window_start_s if window_start_s is not None else end, end)
    start_s = spans[int(counted[0]["batchId"])][0]
    end_s = spans[int(counted[-1]["batchId"])][1]
    if end_s <= start_s:  # only the query's first batch: its own run time
        end_s = max(batch_end_s(counted[-1]), start_s + 0.001)
        spans[int(counted[-1]["batchId"])] = (spans[int(counted[-1]["batchId"])][0], end_s)
    return BatchWindow(tuple(counted), spans, start_s, end_s)
