"""Streaming jobs, their per-job policy, metric snapshots and evaluations (one module per job of the
models: ``job``, ``job_policy``, ``samples``, ``rollups``)."""

from webapp.jobs.models.job import Job, _default_ui_hosts
from webapp.jobs.models.job_policy import JobPolicy
from webapp.jobs.models.rollups import MetricRollup, VertexRollup
from webapp.jobs.models.samples import (
    Evaluation,
    EvaluationDecision,
    EvaluationHold,
    MetricSnapshot,
    SampleRefused,
    VertexSnapshot,
    refuse_bad_numbers,
)

__all__ = ["Evaluation", "EvaluationDecision", "EvaluationHold", "Job", "JobPolicy", "MetricRollup", "MetricSnapshot",
           "SampleRefused", "VertexSnapshot", "VertexRollup", "_default_ui_hosts",
           "refuse_bad_numbers"]
