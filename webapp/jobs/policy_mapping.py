"""A job's policy row (``JobPolicy``) mapped to ``scaling.Policy`` values, and its validation (the admin
form and the API call ``clean()``). Which fields are ``scaling.Policy`` options, their kinds and their
bounds all come from the one option table, ``scaling.policy.options.OPTIONS``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scaling.planner.algorithms import algorithm_names
from scaling.policy.option_types import Kind, PolicyError
from scaling.policy.options import OPTION, job_options, policy_options
from scaling.policy.options import errors as option_errors
from scaling.policy.periods import parse_period
from scaling.policy.policy import Policy

if TYPE_CHECKING:
    from webapp.jobs.models import JobPolicy

#: ``JobPolicy`` fields passed to ``scaling.Policy`` (same names): the table's shared options.
POLICY_FIELDS = tuple(o.name for o in policy_options() if o.per_job)

#: Bounds of every bounded ``JobPolicy`` option, inclusive, in the option's unit (the table's). A
#: value outside, or not finite, is refused by ``clean()``: an unbounded value (1e308) overflowed
#: every later date or back-off computation.
BOUNDS: dict[str, tuple[float, float]] = {o.name: o.bounds for o in job_options() if o.bounds is not None}


def scaling_policy(policy: JobPolicy) -> Policy:
    """The ``scaling.Policy`` of a job's policy row.

    Raises:
        PolicyError: an option is out of range; the message starts with the option's name.
    """
    values = {}
    for name in POLICY_FIELDS:
        value, kind = getattr(policy, name), OPTION[name].kind
        if kind == Kind.NUMBER and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        elif kind == Kind.STRINGS and isinstance(value, list):
            value = tuple(value)
        values[name] = value
    return Policy(**values)


def _field_of(message: str) -> str:
    name = message.split(":", 1)[0].strip()
    return name if name in OPTION else "__all__"


def policy_errors(policy: JobPolicy) -> dict[str, list[str]]:
    """Validation errors of a policy row, keyed by field (empty when valid): each option against its
    row of the table, then the rules between options (``scaling.Policy``, cores, back-off)."""
    errors: dict[str, list[str]] = {}

    def add(field: str, message: str) -> None:
        errors.setdefault(field, []).append(message)

    per_option = option_errors({o.name: getattr(policy, o.name) for o in job_options()})
    for message in per_option:
        add(_field_of(message), message)
    # Chosen from the registry by name; a dotted path typed by a person is never imported.
    if policy.algorithm not in algorithm_names():
        known = ", ".join(algorithm_names())
        add("algorithm", f"unknown algorithm {str(policy.algorithm)[:100]!r}: choose one of {known}")
    if "guard_excluded_periods" not in errors:
        for period in policy.guard_excluded_periods:
            try:
                parse_period(period)
            except PolicyError as exc:
                add("guard_excluded_periods", str(exc).replace("excluded_periods", "guard_excluded_periods"))
    if not per_option:  # scaling.Policy would refuse the first of them again
        try:
            scaling_policy(policy)
        except (PolicyError, TypeError) as exc:
            add(_field_of(str(exc)), str(exc))
    if not errors.get("min_cores") and not errors.get("max_cores") and policy.min_cores > policy.max_cores:
        add("min_cores", f"min_cores {policy.min_cores} is above max_cores {policy.max_cores}")
    memory_bounds_read = not errors.get("memory_min_mb") and not errors.get("memory_max_mb")
    if memory_bounds_read and policy.memory_min_mb > policy.memory_max_mb:
        add("memory_min_mb", f"memory_min_mb {policy.memory_min_mb} is above memory_max_mb {policy.memory_max_mb}")
    if policy.restart_strategy == "exponential-delay" and not errors.get("restart_delay_s") \
            and not errors.get("restart_max_delay_s") and policy.restart_max_delay_s < policy.restart_delay_s:
        add("restart_max_delay_s", "must be at least restart_delay_s (the first back-off)")
    return errors
