"""Per-minute roll-ups of the metric snapshots (``MetricRollup`` with its ``VertexRollup`` rows): what the
job page's charts draw once the raw snapshots of a minute are past the raw retention window
(``webapp.loop.retention``).

A roll-up holds the numbers of the minute's snapshots *with data* (``batches > 0``), aggregated as their
meaning requires: rates and ratios averaged weighted by each snapshot's window (records/s, a ratio),
backlog the last and the largest (records), batches summed, executors and cores the last. A minute
whose snapshots all lack data has ``data_s == 0`` and null rates: a gap in the charts, never a zero."""

from __future__ import annotations

from django.db import models

from webapp.jobs.models.job import Job


class MetricRollup(models.Model):
    """One job's snapshots of one minute (``minute``: its start, UTC)."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="rollups")
    minute = models.DateTimeField(help_text="Start of the minute, UTC.")
    snapshots = models.PositiveIntegerField(help_text="Snapshots rolled up (with or without data).")
    window_s = models.FloatField(help_text="Σ window_s of all snapshots, seconds.")
    data_s = models.FloatField(help_text="Σ window_s of the snapshots with data, seconds (the weights).")
    batches = models.PositiveIntegerField(help_text="Σ micro-batches completed.")
    arrival_rate_per_s = models.FloatField(null=True, help_text="Window-weighted mean, records/s.")
    processed_rate_per_s = models.FloatField(null=True, help_text="Window-weighted mean, records/s.")
    batch_ratio = models.FloatField(null=True, help_text="Window-weighted mean batch ratio R.")
    backlog_last = models.BigIntegerField(null=True,
                                          help_text="Backlog of the minute's last snapshot with data, records.")
    backlog_max = models.BigIntegerField(null=True, help_text="Largest backlog of the minute, records.")
    executors = models.PositiveIntegerField(null=True, help_text="Executors of the last snapshot with data.")
    cores = models.PositiveIntegerField(null=True, help_text="Cores of the last snapshot with data.")

    class Meta:
        ordering = ["-minute"]
        constraints = [models.UniqueConstraint(fields=["job", "minute"], name="one_rollup_per_job_minute")]
        indexes = [models.Index(fields=["minute"])]


class VertexRollup(models.Model):
    """One stage over a roll-up's minute: its utilization (0..1) weighted by the windows with data."""

    rollup = models.ForeignKey(MetricRollup, on_delete=models.CASCADE, related_name="vertices")
    vertex_id = models.CharField(max_length=200)
    name = models.CharField(max_length=500, blank=True)
    position = models.PositiveIntegerField(default=0)
    utilization = models.FloatField(help_text="Window-weighted mean busy share of the stage's slots, 0..1.")

    class Meta:
        ordering = ["position"]
        constraints = [models.UniqueConstraint(fields=["rollup", "vertex_id"], name="one_vertex_rollup_per_stage")]
