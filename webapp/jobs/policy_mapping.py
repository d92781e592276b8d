"""A job's policy row (``JobPolicy``) mapped to ``scaling.Policy`` values, and its validation (the admin
form calls ``clean()``)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from scaling.algorithms import algorithm_names
from scaling.periods import parse_period
from scaling.policy import Policy, PolicyError

if TYPE_CHECKING:
    from webapp.jobs.models import JobPolicy

#: ``JobPolicy`` fields passed to ``scaling.Policy`` as they are (same names).
POLICY_FIELDS = (
    "utilization_target", "utilization_min", "utilization_max", "scale_up_max_factor", "scale_down_max_factor",
    "vertex_min_parallelism", "vertex_max_parallelism", "catch_up_duration_s", "restart_time_s",
    "backlog_lag_threshold_s", "scale_down_interval_s", "scaling_sources_enabled", "alignment",
    "effectiveness_detection_enabled", "effectiveness_threshold", "restart_time_tracking_enabled",
    "restart_time_limit_s", "algorithm", "batch_ratio_scale_up", "batch_ratio_scale_down",
    "min_parallelism_increase", "activation_evaluations",
)


def scaling_policy(policy: JobPolicy) -> Policy:
    """The ``scaling.Policy`` of a job's policy row.

    Raises:
        PolicyError: an option is out of range; the message starts with the option's name.
    """
    values = {name: getattr(policy, name) for name in POLICY_FIELDS}
    for name in ("utilization_target", "utilization_min", "utilization_max", "scale_up_max_factor",
                 "scale_down_max_factor", "catch_up_duration_s", "restart_time_s", "backlog_lag_threshold_s",
                 "scale_down_interval_s", "effectiveness_threshold", "restart_time_limit_s",
                 "batch_ratio_scale_up", "batch_ratio_scale_down"):
        if isinstance(values[name], int) and not isinstance(values[name], bool):
            values[name] = float(values[name])
    return Policy(**values, excluded_vertices=tuple(policy.excluded_vertices or ()),
                  excluded_periods=tuple(policy.excluded_periods or ()))


#: Bounds of every numeric ``JobPolicy`` field, inclusive, in the field's unit (seconds, cores,
#: partitions, shares 0..1, factors). A value outside, or not finite, is refused by ``clean()``: an
#: unbounded value (1e308) overflowed every later date or back-off computation (issue 15).
DAY_S, WEEK_S = 86_400.0, 604_800.0
BOUNDS: dict[str, tuple[float, float]] = {
    "utilization_target": (0.05, 1.0), "utilization_min": (0.0, 1.0), "utilization_max": (0.0, 1.0),
    "catch_up_duration_s": (1.0, DAY_S), "restart_time_s": (0.0, DAY_S), "restart_time_limit_s": (0.0, DAY_S),
    "metric_window_s": (1.0, DAY_S), "min_cores": (1, 4096), "max_cores": (1, 4096),
    "vertex_min_parallelism": (1, 100_000), "vertex_max_parallelism": (1, 100_000),
    "scale_up_max_factor": (0.0001, 100_000.0), "scale_down_max_factor": (0.0, 1.0),
    "backlog_lag_threshold_s": (0.0, WEEK_S), "scale_down_interval_s": (0.0, WEEK_S),
    "effectiveness_threshold": (0.0, 1.0), "batch_ratio_scale_up": (0.0, 100.0),
    "batch_ratio_scale_down": (0.0, 100.0), "min_parallelism_increase": (1, 100_000),
    "activation_evaluations": (1, 100),
    "guard_max_change_factor": (1.0, 1000.0), "guard_max_executors": (1, 4096),
    "proposal_ttl_s": (1.0, WEEK_S), "restart_attempts": (0, 100), "restart_delay_s": (0.0, DAY_S),
    "restart_max_delay_s": (0.0, DAY_S), "restart_backoff_multiplier": (1.0, 100.0),
    "failure_rate_max_failures": (1, 1000), "failure_rate_interval_s": (1.0, WEEK_S),
    "verification_windows": (1, 1000), "verification_tolerance": (0.0, 1.0),
}


def bound_errors(policy: JobPolicy) -> dict[str, str]:
    """The numeric fields of ``policy`` that are not finite or outside :data:`BOUNDS`, with why."""
    errors = {}
    for name, (low, high) in BOUNDS.items():
        value = getattr(policy, name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or not low <= value <= high:
            errors[name] = f"{name} must be a finite number from {low:g} to {high:g}, got {value!r}"
    return errors


def _field_of(message: str) -> str:
    name = message.split(":", 1)[0].strip()
    return name if name in POLICY_FIELDS or name in ("excluded_vertices", "excluded_periods") else "__all__"


def policy_errors(policy: JobPolicy) -> dict[str, list[str]]:
    """Validation errors of a policy row, keyed by field (empty when valid)."""
    errors: dict[str, list[str]] = {}

    def add(field: str, message: str) -> None:
        errors.setdefault(field, []).append(message)

    out_of_bounds = bound_errors(policy)
    for name, message in out_of_bounds.items():
        add(name, message)
    # Chosen from the registry by name; a dotted path typed by a person is never imported.
    if policy.algorithm not in algorithm_names():
        add("algorithm", f"unknown algorithm {str(policy.algorithm)[:100]!r}: choose one of {', '.join(algorithm_names())}")

    for name in ("excluded_vertices", "excluded_periods", "guard_excluded_periods"):
        value = getattr(policy, name)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            add(name, "must be a JSON list of strings")
    if "guard_excluded_periods" not in errors:
        for period in policy.guard_excluded_periods:
            try:
                parse_period(period)
            except PolicyError as exc:
                add("guard_excluded_periods", str(exc).replace("excluded_periods", "guard_excluded_periods"))
    if not errors.get("excluded_vertices") and not errors.get("excluded_periods") and not out_of_bounds:
        try:
            scaling_policy(policy)
        except (PolicyError, TypeError) as exc:
            add(_field_of(str(exc)), str(exc))
    if policy.min_cores and policy.max_cores and policy.min_cores > policy.max_cores:
        add("min_cores", f"min_cores {policy.min_cores} is above max_cores {policy.max_cores}")
    if policy.restart_strategy == "exponential-delay" and policy.restart_max_delay_s < policy.restart_delay_s:
        add("restart_max_delay_s", "must be at least restart_delay_s (the first back-off)")
    return errors
