"""Parsers for the formatted SQL metric strings of Spark's ``/api/v1/.../sql?details=true``.

Spark renders SQL plan metrics as display strings, not numbers. The shapes seen in 4.x:

- counts: ``"4,000"`` (US grouping separators);
- sizes: ``"8.8 KiB"`` (``Utils.bytesToString``: B, KiB, MiB, GiB, TiB, PiB, EiB; one decimal);
- durations: ``"31 ms"``, ``"1.2 s"``, ``"3.5 m"``, ``"1.25 h"`` (``Utils.msDurationToString``);
- per-task statistics of sizes and timings::

      total (min, med, max (stageId: taskId))
      31 ms (14 ms, 17 ms, 17 ms (stage 28.0: task 82))

  where ``stage 28.0`` is stage id 28, attempt 0, of the task with the max value, and
  ``(driver)`` replaces the stage reference for driver-side metrics;
- per-task statistics without a total: ``"(min, med, max (stageId: taskId)):\\n(1, 1, 1 (stage 28.0: task 83))"``.

All parsers raise :class:`MetricStringError` (a ``ValueError``) with the offending text when it has
none of these shapes, when it is longer than :data:`MAX_METRIC_CHARS`, when its value does not fit
in 64 bits, when it is negative (counts, sizes and durations never are), or when its statistics
are out of order (``min ≤ med ≤ max``, as Spark computes them from one sorted list of tasks). Every
regular expression here runs in linear time (no two quantifiers compete for the same characters).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from scaling.policy.numbers import is_finite_number
from sparkclient.collector.sparkjson import Problem

__all__ = [
    "MetricStats",
    "MetricStringError",
    "parse_bytes",
    "parse_count",
    "parse_duration_ms",
    "parse_size_stats",
    "parse_stats",
    "stage_refs",
]

_BYTE_UNITS: dict[str, int] = {
    "B": 1,
    "KiB": 1024,
    "MiB": 1024**2,
    "GiB": 1024**3,
    "TiB": 1024**4,
    "PiB": 1024**5,
    "EiB": 1024**6,
}
_DURATION_UNITS_MS: dict[str, float] = {"ms": 1.0, "s": 1000.0, "m": 60_000.0, "h": 3_600_000.0}

#: Longest metric string parsed. Spark renders a few dozen characters; anything longer is refused
#: before a regex sees it, so no input can make a parser slow.
MAX_METRIC_CHARS = 1000

_STAGE_REF = re.compile(r"stage\s{1,8}(\d{1,18})\.(\d{1,9})\s{0,8}:\s{0,8}task\s{1,8}(\d{1,18})")
_STAGE_ONLY = re.compile(r"stage\s{1,8}(\d{1,18})\.(\d{1,9})")
_HEADER = re.compile(r"^\s*(?:total\s*)?\(min,\s*med,\s*max[^\n]*\n", re.IGNORECASE)
# A value: starts and ends with a character that is not a space, a comma or a parenthesis, so the
# spaces around it belong to the separators only (no two quantifiers compete for the same text).
_VALUE = r"[^,()\s](?:[^,()]*[^,()\s])?"
# "<total> (<min>, <med>, <max> (<where>))" or "(<min>, <med>, <max> (<where>))"
_STATS_BODY = re.compile(
    r"^\s*(?P<total>[^(\s](?:[^(]*[^(\s])?)?\s*"
    rf"\(\s*(?P<min>{_VALUE})\s*,\s*(?P<med>{_VALUE})\s*,\s*(?P<max>{_VALUE})"
    r"\s*(?:\((?P<where>[^()]*)\))?\s*\)\s*$"
)
_SCALED = re.compile(r"\s*((?:\d[\d,]*(?:\.\d+)?|\.\d+))\s*([A-Za-z]+)\s*")


class MetricStringError(ValueError):
    """A SQL metric string Spark cannot have rendered. ``problem``: a
    :class:`sparkclient.collector.sparkjson.Problem` (``MALFORMED``, ``TOO_LARGE``, ``NEGATIVE``,
    ``UNORDERED``); the message quotes the text."""

    def __init__(self, problem: Problem, message: str) -> None:
        self.problem = problem
        super().__init__(message)


def _bounded(text: str, what: str) -> str:
    if not isinstance(text, str):
        raise MetricStringError(Problem.WRONG_TYPE, f"not a Spark {what} metric: {text!r} (expected a string)")
    if len(text) > MAX_METRIC_CHARS:
        raise MetricStringError(Problem.TOO_LARGE,
                                f"not a Spark {what} metric: {len(text)} characters (at most {MAX_METRIC_CHARS})")
    return text


@dataclass(frozen=True)
class MetricStats:
    """A parsed per-task statistics metric.

    Values are in the base unit of the parser that produced them: milliseconds for
    :func:`parse_duration_ms`, bytes for :func:`parse_size_stats`, plain numbers for
    :func:`parse_stats` with :func:`parse_count`.

    ``total`` is ``None`` for the ``(min, med, max ...)`` shape that carries no total.
    ``stage`` is ``(stage_id, attempt_id)`` and ``task`` the task id of the max task, both
    ``None`` when the metric was measured on the driver (``on_driver``) or carries no reference.
    """

    total: int | None
    min: int | None
    med: int | None
    max: int | None
    stage: tuple[int, int] | None = None
    task: int | None = None
    on_driver: bool = False


def parse_count(text: str) -> int:
    """Parse a count such as ``"4,000"`` or ``"10"`` into an int.

    Raises :class:`MetricStringError` if ``text`` is not an integer with optional ``,`` separators.
    """
    cleaned = _bounded(text, "count").strip().replace(",", "")
    if cleaned.startswith("-") and re.fullmatch(r"-\d{1,18}", cleaned):
        raise MetricStringError(Problem.NEGATIVE, f"not a Spark count metric: {text!r} is negative")
    if not re.fullmatch(r"\d{1,18}", cleaned):
        raise MetricStringError(Problem.MALFORMED,
                                f"not a Spark count metric: {text!r} (expected digits such as '4,000')")
    return int(cleaned)


def _parse_scaled(text: str, units: dict[str, float] | dict[str, int], what: str) -> int:
    match = _SCALED.fullmatch(_bounded(text, what))
    if match is None and _SCALED.fullmatch(text.replace("-", "", 1)) is not None:
        raise MetricStringError(Problem.NEGATIVE, f"not a Spark {what} metric: {text!r} is negative")
    if match is None or match.group(2) not in units:
        raise MetricStringError(Problem.MALFORMED,
            f"not a Spark {what} metric: {text!r} (expected a number and one of {', '.join(units)})"
        )
    value = float(match.group(1).replace(",", "")) * units[match.group(2)]
    if not is_finite_number(value) or abs(value) > 2**63:
        raise MetricStringError(Problem.TOO_LARGE, f"not a Spark {what} metric: {text[:40]!r}... is out of range")
    return int(round(value))


def parse_bytes(text: str) -> int:
    """Parse a size such as ``"8.8 KiB"`` into bytes (``9011``), rounding to the nearest byte.

    A statistics string (``"total (min, med, max ...)\\n16.5 MiB (...)"``) yields its total.
    Raises :class:`MetricStringError` on any other shape.
    """
    if "(" in _bounded(text, "size"):
        stats = parse_size_stats(text)
        if stats.total is None:
            raise MetricStringError(Problem.MISSING, f"size statistics without a total: {text!r}")
        return stats.total
    return _parse_scaled(text, _BYTE_UNITS, "size")


def _duration_value(text: str) -> int:
    return _parse_scaled(text, _DURATION_UNITS_MS, "duration")


def parse_stats(text: str, parse_value: Callable[[str], int]) -> MetricStats:
    """Parse a per-task statistics string with ``parse_value`` for each of its numbers.

    Accepts, with or without the ``total (min, med, max (stageId: taskId))`` header line:
    ``"31 ms (14 ms, 17 ms, 17 ms (stage 28.0: task 82))"``,
    ``"(1, 1, 1 (stage 28.0: task 83))"``, ``"9.1 KiB (1.0 B, 2.0 KiB, 3.0 KiB (driver))"``,
    and a bare value (``"0 ms"``), which gives a total and no statistics.

    Raises :class:`MetricStringError` if the text matches none of these.
    """
    body = _HEADER.sub("", _bounded(text, "statistics"), count=1).strip()
    if "(" not in body:
        return MetricStats(total=parse_value(body), min=None, med=None, max=None)
    match = _STATS_BODY.match(body)
    if match is None:
        raise MetricStringError(
            Problem.MALFORMED, f"not a Spark metric statistics string: {text!r} "
            "(expected 'total (min, med, max (stage X.Y: task Z))')"
        )
    total_text = (match.group("total") or "").strip().rstrip(":").strip()
    where = (match.group("where") or "").strip()
    ref = _STAGE_REF.search(where)
    low, med, high = (parse_value(match.group(name)) for name in ("min", "med", "max"))
    if not low <= med <= high:
        raise MetricStringError(Problem.UNORDERED, f"not a Spark metric statistics string: {text[:80]!r} "
                                f"(min {low}, med {med}, max {high}: expected min <= med <= max)")
    return MetricStats(
        total=parse_value(total_text) if total_text else None,
        min=low,
        med=med,
        max=high,
        stage=(int(ref.group(1)), int(ref.group(2))) if ref else None,
        task=int(ref.group(3)) if ref else None,
        on_driver=where == "driver",
    )


def parse_duration_ms(text: str) -> MetricStats:
    """Parse a timing metric into milliseconds.

    ``parse_duration_ms("31 ms (14 ms, 17 ms, 17 ms (stage 28.0: task 82))")`` gives
    ``MetricStats(total=31, min=14, med=17, max=17, stage=(28, 0), task=82)``; a bare
    ``"1.2 s"`` gives ``total=1200`` and no statistics. Raises :class:`MetricStringError` on other shapes.
    """
    return parse_stats(text, _duration_value)


def parse_size_stats(text: str) -> MetricStats:
    """Parse a size metric (bare or per-task statistics) into bytes. Raises :class:`MetricStringError`."""
    return parse_stats(text, lambda value: _parse_scaled(value, _BYTE_UNITS, "size"))


def stage_refs(text: str) -> list[tuple[int, int]]:
    """All ``(stage_id, attempt_id)`` references in a metric string, in order, duplicates removed.

    Returns ``[]`` for strings without references (counts, bare sizes, driver-side metrics).
    """
    refs: list[tuple[int, int]] = []
    if not isinstance(text, str) or len(text) > 100 * MAX_METRIC_CHARS:
        return refs
    for match in _STAGE_ONLY.finditer(text):
        ref = (int(match.group(1)), int(match.group(2)))
        if ref not in refs:
            refs.append(ref)
    return refs
