"""A job's policy row as ``scaling`` values, and its validation (the admin form calls ``clean()``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

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
    "min_parallelism_increase",
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


def _field_of(message: str) -> str:
    name = message.split(":", 1)[0].strip()
    return name if name in POLICY_FIELDS or name in ("excluded_vertices", "excluded_periods") else "__all__"


def policy_errors(policy: JobPolicy) -> dict[str, list[str]]:
    """Validation errors of a policy row, keyed by field (empty when valid)."""
    from scaling.periods import parse_period  # noqa: PLC0415
    from scaling.policies import resolve  # noqa: PLC0415

    errors: dict[str, list[str]] = {}

    def add(field: str, message: str) -> None:
        errors.setdefault(field, []).append(message)

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
    if not errors.get("excluded_vertices") and not errors.get("excluded_periods"):
        try:
            scaling_policy(policy)
        except (PolicyError, TypeError) as exc:
            add(_field_of(str(exc)), str(exc))
        else:
            try:
                resolve(policy.algorithm)
            except PolicyError as exc:
                add("algorithm", str(exc))
    if policy.min_cores and policy.max_cores and policy.min_cores > policy.max_cores:
        add("min_cores", f"min_cores {policy.min_cores} is above max_cores {policy.max_cores}")
    if policy.restart_strategy == "exponential-delay" and policy.restart_max_delay_s < policy.restart_delay_s:
        add("restart_max_delay_s", "must be at least restart_delay_s (the first back-off)")
    return errors
