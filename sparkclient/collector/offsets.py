"""What a progress source's offsets say: the offsets normalised to numbers, a source's kind
(:class:`SourceKind`), its backlog in offset units, and for the ``rate`` source, whose offsets are
generation time, when it was created and when a batch's data span ends. The rules per source kind
are in :mod:`sparkclient.collector.sources`' docstring. Pure functions over progress dicts; anything not
numeric reads as ``None``, never an exception."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from enum import StrEnum
from typing import Any

from scaling.policy.numbers import is_finite_number
from sparkclient.collector.sparkjson import MAX_COUNT

__all__ = ["SourceKind", "batch_cut_s", "flatten_offsets", "offset_number", "offset_total", "progress_sources",
           "progress_start_s", "rate_creation_s", "rate_rows_per_s", "source_backlog", "source_kind",
           "trigger_execution_s"]

_RATE_RPS = re.compile(r"rowsPerSecond=(\d+(?:\.\d+)?)")


class SourceKind(StrEnum):
    """What a progress source is, as far as its backlog is concerned."""

    RATE = "rate"
    KAFKA = "kafka"
    FILE = "file"
    PARTITIONED_LOG = "partitioned-log"
    NUMERIC = "numeric"
    OTHER = "other"


# -- offsets -------------------------------------------------------------------------------------


def offset_number(value: Any) -> float | None:
    """A finite number (numeric strings too) within ±2^53, else ``None``."""
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    return float(value) if is_finite_number(value) and abs(value) <= MAX_COUNT else None


def flatten_offsets(offset: Any) -> dict[str, float] | float | None:
    """Normalise a source offset from a progress.

    - ``{"p0": 123, "p1": 45}`` -> ``{"p0": 123.0, "p1": 45.0}``;
    - Kafka ``{"topic": {"0": 123}}`` -> ``{"topic/0": 123.0}``;
    - a JSON string of either is decoded first; a plain number (rate source) -> that float;
    - ``None`` (first batch) or anything non-numeric, non-finite or beyond ±2^53 (e.g. Redis
      stream ids) -> ``None``;
    - a dict with a negative partition offset -> ``None``: Kafka's ``-1`` (latest) and ``-2``
      (earliest) are placeholders (``KafkaOffsetRangeLimit.LATEST`` / ``EARLIEST``), not positions,
      and no log has a position below 0.
    """
    if isinstance(offset, str):
        text = offset.strip()
        if text.startswith("{"):
            try:
                offset = json.loads(text)
            except (ValueError, RecursionError):
                return None
        else:
            return offset_number(text)
    if isinstance(offset, Mapping):
        flat: dict[str, float] = {}

        def walk(prefix: str, value: Any, depth: int) -> bool:
            if isinstance(value, Mapping):
                return depth < 4 and all(walk(f"{prefix}{key}/", inner, depth + 1) for key, inner in value.items())
            number = offset_number(value)
            if number is None or number < 0:
                return False
            flat[prefix.rstrip("/")] = number
            return True

        return flat if walk("", offset, 0) else None
    return offset_number(offset)


def offset_total(offset: dict[str, float] | float | None) -> float | None:
    if offset is None:
        return None
    if isinstance(offset, dict):
        return sum(value for value in offset.values() if value >= 0)
    return offset


def source_backlog(source: Mapping[str, Any]) -> float | None:
    """``latestOffset − endOffset`` of one progress source, in offset units, or ``None``.

    Dict offsets are paired by partition (partitions missing on either side are ignored,
    negative per-partition differences count as 0); plain numbers are subtracted.
    ``None`` when either offset is missing or not numeric, or the shapes differ.
    """
    latest = flatten_offsets(source.get("latestOffset"))
    end = flatten_offsets(source.get("endOffset"))
    if latest is None or end is None:
        return None
    if isinstance(latest, dict) and isinstance(end, dict):
        common = [key for key in latest if key in end]
        if not common and latest:
            return None
        return sum(max(0.0, latest[key] - end[key]) for key in common)
    if isinstance(latest, float) and isinstance(end, float):
        return max(0.0, latest - end)
    return None


def source_kind(source: Mapping[str, Any]) -> SourceKind:
    """The :class:`SourceKind` of a progress source, from its description and offsets."""
    description = source.get("description")
    text = description if isinstance(description, str) else ""
    if text.startswith(("RateStreamV2", "RateSource")):
        return SourceKind.RATE
    if text.startswith(("KafkaV2", "KafkaSource", "KafkaMicroBatchStream")):
        return SourceKind.KAFKA
    if text.startswith("FileStreamSource"):
        return SourceKind.FILE
    for key in ("endOffset", "latestOffset", "startOffset"):
        flat = flatten_offsets(source.get(key))
        if isinstance(flat, dict):
            return SourceKind.KAFKA if any("/" in k for k in flat) else SourceKind.PARTITIONED_LOG
        if isinstance(flat, float):
            return SourceKind.NUMERIC
    return SourceKind.OTHER


def progress_sources(progress: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    sources = progress.get("sources")
    if not isinstance(sources, list):
        return []
    return [s if isinstance(s, Mapping) else {} for s in sources]


def progress_start_s(progress: Mapping[str, Any]) -> float | None:
    stamp = progress.get("timestamp")
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def trigger_execution_s(progress: Mapping[str, Any]) -> float:
    durations = progress.get("durationMs")
    value = offset_number(durations.get("triggerExecution")) if isinstance(durations, Mapping) else None
    return max(0.0, value or 0.0) / 1000.0


# -- the rate source -----------------------------------------------------------------------------


def rate_creation_s(progresses: Sequence[Mapping[str, Any]], index: int = 0) -> float | None:
    """When the rate source ``index`` of these progresses was created, epoch seconds, or ``None``.

    Its ``latestOffset`` ``L`` is ``floor(t_call − c)`` seconds, fetched at ``t_call`` within
    ``[timestamp, timestamp + triggerExecution]``; so ``c`` lies in
    ``(timestamp − L − 1, timestamp + triggerExecution − L]``. The estimate is the middle of the
    intersection over all progresses; ``None`` when no progress has both or the bounds conflict.
    """
    low, high = -math.inf, math.inf
    for progress in progresses:
        sources = progress_sources(progress)
        if index >= len(sources) or source_kind(sources[index]) is not SourceKind.RATE:
            continue
        latest = flatten_offsets(sources[index].get("latestOffset"))
        start = progress_start_s(progress)
        if not isinstance(latest, float) or start is None:
            continue
        low = max(low, start - latest - 1.0)
        high = min(high, start + trigger_execution_s(progress) - latest)
    if not (math.isfinite(low) and math.isfinite(high)) or low > high + 0.05:
        return None
    return (low + min(high, low + 1.0)) / 2.0 if high > low else low


def batch_cut_s(progress: Mapping[str, Any], creation_s: float | None) -> float | None:
    """The moment a batch's end offsets were fixed (the end of the data span it carries), epoch s.

    For a query whose only source is the rate source with a known creation time ``creation_s``:
    ``creation_s + endOffset`` (exact, its offsets are generation time). Otherwise the batch's
    start (its ``timestamp``, where Spark fetches the latest offsets). ``None`` without a timestamp.
    """
    sources = progress_sources(progress)
    if creation_s is not None and len(sources) == 1 and source_kind(sources[0]) is SourceKind.RATE:
        end = flatten_offsets(sources[0].get("endOffset"))
        if isinstance(end, float):
            return creation_s + end
    return progress_start_s(progress)


def rate_rows_per_s(description: Any) -> float | None:
    match = _RATE_RPS.search(description) if isinstance(description, str) else None
    return float(match.group(1)) if match else None
