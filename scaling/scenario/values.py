"""The values of a scenario document (``scaling.scenario.format``): each check returns the typed value or
raises :class:`ScenarioError` with a one-line message naming the field (``steps[0].at_s: ...``)."""

from __future__ import annotations

import json
from typing import Any

from scaling.policy.numbers import is_finite_number

__all__ = ["MAX_NUMBER", "MAX_PARALLELISM", "ScenarioError", "as_object", "boolean", "check_keys", "fail", "integer",
           "number", "string"]


class ScenarioError(ValueError):
    """Invalid scenario input; the message is one line and names the field."""


def fail(field: str, message: str) -> ScenarioError:
    return ScenarioError(f"{field}: {message}")


def as_object(value: Any, field: str) -> dict:
    if not isinstance(value, dict):
        raise fail(field, f"must be an object, got {type(value).__name__}")
    return value


def check_keys(obj: dict, allowed: tuple[str, ...], field: str) -> None:
    for key in obj:
        if key not in allowed:
            raise fail(f"{field}.{key}" if field else key, "unknown field")


MAX_NUMBER = 1e15
"""Numbers in a scenario are at most this large (records, rates, seconds); beyond it they are typos."""
MAX_PARALLELISM = 32768
"""Flink's largest max parallelism (key groups); also the bound on tasks, partitions and executors."""


def number(value: Any, field: str, *, minimum: float | None = 0.0) -> float:
    if not is_finite_number(value) or not -MAX_NUMBER <= value <= MAX_NUMBER:
        raise fail(field, f"must be a finite number within ±{MAX_NUMBER:g}, got {json.dumps(value)}")
    if minimum is not None and value < minimum:
        raise fail(field, f"must be >= {minimum:g}, got {value}")
    return value


def integer(value: Any, field: str, *, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise fail(field, f"must be an integer, got {json.dumps(value)}")
    if value < minimum:
        raise fail(field, f"must be >= {minimum}, got {value}")
    if value > MAX_PARALLELISM:
        raise fail(field, f"must be <= {MAX_PARALLELISM}, got {value}")
    return value


def boolean(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise fail(field, f"must be true or false, got {json.dumps(value)}")
    return value


def string(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise fail(field, f"must be a non-empty string, got {json.dumps(value)}")
    return value
