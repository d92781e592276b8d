"""A job's scaling policy row (``JobPolicy``): options, restart strategy, guardrails, suspension."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from webapp.jobs.models.job import Job
from webapp.jobs.policy_mapping import policy_errors


class JobPolicy(models.Model):
    """Per-job scaling policy. Names mirror Flink's ``job.autoscaler.*`` options (``scaling.Policy``),
    Flink's restart strategies (FLIP-160 / ``restart-strategy.*``) for retries, and the guardrails
    that bound auto-approval. ``clean()`` validates the whole row through ``scaling.Policy``."""

    class Mode(models.TextChoices):
        ADVISOR = "advisor", "advisor (proposals only, never executed)"
        MANUAL = "manual", "manual (a person approves)"
        AUTO = "auto", "auto (auto-approve inside the guardrails)"

    class Alignment(models.TextChoices):
        BALANCED = "balanced", "balanced"
        EVENLY_SPREAD = "evenly_spread", "evenly spread"
        OFF = "off", "off"

    class Directions(models.TextChoices):
        UP = "up", "scale-ups only"
        DOWN = "down", "scale-downs only"
        BOTH = "both", "scale-ups and scale-downs"

    class RestartStrategy(models.TextChoices):
        NONE = "none", "none (no retry)"
        FIXED_DELAY = "fixed-delay", "fixed delay"
        EXPONENTIAL_DELAY = "exponential-delay", "exponential delay"
        FAILURE_RATE = "failure-rate", "failure rate"

    job = models.OneToOneField(Job, on_delete=models.CASCADE, related_name="policy")
    mode = models.CharField(max_length=20, choices=Mode.choices, default=Mode.MANUAL,
                            help_text="advisor: proposals are shown, never executed. manual: a person approves "
                                      "each proposal. auto: proposals inside the guardrails are approved by the "
                                      "policy, the others wait for a person.")
    # --- the scaling algorithm and its options (scaling.Policy) ---------------------------------
    algorithm = models.CharField(
        max_length=200, default="ds2",
        help_text="The scaling policy, by its name in the registry (scaling/algorithms.py): ds2 (FLIP-271 / "
                  "DS2, default), batch-ratio (SPARK-12133) or min-increase (FLIP-160). Any other name is "
                  "refused; nothing named here is imported.")
    utilization_target = models.FloatField(
        default=0.7, validators=[MinValueValidator(0.05), MaxValueValidator(1.0)],
        help_text="job.autoscaler.utilization.target: the share of each core the plan aims to keep busy.")
    utilization_min = models.FloatField(null=True, blank=True, validators=[MinValueValidator(0), MaxValueValidator(1)],
                                        help_text="Lower edge of the band; empty = target − 0.3.")
    utilization_max = models.FloatField(null=True, blank=True, validators=[MinValueValidator(0), MaxValueValidator(1)],
                                        help_text="Upper edge of the band; empty = target + 0.3.")
    catch_up_duration_s = models.FloatField(default=120.0, validators=[MinValueValidator(1)],
                                            help_text="job.autoscaler.catch-up.duration: seconds to drain the backlog.")
    restart_time_s = models.FloatField(default=15.0, validators=[MinValueValidator(0)],
                                       help_text="job.autoscaler.restart.time: expected rescale downtime, seconds.")
    restart_time_tracking_enabled = models.BooleanField(
        default=False, help_text="job.autoscaler.restart.time-tracking.enabled: plan with the measured rescale "
                                 "downtimes instead of restart_time_s.")
    restart_time_limit_s = models.FloatField(
        default=900.0, validators=[MinValueValidator(0)],
        help_text="job.autoscaler.restart.time-tracking.limit: cap on the tracked restart time, seconds "
                  "(Flink's default, 15 min).")
    metric_window_s = models.FloatField(default=45.0, validators=[MinValueValidator(1)],
                                        help_text="job.autoscaler.metrics.window: seconds of metrics per evaluation.")
    min_cores = models.PositiveIntegerField(default=1, validators=[MinValueValidator(1)],
                                            help_text="Fewest cores (executors × cores each) to run with.")
    max_cores = models.PositiveIntegerField(default=8, validators=[MinValueValidator(1)],
                                            help_text="Most cores the planner may propose.")
    vertex_min_parallelism = models.PositiveIntegerField(
        default=1, validators=[MinValueValidator(1)],
        help_text="job.autoscaler.vertex.min-parallelism: fewest partitions of one stage.")
    vertex_max_parallelism = models.PositiveIntegerField(
        default=64, validators=[MinValueValidator(1)],
        help_text="job.autoscaler.vertex.max-parallelism: most partitions of one stage.")
    scale_up_max_factor = models.FloatField(
        default=100000.0, validators=[MinValueValidator(0.0001)],
        help_text="job.autoscaler.scale-up.max-factor: a vertex grows at most by 1 + this factor per evaluation.")
    scale_down_max_factor = models.FloatField(
        default=0.6, validators=[MinValueValidator(0), MaxValueValidator(1)],
        help_text="job.autoscaler.scale-down.max-factor: a vertex shrinks at most by this share per evaluation.")
    backlog_lag_threshold_s = models.FloatField(
        default=300.0, validators=[MinValueValidator(0)],
        help_text="job.autoscaler.backlog-processing.lag-threshold: above this lag, seconds, no scale-down.")
    scale_down_interval_s = models.FloatField(
        default=3600.0, validators=[MinValueValidator(0)],
        help_text="job.autoscaler.scale-down.interval (FLINK-36018): how long a scale-down is held, seconds.")
    activation_evaluations = models.PositiveIntegerField(
        default=1, validators=[MinValueValidator(1), MaxValueValidator(100)],
        help_text="DS2's activation time (not a Flink option): how many evaluations in a row must recommend a "
                  "rescale in the same direction before it is proposed. 1 proposes on the first (Flink's "
                  "behaviour); 2 lets a short spike pass.")
    scaling_sources_enabled = models.BooleanField(
        default=True, help_text="job.autoscaler.scaling.sources.enabled: whether source stages may be rescaled.")
    excluded_vertices = models.JSONField(
        default=list, blank=True,
        help_text='job.autoscaler.vertex.exclude.ids: vertex ids never rescaled, as a JSON list ["v1"].')
    excluded_periods = models.JSONField(
        default=list, blank=True,
        help_text='job.autoscaler.excluded.periods (Flink CalendarUtils): JSON list of expressions, each a daily '
                  'window "HH:mm[:ss[:SSS]]-HH:mm[:ss[:SSS]]" (UTC, both ends inclusive, start before end: across '
                  'midnight is two windows, "22:00-23:59:59:999" and "00:00-06:00"), a Quartz cron expression '
                  'of 6 or 7 fields ("sec min hour day-of-month month day-of-week [year]", ? allowed, no L/W/#), '
                  'or both joined by "&&"; 5-field Unix cron is still accepted. Plans are computed but not '
                  "executable inside them (scaling/periods.py).")
    alignment = models.CharField(
        max_length=20, choices=Alignment.choices, default=Alignment.BALANCED,
        help_text="job.autoscaler.scaling.parallelism-alignment.mode (FLIP-586, Flink's BuiltInAlignmentMode): how a "
                  "stage's new parallelism aligns to its partitions or key groups. balanced: the first value that "
                  "divides them evenly, or a load-reducing one; evenly_spread: only values that divide them evenly; "
                  "off: no alignment. Alignment never vetoes a scaling: without an aligned value the target stays.")
    effectiveness_detection_enabled = models.BooleanField(
        default=False, help_text="job.autoscaler.scaling.effectiveness.detection.enabled: stop repeating "
                                 "scale-ups that did not raise the processing rate.")
    effectiveness_threshold = models.FloatField(
        default=0.1, validators=[MinValueValidator(0), MaxValueValidator(1)],
        help_text="job.autoscaler.scaling.effectiveness.threshold: the share of the expected gain that counts "
                  "as effective.")
    batch_ratio_scale_up = models.FloatField(
        default=0.9, validators=[MinValueValidator(0)],
        help_text="batch-ratio algorithm: spark.streaming.dynamicAllocation.scalingUpRatio (SPARK-12133).")
    batch_ratio_scale_down = models.FloatField(
        default=0.3, validators=[MinValueValidator(0)],
        help_text="batch-ratio algorithm: spark.streaming.dynamicAllocation.scalingDownRatio (SPARK-12133).")
    min_parallelism_increase = models.PositiveIntegerField(
        default=1, validators=[MinValueValidator(1)],
        help_text="min-increase algorithm: jobmanager.adaptive-scheduler.min-parallelism-increase (FLIP-160).")
    # --- guardrails for auto-approval --------------------------------------------------------------
    guard_max_change_factor = models.FloatField(
        default=2.0, validators=[MinValueValidator(1.0)],
        help_text="Auto-approve only when no knob (cores or the partitions of a stage) changes by more than "
                  "this factor in one proposal (2 = at most double or halve).")
    guard_max_executors = models.PositiveIntegerField(
        default=8, validators=[MinValueValidator(1)],
        help_text="Quota: auto-approve only proposals that use at most this many executors (cores).")
    guard_directions = models.CharField(
        max_length=10, choices=Directions.choices, default=Directions.UP,
        help_text="Which directions may be auto-approved, e.g. scale-ups only.")
    guard_excluded_periods = models.JSONField(
        default=list, blank=True,
        help_text='Change windows closed to auto-approval: JSON list in the syntax of excluded_periods '
                  '(daily "HH:mm[:ss]-HH:mm[:ss]" windows in UTC, start before end, or cron expressions). '
                  "Proposals made inside one wait for a person.")
    auto_approve_suspended = models.BooleanField(
        default=False, help_text="Set after any rollback: auto-approval stays off until a person turns it back on.")
    auto_approve_suspended_reason = models.TextField(blank=True, help_text="Why auto-approval was suspended.")
    auto_approve_suspended_at = models.DateTimeField(null=True, blank=True)
    # --- proposal lifetime, execution retries, verification ------------------------------------------
    revision_min_change = models.FloatField(
        default=0.3, validators=[MinValueValidator(0)],
        help_text="A pending proposal is revised in place only when the demand it answers (busy cores at the target "
                  "rate) moved by more than this share (0.3 = 30 %), or its configuration would no longer carry the "
                  "demand inside the utilization band. A backlog growing while it waits is not a revision.")
    withdraw_after_evaluations = models.PositiveIntegerField(
        default=3, validators=[MinValueValidator(1)],
        help_text="Withdraw a pending proposal after this many evaluations in a row that no longer support it "
                  "(load inside the band, or pointing the other way).")
    proposal_ttl_s = models.FloatField(
        default=900.0, validators=[MinValueValidator(1)],
        help_text="A pending proposal expires after this many seconds without a decision.")
    restart_strategy = models.CharField(
        max_length=20, choices=RestartStrategy.choices, default=RestartStrategy.EXPONENTIAL_DELAY,
        help_text="How a failed execution is retried (Flink restart strategies, FLIP-160). After the retries are "
                  "spent the job is rolled back to its last configuration that succeeded.")
    restart_attempts = models.PositiveIntegerField(
        default=3, help_text="fixed-delay / exponential-delay: retries after the first failed attempt.")
    restart_delay_s = models.FloatField(
        default=10.0, validators=[MinValueValidator(0)],
        help_text="fixed-delay and failure-rate: seconds between attempts; exponential-delay: the first back-off.")
    restart_max_delay_s = models.FloatField(
        default=120.0, validators=[MinValueValidator(0)], help_text="exponential-delay: the longest back-off, seconds.")
    restart_backoff_multiplier = models.FloatField(
        default=2.0, validators=[MinValueValidator(1)], help_text="exponential-delay: back-off growth per failure.")
    failure_rate_max_failures = models.PositiveIntegerField(
        default=3, validators=[MinValueValidator(1)],
        help_text="failure-rate: give up when more failures than this fall within the interval.")
    failure_rate_interval_s = models.FloatField(
        default=300.0, validators=[MinValueValidator(1)], help_text="failure-rate: the interval, seconds.")
    verification_windows = models.PositiveIntegerField(
        default=2, validators=[MinValueValidator(1)],
        help_text="After an execution, verify the prediction once the new configuration ran this many metric "
                  "windows.")
    verification_tolerance = models.FloatField(
        default=0.25, validators=[MinValueValidator(0), MaxValueValidator(1)],
        help_text="Relative shortfall of the realized true processing rate against the prediction that still "
                  "counts as verified.")

    class Meta:
        verbose_name_plural = "job policies"

    def __str__(self) -> str:
        return f"policy of {self.job}"

    def clean(self) -> None:
        """Validate the options together (``scaling.Policy`` and the guardrails); errors name the field."""
        errors = policy_errors(self)
        if errors:
            raise ValidationError(errors)
