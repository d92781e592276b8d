"""Streaming jobs, their vertices, their per-job policy, metric snapshots and evaluations."""

from __future__ import annotations

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models


class Job(models.Model):
    """A Spark Structured Streaming query run by a pipeline runner.

    ``name`` is the runner's job key on Redis (``ss:runner:{name}``). ``config`` is the running
    configuration (cores and partitions per knob); ``knobs`` lists, in stage order, which
    configuration key sets the partitions of each stage of the micro-batch job.
    """

    class Health(models.TextChoices):
        COLLECTING = "collecting", "collecting metrics"
        RUNNING = "running", "running"
        DEGRADED = "degraded", "degraded"
        DOWN = "down", "down"

    name = models.SlugField(max_length=100, unique=True)
    query_name = models.CharField(max_length=200, blank=True)
    topic = models.CharField(max_length=100, blank=True, help_text="The partitioned log the source reads.")
    config = models.JSONField(default=dict, help_text="Running configuration: cores and partitions per knob.")
    knobs = models.JSONField(default=list, help_text="Per stage, in order: the config key setting its partitions.")
    health = models.CharField(max_length=20, choices=Health.choices, default=Health.COLLECTING)
    last_error = models.TextField(blank=True)
    config_changed_at = models.DateTimeField(null=True, blank=True,
                                             help_text="When the running configuration last changed; "
                                                       "the metric window starts after it.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class JobPolicy(models.Model):
    """Per-job scaling policy. Names mirror Flink's ``job.autoscaler.*`` options."""

    class Mode(models.TextChoices):
        ADVISOR = "advisor", "advisor (proposals only)"
        MANUAL = "manual", "manual (a person approves)"

    job = models.OneToOneField(Job, on_delete=models.CASCADE, related_name="policy")
    mode = models.CharField(max_length=20, choices=Mode.choices, default=Mode.MANUAL)
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
    metric_window_s = models.FloatField(default=45.0, validators=[MinValueValidator(1)],
                                        help_text="job.autoscaler.metrics.window: seconds of metrics per evaluation.")
    min_cores = models.PositiveIntegerField(default=1, validators=[MinValueValidator(1)],
                                            help_text="Fewest cores (executors × cores each) to run with.")
    max_cores = models.PositiveIntegerField(default=8, validators=[MinValueValidator(1)],
                                            help_text="Most cores (a quota).")
    vertex_max_parallelism = models.PositiveIntegerField(
        default=64, validators=[MinValueValidator(1)],
        help_text="job.autoscaler.vertex.max-parallelism: most partitions of one stage.")

    def __str__(self) -> str:
        return f"policy of {self.job}"


class MetricSnapshot(models.Model):
    """One collect: job-level metrics over ``window_s`` seconds ending at ``collected_at``."""

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

    class Meta:
        ordering = ["-collected_at"]
        indexes = [models.Index(fields=["job", "-collected_at"])]


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

    class Meta:
        ordering = ["position"]


class Evaluation(models.Model):
    """One run of the planner over the metric window; ``plan`` is the serialized JobPlan."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="evaluations")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    decision = models.CharField(max_length=20)
    reasons = models.JSONField(default=list)
    plan = models.JSONField(default=dict)
    proposed_config = models.JSONField(default=dict)
    window_s = models.FloatField(default=0.0)

    class Meta:
        ordering = ["-created_at"]
