"""A job's scaling policy row (``JobPolicy``): options, restart strategy, guardrails, suspension."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models

from webapp.jobs.models.job import Job
from webapp.jobs.models.policy_fields import choices_enum, option_field
from webapp.jobs.policy_mapping import policy_errors


class JobPolicy(models.Model):
    """Per-job scaling policy. Names mirror Flink's ``job.autoscaler.*`` options (``scaling.Policy``),
    Flink's restart strategies (FLIP-160 / ``restart-strategy.*``) for retries, and the guardrails
    that bound auto-approval. Every option field is built from its row of ``scaling.policy.options.OPTIONS``
    (default, help, bounds, choices). ``clean()`` validates the whole row through ``scaling.Policy``."""

    Mode = choices_enum("mode")
    Alignment = choices_enum("alignment")
    Directions = choices_enum("guard_directions")
    RestartStrategy = choices_enum("restart_strategy")

    job = models.OneToOneField(Job, on_delete=models.CASCADE, related_name="policy")
    mode = option_field("mode")
    # --- the scaling algorithm and its options (scaling.Policy) ---------------------------------
    algorithm = option_field("algorithm")
    utilization_target = option_field("utilization_target")
    utilization_min = option_field("utilization_min")
    utilization_max = option_field("utilization_max")
    catch_up_duration_s = option_field("catch_up_duration_s")
    restart_time_s = option_field("restart_time_s")
    restart_time_tracking_enabled = option_field("restart_time_tracking_enabled")
    restart_time_limit_s = option_field("restart_time_limit_s")
    metric_window_s = option_field("metric_window_s")
    min_cores = option_field("min_cores")
    max_cores = option_field("max_cores")
    vertex_min_parallelism = option_field("vertex_min_parallelism")
    vertex_max_parallelism = option_field("vertex_max_parallelism")
    scale_up_max_factor = option_field("scale_up_max_factor")
    scale_down_max_factor = option_field("scale_down_max_factor")
    backlog_lag_threshold_s = option_field("backlog_lag_threshold_s")
    scale_down_interval_s = option_field("scale_down_interval_s")
    activation_evaluations = option_field("activation_evaluations")
    scale_down_veto_batch_ratio = option_field("scale_down_veto_batch_ratio")
    scale_down_veto_backlog_growth = option_field("scale_down_veto_backlog_growth")
    batch_overrun_ratio = option_field("batch_overrun_ratio")
    scale_up_min_efficiency = option_field("scale_up_min_efficiency")
    scaling_sources_enabled = option_field("scaling_sources_enabled")
    excluded_vertices = option_field("excluded_vertices")
    excluded_periods = option_field("excluded_periods")
    alignment = option_field("alignment")
    effectiveness_detection_enabled = option_field("effectiveness_detection_enabled")
    effectiveness_threshold = option_field("effectiveness_threshold")
    observed_scalability_enabled = option_field("observed_scalability_enabled")
    observed_scalability_min_observations = option_field("observed_scalability_min_observations")
    observed_scalability_coefficient_min = option_field("observed_scalability_coefficient_min")
    batch_ratio_scale_up = option_field("batch_ratio_scale_up")
    batch_ratio_scale_down = option_field("batch_ratio_scale_down")
    min_parallelism_increase = option_field("min_parallelism_increase")
    # --- guardrails for auto-approval --------------------------------------------------------------
    guard_max_change_factor = option_field("guard_max_change_factor")
    guard_max_executors = option_field("guard_max_executors")
    guard_directions = option_field("guard_directions")
    guard_excluded_periods = option_field("guard_excluded_periods")
    auto_approve_standby_wait_s = option_field("auto_approve_standby_wait_s")
    auto_approve_suspended = models.BooleanField(
        default=False, help_text="Set after any rollback: auto-approval stays off until a person turns it back on.")
    auto_approve_suspended_reason = models.TextField(blank=True, help_text="Why auto-approval was suspended.")
    auto_approve_suspended_at = models.DateTimeField(null=True, blank=True)
    # --- proposal lifetime, execution retries, verification ------------------------------------------
    revision_min_change = option_field("revision_min_change")
    withdraw_after_evaluations = option_field("withdraw_after_evaluations")
    proposal_ttl_s = option_field("proposal_ttl_s")
    restart_strategy = option_field("restart_strategy")
    restart_attempts = option_field("restart_attempts")
    restart_delay_s = option_field("restart_delay_s")
    restart_max_delay_s = option_field("restart_max_delay_s")
    restart_backoff_multiplier = option_field("restart_backoff_multiplier")
    failure_rate_max_failures = option_field("failure_rate_max_failures")
    failure_rate_interval_s = option_field("failure_rate_interval_s")
    verification_windows = option_field("verification_windows")
    verification_tolerance = option_field("verification_tolerance")
    # --- memory: the pressure gate and the recommend-only right-sizing (scaling.planner.memory) ---------------
    memory_gc_pressure_threshold = option_field("memory_gc_pressure_threshold")
    memory_heap_usage_threshold = option_field("memory_heap_usage_threshold")
    memory_tuning_overhead = option_field("memory_tuning_overhead")
    memory_pressure_growth = option_field("memory_pressure_growth")
    memory_min_mb = option_field("memory_min_mb")
    memory_max_mb = option_field("memory_max_mb")
    memory_apply = option_field("memory_apply")

    class Meta:
        verbose_name_plural = "job policies"

    def __str__(self) -> str:
        return f"policy of {self.job}"

    def clean(self) -> None:
        """Validate the options together (``scaling.Policy`` and the guardrails); errors name the field."""
        errors = policy_errors(self)
        if errors:
            raise ValidationError(errors)
