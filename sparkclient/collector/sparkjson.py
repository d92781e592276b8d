"""Typed field access for JSON that comes from Spark (REST payloads, query progress).

Spark's JSON is a trust boundary: a field may be missing, null, of another type, negative, huge,
NaN or infinite. The readers here return a valid value or raise :class:`SparkDataError` naming
the field (``where`` + key, e.g. ``"stages[3].numTasks"``). A missing or null field gives the
reader's ``default``; a present field of the wrong type or out of range is an error, never
silently coerced.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

from scaling.policy.numbers import is_finite_number

__all__ = [
    "MAX_CORES",
    "MAX_COUNT",
    "Problem",
    "SparkDataError",
    "as_dict",
    "as_list",
    "finite",
    "get_count",
    "id_list",
    "get_dict",
    "get_float",
    "get_list",
    "get_str",
]

#: Counts above this are not Spark counts (2^53: beyond it floats lose integer precision).
MAX_COUNT = 2**53

#: The most cores a sample may report, per executor and in all: the bound the web app's policy
#: allows for ``max_cores`` (``webapp.jobs.policy_mapping``); a cluster reporting more is not read.
MAX_CORES = 4096


class Problem(StrEnum):
    """Why a field was refused."""

    WRONG_TYPE = "wrong-type"
    NEGATIVE = "negative"
    NOT_FINITE = "not-finite"
    TOO_LARGE = "too-large"
    MISSING = "missing"
    MALFORMED = "malformed"
    UNORDERED = "unordered"  # statistics out of order (min > med, med > max)


class SparkDataError(ValueError):
    """A field of Spark's JSON is not what Spark documents.

    Attributes: ``field`` (path of the field, e.g. ``"progress[batch 4].durationMs.addBatch"``),
    ``problem`` (:class:`Problem`), ``expected`` (what was expected, short), ``value`` (a short
    ``repr`` of what came, at most 80 characters).
    """

    def __init__(self, field: str, problem: Problem, expected: str, value: Any = None) -> None:
        shown = repr(value)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        self.field = field
        self.problem = problem
        self.expected = expected
        self.value = shown
        super().__init__(
            f"Spark data: field {field!r} is {problem.value} (expected {expected}, got {shown}); "
            "check that the URL points at a Spark driver UI of a supported version (Spark 4.x)"
        )


def _path(where: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{where}[{key}]"
    return f"{where}.{key}" if where else str(key)


def finite(value: Any, field: str, *, minimum: float | None = 0.0) -> float:
    """``value`` as a finite float (bools refused) that is ``>= minimum`` (``None``: no bound).

    Numeric strings are accepted (Spark renders some metrics, e.g. Kafka's, as strings).
    Raises :class:`SparkDataError` naming ``field``.
    """
    if isinstance(value, bool) or value is None:
        raise SparkDataError(field, Problem.WRONG_TYPE if value is not None else Problem.MISSING, "a number", value)
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            raise SparkDataError(field, Problem.WRONG_TYPE, "a number", value) from None
    elif isinstance(value, (int, float)):
        try:
            number = float(value)
        except OverflowError:
            raise SparkDataError(field, Problem.TOO_LARGE, f"a number below {MAX_COUNT}", value) from None
    else:
        raise SparkDataError(field, Problem.WRONG_TYPE, "a number", value)
    if not is_finite_number(number):
        raise SparkDataError(field, Problem.NOT_FINITE, "a finite number", value)
    if abs(number) > MAX_COUNT:
        raise SparkDataError(field, Problem.TOO_LARGE, f"a number below {MAX_COUNT}", value)
    if minimum is not None and number < minimum:
        raise SparkDataError(field, Problem.NEGATIVE, f"a number >= {minimum:g}", value)
    return number


def get_float(obj: Mapping[str, Any], key: str, where: str = "", *, default: float = 0.0,
              minimum: float | None = 0.0) -> float:
    """``obj[key]`` as a finite float ``>= minimum``; ``default`` when missing or null."""
    value = obj.get(key)
    if value is None:
        return default
    return finite(value, _path(where, key), minimum=minimum)


def get_count(obj: Mapping[str, Any], key: str, where: str = "", *, default: int = 0,
              minimum: int | None = 0) -> int:
    """``obj[key]`` as an integer count ``>= minimum``; ``default`` when missing or null.

    Integral floats (``4000.0``) are accepted; fractions, bools, strings are refused.
    """
    value = obj.get(key)
    if value is None:
        return default
    field = _path(where, key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SparkDataError(field, Problem.WRONG_TYPE, "an integer", value)
    number = finite(value, field, minimum=minimum)
    if number != int(number):
        raise SparkDataError(field, Problem.WRONG_TYPE, "an integer", value)
    return int(number)


def get_str(obj: Mapping[str, Any], key: str, where: str = "", *, default: str = "") -> str:
    """``obj[key]`` as a string; ``default`` when missing or null; numbers are refused."""
    value = obj.get(key)
    if value is None:
        return default
    if not isinstance(value, str):
        raise SparkDataError(_path(where, key), Problem.WRONG_TYPE, "a string", value)
    return value


def as_dict(value: Any, field: str) -> Mapping[str, Any]:
    """``value`` when it is a JSON object, else :class:`SparkDataError`."""
    if not isinstance(value, Mapping):
        raise SparkDataError(field, Problem.WRONG_TYPE if value is not None else Problem.MISSING,
                             "a JSON object", value)
    return value


def as_list(value: Any, field: str) -> Sequence[Any]:
    """``value`` when it is a JSON list, else :class:`SparkDataError`."""
    if not isinstance(value, list | tuple):
        raise SparkDataError(field, Problem.WRONG_TYPE if value is not None else Problem.MISSING,
                             "a JSON list", value)
    return value


def get_dict(obj: Mapping[str, Any], key: str, where: str = "") -> Mapping[str, Any]:
    """``obj[key]`` as a JSON object; ``{}`` when missing or null."""
    value = obj.get(key)
    return {} if value is None else as_dict(value, _path(where, key))


def get_list(obj: Mapping[str, Any], key: str, where: str = "") -> Sequence[Any]:
    """``obj[key]`` as a JSON list; ``[]`` when missing or null."""
    value = obj.get(key)
    return [] if value is None else as_list(value, _path(where, key))


def dicts(values: Any, field: str) -> list[Mapping[str, Any]]:
    """A JSON list whose items are all objects (e.g. ``/jobs``), else :class:`SparkDataError`."""
    items = as_list(values, field)
    for index, item in enumerate(items):
        as_dict(item, f"{field}[{index}]")
    return list(items)


def id_list(values: Sequence[Any], field: str) -> list[int]:
    """``values`` (a JSON list, e.g. ``stageIds`` or ``rddIds``) as ids: integers in ``[0, 2**53)``;
    else :class:`SparkDataError` naming ``field[position]``."""
    out = []
    for position, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**53:
            raise SparkDataError(f"{field}[{position}]", Problem.WRONG_TYPE, "an id (integer >= 0)", value)
        out.append(value)
    return out
