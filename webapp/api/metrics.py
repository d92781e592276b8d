"""``/metrics``: the autoscaler's own metrics in the Prometheus text format.

Per job and vertex, FLIP-271's "scaling metrics" as the newest evaluation computed them
(utilization, true processing rate, target data rate, recommended parallelism), the job's latest
snapshot (backlog, rates, batch ratio, cores), and gauges of proposals by status and executions by outcome.
A fixed number of queries, whatever the number of jobs. Requires a token of a user with a role
(``Authorization: Token <key>``; Prometheus: ``authorization: {type: Token, credentials: <key>}``),
a session of one, or a client address in ``METRICS_ALLOWED_IPS``.
"""

from __future__ import annotations

from django.db.models import Count, OuterRef, Subquery
from django.http import HttpResponse
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.renderers import BaseRenderer
from rest_framework.views import APIView

from scaling.words.reason_text import LOAD_DEFINITION, LOAD_NAME
from webapp.accounts.access import MetricsAccess
from webapp.jobs.models import Evaluation, Job, MetricSnapshot
from webapp.proposals.models import Execution, Proposal

#: (metric suffix, plan field, help) of the per-vertex gauges (FLIP-271 scaling metrics).
VERTEX_GAUGES = [
    ("utilization", "utilization", "Busy share of the vertex's task slots over the metric window (0..1)."),
    ("true_processing_rate", "true_processing_rate", "Records per busy core-second the vertex processes (DS2)."),
    ("true_output_rate", "true_output_rate", "Records per busy core-second the vertex emits (DS2)."),
    ("target_data_rate", "target_data_rate", "Records/s the vertex must process at the target (FLIP-271)."),
    ("catch_up_data_rate", "catch_up_data_rate", "Extra records/s to drain the backlog within the catch-up duration."),
    ("parallelism", "current", "Partitions (tasks per batch) of the vertex now."),
    ("recommended_parallelism", "proposed", "Partitions the newest evaluation recommends."),
    ("ideal_parallelism", "ideal_parallelism", "DS2's ideal parallelism: cores the vertex would keep busy."),
]
#: (metric suffix, snapshot field, help) of the per-job gauges from the latest snapshot.
JOB_GAUGES = [
    ("backlog_records", "backlog", "Source backlog: latest minus end offset, summed over partitions."),
    ("arrival_rate", "arrival_rate_per_s", "Records/s arriving at the sources."),
    ("processing_rate", "processed_rate_per_s", "Records/s the job processed."),
    ("batch_ratio", "batch_ratio", "SPARK-12133 batch ratio R: batch duration / trigger interval."),
    ("cores", "cores", "Cores the job runs with."),
    ("executors", "executors", "Executors the job runs with."),
]


