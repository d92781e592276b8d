"""Streaming jobs, their vertices, their per-job policy, metric snapshots and evaluations."""

from __future__ import annotations

import math

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models


def _default_ui_hosts() -> list[str]:
    from webapp.jobs.sparkui import DEFAULT_UI_HOSTS  # noqa: PLC0415

    return list(DEFAULT_UI_HOSTS)


class Job(models.Model):
    """A Spark Structured Streaming query run by a pipeline runner.

    ``name`` is the runner's job key on Redis (``ss:runner:{name}``). ``config`` is the running
    configuration, ``{knob: int}``; ``knobs`` the pipeline's knob declarations (the pipeline contract,
    :class:`sparkclient.contract.Knob` as dicts); ``plan_stages`` the stages of its physical plan
    (:mod:`sparkclient.binding`), from which each stage is bound to the knob that sets its tasks;
    ``capacity`` the most executors its cluster can give (0: unknown).

    Registration (``webapp.jobs.services.job_register``: the API's ``POST /api/jobs/``,
    ``manage.py register_job``; the admin runs the same ``clean()``): the name, where its Spark UI may
    be read (``spark_ui_url``, or the discovery rule ``spark_ui_hosts`` + ``spark_ui_ports``, see
    ``webapp.jobs.sparkui``), its knobs (``webapp.jobs.knobs``) and its policy.
    """

    class Health(models.TextChoices):
        COLLECTING = "collecting", "collecting metrics"
        RUNNING = "running", "running"
        DEGRADED = "degraded", "degraded"
        DOWN = "down", "down"

    name = models.SlugField(max_length=100, unique=True)
    query_name = models.CharField(max_length=200, blank=True)
    topic = models.CharField(max_length=100, blank=True, help_text="The partitioned log the source reads.")
    config = models.JSONField(default=dict, blank=True, help_text="Running configuration: the value of each knob.")
    knobs = models.JSONField(default=list, blank=True,
                             help_text='The pipeline\'s knobs, a JSON list of {"name", "default", "min", "max", '
                                       '"sets"}: sets is one of executors, shuffle_partitions, state_partitions, '
                                       'source_partitions, repartition, other. The runner reports them too.')
    spark_ui_url = models.CharField(
        max_length=300, blank=True,
        help_text="Fixed Spark UI URL, e.g. http://driver-host:4040: the runner must report exactly this one. "
                  "Leave empty to use the discovery rule below.")
    spark_ui_hosts = models.JSONField(
        default=_default_ui_hosts, blank=True,
        help_text='Discovery rule: hosts the runner may report its UI on, as a JSON list of names, "*.domain", '
                  'IP addresses or networks, e.g. ["127.0.0.1", "*.spark.svc.cluster.local", "10.42.0.0/16"].')
    spark_ui_ports = models.CharField(
        max_length=11, default="4040-4056", blank=True,
        help_text="Discovery rule: the UI port or port range, e.g. 4040-4056 (spark.ui.port and the 16 next "
                  "ones Spark tries, spark.port.maxRetries).")
    plan_stages = models.JSONField(default=list, blank=True,
                                   help_text="The stages of the query's physical plan, as the runner read them.")
    capacity = models.PositiveIntegerField(default=0, help_text="Most executors the cluster can give (0: unknown).")
    health = models.CharField(max_length=20, choices=Health.choices, default=Health.COLLECTING)
    last_error = models.TextField(blank=True)
    health_reason = models.JSONField(
        default=dict, blank=True,
        help_text='Structured reason of the health, when the collector refused to read: {"code", "reported", '
                  '"allowed"}; last_error is its text.')
    scaler_state = models.JSONField(default=dict, blank=True,
                                    help_text="The autoscaler's memory between evaluations (FLIP-271 state store): "
                                              "pending delayed scale-downs, applied scalings, measured restart times.")
    config_changed_at = models.DateTimeField(null=True, blank=True,
                                             help_text="When the running configuration last changed; "
                                                       "the metric window starts after it.")
    scale_up_block = models.JSONField(
        default=dict, blank=True,
        help_text="Set when an execution is verified ineffective: {proposal, knobs, since, reason}. Scale-ups of "
                  "those knobs are neither proposed nor approved until a person clears it on the job page.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        """Validate the registration: the UI rule (``webapp.jobs.sparkui.rule_errors``) and the knobs
        (``webapp.jobs.knobs.knob_errors``); errors name the field."""
        from django.core.exceptions import ValidationError  # noqa: PLC0415

        from webapp.jobs.knobs import KnobListError, parse_knobs  # noqa: PLC0415
        from webapp.jobs.sparkui import rule_errors  # noqa: PLC0415

        errors = rule_errors(spark_ui_url=self.spark_ui_url, spark_ui_hosts=self.spark_ui_hosts,
                             spark_ui_ports=self.spark_ui_ports)
        try:
            self.knobs = [knob.to_dict() for knob in parse_knobs(self.knobs)]  # stored as the runner reports them
        except KnobListError as exc:
            errors["knobs"] = exc.errors
        if errors:
            raise ValidationError(errors)

    def ui_rule(self):
        """The registered ``webapp.jobs.sparkui.UiRule`` (None when there is none)."""
        from webapp.jobs.sparkui import UiRule  # noqa: PLC0415

        return UiRule.of(spark_ui_url=self.spark_ui_url, spark_ui_hosts=self.spark_ui_hosts,
                         spark_ui_ports=self.spark_ui_ports)

    def knob_specs(self) -> tuple:
        """The knob declarations as :class:`sparkclient.contract.Knob` values (invalid entries skipped)."""
        from sparkclient.contract import Knob, KnobError  # noqa: PLC0415

        out = []
        for item in self.knobs or ():
            try:
                out.append(Knob.from_dict(item))
            except KnobError:
                continue
        return tuple(out)


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
        help_text="The scaling policy in the registry (scaling/policies.py): ds2 (FLIP-271 / DS2, default), "
                  "batch-ratio (SPARK-12133), min-increase (FLIP-160), or a dotted path package.module:Class.")
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
    scaling_sources_enabled = models.BooleanField(
        default=True, help_text="job.autoscaler.scaling.sources.enabled: whether source stages may be rescaled.")
    excluded_vertices = models.JSONField(
        default=list, blank=True,
        help_text='job.autoscaler.vertex.exclude.ids: vertex ids never rescaled, as a JSON list ["v1"].')
    excluded_periods = models.JSONField(
        default=list, blank=True,
        help_text='job.autoscaler.excluded.periods (Flink CalendarUtils): JSON list of expressions, each a daily '
                  'window "HH:mm[:ss]-HH:mm[:ss]" (UTC, may cross midnight, end exclusive), a Quartz cron expression '
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
        help_text='Change windows closed to auto-approval: JSON list of "HH:MM-HH:MM" (UTC) or cron expressions. '
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
        from django.core.exceptions import ValidationError  # noqa: PLC0415

        from webapp.jobs.policy_mapping import policy_errors  # noqa: PLC0415

        errors = policy_errors(self)
        if errors:
            raise ValidationError(errors)


class SampleRefused(ValueError):
    """A metric row holds a non-finite or negative number; it is not stored (``field``, ``value``)."""

    def __init__(self, model: str, field: str, value: object) -> None:
        self.field = field
        self.value = value
        super().__init__(f"{model} refused: {field} must be a finite number >= 0, got {value!r}")


def refuse_bad_numbers(row: models.Model) -> None:
    """Raise :class:`SampleRefused` when a numeric field of ``row`` is NaN, infinite or negative.

    The collector's ``sparkclient.topology.JobSample`` refuses such values already; this guard keeps
    any other writer from storing them, since one ``inf`` breaks the JSON of the API and the pages.
    """
    for field in row._meta.concrete_fields:
        if field.primary_key or field.is_relation or not isinstance(field, (models.FloatField, models.IntegerField)):
            continue
        value = getattr(row, field.attname)
        if value is None or isinstance(value, bool):
            continue
        if not isinstance(value, (int, float)) or (isinstance(value, float) and not math.isfinite(value)) or value < 0:
            raise SampleRefused(type(row).__name__, field.name, value)


class _CheckedRows(models.QuerySet):
    def bulk_create(self, objs, *args, **kwargs):  # type: ignore[no-untyped-def]
        objs = list(objs)
        for obj in objs:
            refuse_bad_numbers(obj)
        return super().bulk_create(objs, *args, **kwargs)


class MetricSnapshot(models.Model):
    """One collect: job-level metrics over ``window_s`` seconds ending at ``collected_at``.

    Refuses (:class:`SampleRefused`) a non-finite or negative number on save and bulk create."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="snapshots")
    collected_at = models.DateTimeField(db_index=True)
    run_id = models.CharField(max_length=64, blank=True)
    config = models.JSONField(default=dict)
    window_s = models.FloatField()
    batches = models.PositiveIntegerField(default=0)
    backlog = models.BigIntegerField(default=0)
    arrival_rate_per_s = models.FloatField(default=0.0)
    input_rate_per_s = models.FloatField(default=0.0)
    processed_rate_per_s = models.FloatField(default=0.0)
    batch_duration_s = models.FloatField(default=0.0)
    trigger_interval_s = models.FloatField(default=1.0)
    batch_overhead_s = models.FloatField(default=0.0)
    batch_ratio = models.FloatField(default=0.0)
    executors = models.PositiveIntegerField(default=1)
    cores = models.PositiveIntegerField(default=1)
    state_rows = models.BigIntegerField(default=0)
    state_bytes = models.BigIntegerField(default=0)
    errors = models.JSONField(default=list)

    objects = _CheckedRows.as_manager()

    class Meta:
        ordering = ["-collected_at"]
        indexes = [models.Index(fields=["job", "-collected_at"])]

    def save(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        refuse_bad_numbers(self)
        super().save(*args, **kwargs)


class VertexSnapshot(models.Model):
    """Raw sums of one vertex (stage) over the snapshot's window."""

    snapshot = models.ForeignKey(MetricSnapshot, on_delete=models.CASCADE, related_name="vertices")
    vertex_id = models.CharField(max_length=200)
    name = models.CharField(max_length=500, blank=True)
    position = models.PositiveIntegerField(default=0)
    is_source = models.BooleanField(default=False)
    tasks = models.PositiveIntegerField(default=1)
    busy_s = models.FloatField(default=0.0, help_text="Σ executorRunTime, task-seconds.")
    records_in = models.BigIntegerField(default=0)
    records_out = models.BigIntegerField(default=0)
    spill_bytes = models.BigIntegerField(default=0)
    upstream = models.JSONField(default=list)

    objects = _CheckedRows.as_manager()

    class Meta:
        ordering = ["position"]

    def save(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        refuse_bad_numbers(self)
        super().save(*args, **kwargs)


class Evaluation(models.Model):
    """One run of the planner over the metric window; ``plan`` is the serialized JobPlan.

    ``direction`` is where the load points (up: above the band, down: below it, none: inside it).
    ``hold`` names the rule of the live loop that kept a ``scale`` decision from becoming a proposal
    (``webapp.proposals.reasons.EvaluationHold``), with its data in ``hold_detail``. ``held_scale_down``
    is a delayed scale-down (FLINK-36018) while it is held: ``{executors, config, plan}``, the plan as
    it would run (what "apply now" proposes).
    """

    class Direction(models.TextChoices):
        UP = "up", "scale-up"
        DOWN = "down", "scale-down"
        NONE = "none", "inside the band"

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="evaluations")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    decision = models.CharField(max_length=20)
    reasons = models.JSONField(default=list)
    plan = models.JSONField(default=dict)
    proposed_config = models.JSONField(default=dict)
    window_s = models.FloatField(default=0.0)
    direction = models.CharField(max_length=10, choices=Direction.choices, default=Direction.NONE)
    hold = models.CharField(max_length=40, blank=True, default="")
    hold_detail = models.JSONField(default=dict, blank=True)
    held_scale_down = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-created_at"]
