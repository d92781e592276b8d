"""The shape of a policy option (``scaling.policy.options.OPTIONS`` is the table): as Flink's
``ConfigOption``, a name, kind, unit, default, inclusive bounds, the Flink key it mirrors, help text
and, where our default differs from Flink's, why; and the one check of a value against it."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from scaling.policy.numbers import is_finite_number


class PolicyError(ValueError):
    """A policy option is out of range; the message names the option."""


class Kind(StrEnum):
    """What values an option takes."""

    NUMBER = "number"          # a finite float
    INTEGER = "integer"
    SWITCH = "boolean"
    CHOICE = "choice"          # one of ``Option.choices``' values
    NAME = "name"              # a non-empty string checked elsewhere (the algorithm registry)
    STRINGS = "list of strings"


class Scope(StrEnum):
    """Where an option lives."""

    SHARED = "policy and job"  # ``scaling.Policy`` (scenarios) and a job's policy in the web app
    POLICY = "policy"          # ``scaling.Policy`` (scenarios) only
    WEB = "job"                # a job's policy in the web app only (lifecycle, guardrails, retries)


@dataclass(frozen=True)
class Option:
    """One option.

    Attributes:
        bounds: ``(low, high)``, inclusive, in ``unit``; None for an unbounded or non-numeric option.
        flink_key: the ``job.autoscaler.*`` (or other Flink) key it mirrors, else None.
        flink_default: Flink's default where it differs from ``default`` (else None); then
            ``differs_because`` says why ours differs.
        choices: ``(value, label)`` pairs of a ``CHOICE`` option.
        nullable: None is a value ("unset"); ``help`` says what it means.
        enabled_by: a ``SWITCH`` option: the bounds are checked only while it is on (Flink
            ``AutoscalerValidator.validateNumberIfEnabled``): off, the value has no effect.
    """

    name: str
    kind: Kind
    default: object
    help: str
    unit: str = ""
    bounds: tuple[float, float] | None = None
    flink_key: str | None = None
    flink_default: object = None
    differs_because: str | None = None
    choices: tuple[tuple[str, str], ...] = ()
    nullable: bool = False
    enabled_by: str | None = None
    scope: Scope = Scope.SHARED

    @property
    def values(self) -> tuple[str, ...]:
        """The values of a ``CHOICE`` option."""
        return tuple(value for value, _ in self.choices)

    @property
    def in_policy(self) -> bool:
        """A ``scaling.Policy`` field (and a scenario's ``policy`` key)."""
        return self.scope in (Scope.SHARED, Scope.POLICY)

    @property
    def per_job(self) -> bool:
        """A field of a job's policy in the web app."""
        return self.scope in (Scope.SHARED, Scope.WEB)


def number_text(value: float) -> str:
    """A bound or default for people: whole numbers in full (2147483647, not 2.14748e+09)."""
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:g}"


def _kind_error(option: Option, value: object) -> str | None:
    """Why ``value`` is not of ``option``'s kind, or None."""
    if value is None:
        return None if option.nullable else "must be set, got null"
    kind = option.kind
    if kind == Kind.NUMBER:
        if not is_finite_number(value):
            return f"must be a finite number, got {value!r}"
    elif kind == Kind.INTEGER:
        if isinstance(value, bool) or not isinstance(value, int):
            return f"must be an integer, got {value!r}"
    elif kind == Kind.SWITCH:
        if not isinstance(value, bool):
            return f"must be true or false, got {value!r}"
    elif kind == Kind.CHOICE:
        if value not in option.values:
            return f"must be one of {', '.join(option.values)}, got {value!r}"
    elif kind == Kind.NAME:
        if not isinstance(value, str) or not value:
            return f"must be a non-empty name, got {value!r}"
    elif not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        return f"must be a list of strings, got {value!r}"
    return None


def option_error(option: Option, value: object, *, enabled: bool = True) -> str | None:
    """Why ``value`` is not acceptable for ``option`` (``"<name>: <why>"``), or None. ``enabled``:
    whether ``option.enabled_by`` is on (the bounds of a switched-off option are not checked)."""
    why = _kind_error(option, value)
    if why is None and option.bounds is not None and value is not None and enabled:
        low, high = option.bounds
        if not low <= value <= high:
            when = f" when {option.enabled_by} is on" if option.enabled_by else ""
            why = f"must be within [{number_text(low)}, {number_text(high)}]{when}, got {value!r}"
    return f"{option.name}: {why}" if why else None