def _number(value) -> float | None:
    """A plan's number as a gauge value (infinity included), None when the plan has none."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class ScalingCollector:
    """Reads the database at scrape time (no state kept between scrapes)."""

    def collect(self):
        now = timezone.now()
        newest = MetricSnapshot.objects.filter(job=OuterRef("pk")).order_by("-collected_at").values("pk")[:1]
        newest_eval = Evaluation.objects.filter(job=OuterRef("pk")).order_by("-created_at").values("pk")[:1]
        jobs = list(Job.objects.select_related("policy").order_by("name")
                    .annotate(snapshot_id=Subquery(newest), evaluation_id=Subquery(newest_eval)))
        snapshots = MetricSnapshot.objects.in_bulk([j.snapshot_id for j in jobs if j.snapshot_id])
        evaluations = Evaluation.objects.in_bulk([j.evaluation_id for j in jobs if j.evaluation_id])

        health = GaugeMetricFamily("sparkscaler_job_health", "1 for the job's current health.",
                                   labels=["job", "health"])
        mode = GaugeMetricFamily("sparkscaler_job_policy_mode", "1 for the job's policy mode.", labels=["job", "mode"])
        age = GaugeMetricFamily("sparkscaler_job_metrics_age_seconds", "Seconds since the latest snapshot.",
                                labels=["job"])
        job_gauges = {name: GaugeMetricFamily(f"sparkscaler_job_{name}", text, labels=["job"])
                      for name, _field, text in JOB_GAUGES}
        job_util = GaugeMetricFamily("sparkscaler_job_utilization", "Σ busy / cores over the metric window.",
                                     labels=["job"])
        job_load = GaugeMetricFamily("sparkscaler_job_load", f"The newest plan's {LOAD_NAME}: {LOAD_DEFINITION}.",
                                     labels=["job"])
        cores_needed = GaugeMetricFamily("sparkscaler_job_recommended_cores", "Cores the newest evaluation recommends.",
                                         labels=["job"])
        vertex_gauges = {name: GaugeMetricFamily(f"sparkscaler_vertex_{name}", text, labels=["job", "vertex"])
                         for name, _field, text in VERTEX_GAUGES}
        for job in jobs:
            health.add_metric([job.name, job.health], 1)
            mode.add_metric([job.name, job.policy.mode], 1)
            snapshot = snapshots.get(job.snapshot_id)
            if snapshot is not None:
                age.add_metric([job.name], (now - snapshot.collected_at).total_seconds())
                for name, field, _text in JOB_GAUGES:
                    job_gauges[name].add_metric([job.name], float(getattr(snapshot, field)))
            evaluation = evaluations.get(job.evaluation_id)
            plan = evaluation.job_plan if evaluation is not None else None
            if plan is None:
                continue
            for family, field in ((job_util, "utilization"), (job_load, "load"),
                                  (cores_needed, "executors_proposed")):
                value = _number(getattr(plan, field))
                if value is not None:
                    family.add_metric([job.name], value)
            for vertex in plan.vertices:
                for name, field, _text in VERTEX_GAUGES:
                    value = _number(getattr(vertex, field))
                    if value is not None:
                        vertex_gauges[name].add_metric([job.name, vertex.vertex_id], value)
        yield from (health, mode, age, *job_gauges.values(), job_util, job_load, cores_needed,
                    *vertex_gauges.values())

        # Gauges: a count of proposals in a status goes down when they leave it (a counter never does).
        proposals = GaugeMetricFamily("sparkscaler_proposals", "Proposals by job and current status.",
                                      labels=["job", "status"])
        for row in Proposal.objects.values("job__name", "status").annotate(n=Count("id")).order_by():
            proposals.add_metric([row["job__name"], row["status"]], row["n"])
        yield proposals
        executions = GaugeMetricFamily("sparkscaler_executions", "Executions by job and current outcome "
                                       "(running ones become succeeded or failed).", labels=["job", "outcome"])
        for row in Execution.objects.values("proposal__job__name", "status").annotate(n=Count("id")).order_by():
            executions.add_metric([row["proposal__job__name"], row["status"]], row["n"])
        yield executions


class PrometheusRenderer(BaseRenderer):
    media_type = "text/plain"
    format = "prometheus"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return data if isinstance(data, (bytes, str)) else str(data)


class PrometheusOnly(BaseContentNegotiation):
    """One representation whatever the ``Accept`` header: DRF negotiates before it checks
    permissions, so an anonymous ``Accept: text/html`` would get 406 instead of 401."""

    def select_parser(self, request, parsers):
        return parsers[0] if parsers else None

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


@extend_schema(exclude=True)
class MetricsView(APIView):
    """The Prometheus exposition of :class:`ScalingCollector` (text/plain whatever ``Accept`` says)."""

    permission_classes = [MetricsAccess]
    renderer_classes = [PrometheusRenderer]
    content_negotiation_class = PrometheusOnly

    def get(self, request) -> HttpResponse:
        registry = CollectorRegistry(auto_describe=False)
        registry.register(ScalingCollector())
        return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)


metrics = MetricsView.as_view()
