"""What the collector stores (``MetricSnapshot`` with its ``VertexSnapshot`` rows, refusing bad numbers)
and what the evaluator stores (``Evaluation``)."""

from __future__ import annotations

from django.db import models

from scaling.policy.numbers import is_finite_number
from scaling.values.reasons import Decision
from webapp.jobs.models.job import Job
from webapp.jobs.plans import StoredPlanMixin

#: ``Evaluation.decision``: the planner's job-level outcome (``scaling.values.reasons.Decision``).
EvaluationDecision = models.TextChoices("EvaluationDecision", [(d.name, (d.value, d.value)) for d in Decision])


class EvaluationHold(models.TextChoices):
    """Why a ``scale`` evaluation did not become a proposal (``Evaluation.hold``; data in ``hold_detail``,
    text in ``webapp.proposals.reason_text``)."""

    NONE = "", "not held"
    # After an execution, until its verification has measured the realized capacity (the restart's
    # backlog and a fresh JVM's warm-up batches are expected, not a reason to scale up).
    AWAITING_VERIFICATION = "awaiting_verification", "awaiting verification"
    # Realized capacity matches the prediction: the backlog of the restart drains as predicted.
    RESTART_CATCH_UP = "restart_catch_up", "restart catch-up"
    # An execution was verified ineffective: scale-ups of its knobs wait until a person clears the block.
    SCALE_UP_BLOCKED = "scale_up_blocked", "scale-up blocked"
    # A sample of the window is not ready (``scaling.values.readiness``): no scale-down on it, whatever the
    # algorithm planned.
    SAMPLES_NOT_READY = "samples_not_ready", "samples not ready"


class SampleRefused(ValueError):
    """A metric row holds a non-finite or negative number; it is not stored (``field``, ``value``)."""

    def __init__(self, model: str, field: str, value: object) -> None:
        self.field = field
        self.value = value
        super().__init__(f"{model} refused: {field} must be a finite number >= 0, got {value!r}")


def refuse_bad_numbers(row: models.Model) -> None:
    """Raise :class:`SampleRefused` when a numeric field of ``row`` is NaN, infinite or negative.

    The collector's ``sparkclient.collector.sample.JobSample`` refuses such values already; this guard keeps
    any other writer from storing them, since one ``inf`` breaks the JSON of the API and the pages.
    """
    for field in row._meta.concrete_fields:
        if field.primary_key or field.is_relation or not isinstance(field, (models.FloatField, models.IntegerField)):
            continue
        value = getattr(row, field.attname)
        if value is None or isinstance(value, bool):
            continue
        if not is_finite_number(value) or value < 0:
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
    rest_requests = models.PositiveIntegerField(
        null=True, blank=True, help_text="Spark REST requests this collect made (retries included; at most "
                                         "SCALER_COLLECT_MAX_REQUESTS); empty when not counted.")
    not_ready = models.JSONField(
        default=list, db_default=[], blank=True, help_text="Why the sample is not ready: [{code, data}] "
        "(scaling.values.readiness.SampleIssue); empty: ready. A window holding one never scales down.")
    gc_share = models.FloatField(null=True, blank=True, help_text="Share of the window's task time spent in GC "
                                 "(Σ jvmGcTime / Σ executorRunTime of its stages, 0..1); empty when unknown.")
    heap_peak_bytes = models.BigIntegerField(null=True, blank=True, help_text="Heap used at its peak in the window "
                                             "(JVMHeapMemory of its stages' peakExecutorMetrics), bytes; empty "
                                             "when unknown.")
    heap_max_bytes = models.BigIntegerField(null=True, blank=True, help_text="The executors' heap maximum, bytes; "
                                            "empty when unknown.")
    state_memory_bytes = models.BigIntegerField(null=True, blank=True, help_text="The state stores' memory over "
                                                "every stateful operator (memoryUsedBytes and the RocksDB memory "
                                                "metrics), bytes; empty without a stateful operator.")
    nonheap_peak_bytes = models.BigIntegerField(null=True, blank=True, help_text="The highest memory an executor "
                                                "used beyond its heap at peak (off-heap, direct and mapped pools, "
                                                "Python workers), bytes; empty when unknown.")
    memory = models.JSONField(default=dict, blank=True, help_text="The window's memory signals per executor, stage "
                              "and state operator (sparkclient.collector.memory.MemorySample.to_json).")

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
    busy_max_s = models.FloatField(
        null=True, blank=True, help_text="The busiest task's busy time, seconds per task (compare busy_s / tasks): "
        "per batch the slowest task on the cores it had (sparkclient.collector.sample.VertexSample.busy_max_s); "
        "empty when Spark's task summaries were not available.")
    records_in = models.BigIntegerField(default=0)
    records_out = models.BigIntegerField(default=0)
    spill_bytes = models.BigIntegerField(default=0)
    upstream = models.JSONField(default=list)
    span_s = models.FloatField(default=0.0, db_default=0.0,
                               help_text="Seconds spanned by the batches counted here; 0: the snapshot's window_s "
                                         "(sparkclient.collector.sample.VertexSample.span_s).")

    objects = _CheckedRows.as_manager()

    class Meta:
        ordering = ["position"]

    @property
    def paced_busy_s(self) -> float:
        """Task-seconds at the busiest task's pace, ``busy_max_s × tasks``; ``busy_s`` (the mean's)
        when the busiest task was not measured, as the metric window counts such a sample."""
        return self.busy_max_s * self.tasks if self.busy_max_s is not None else self.busy_s

    def save(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        refuse_bad_numbers(self)
        super().save(*args, **kwargs)


class Evaluation(StoredPlanMixin, models.Model):
    """One run of the planner over the metric window; ``plan`` is the serialized JobPlan
    (``JobPlan.to_json``, read back as ``job_plan``), ``reasons`` its reasons (``reason_values``).

    ``direction`` is where the load points (up: above the band, down: below it, none: inside it).
    ``hold`` names the rule of the live loop that kept a ``scale`` decision from becoming a proposal
    (:class:`EvaluationHold`), with its data in ``hold_detail``. ``held_scale_down`` is a delayed
    scale-down (FLINK-36018) while it is held: ``{executors, cores, config, plan}``, the plan as it
    would run (what "apply now" proposes; ``JobPlan.to_json``).
    """

    class Direction(models.TextChoices):
        UP = "up", "scale-up"
        DOWN = "down", "scale-down"
        NONE = "none", "inside the band"

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="evaluations")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    decision = models.CharField(max_length=20, choices=EvaluationDecision.choices)
    reasons = models.JSONField(default=list)
    plan = models.JSONField(default=dict)
    proposed_config = models.JSONField(default=dict)
    window_s = models.FloatField(default=0.0)
    direction = models.CharField(max_length=10, choices=Direction.choices, default=Direction.NONE)
    hold = models.CharField(max_length=40, blank=True, default=EvaluationHold.NONE, choices=EvaluationHold.choices)
    hold_detail = models.JSONField(default=dict, blank=True)
    held_scale_down = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-created_at"]
