"""Metric collection: the runner's status, the progress it published and the Spark REST API, read
into one ``MetricSnapshot`` per collect interval with a ``VertexSnapshot`` per stage."""

from __future__ import annotations

import json
import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from scaling.values.readiness import issues_to_json
from sparkclient.collector.collect import collect_sample
from sparkclient.collector.progress import read_progress
from sparkclient.collector.rest import SparkAnswerRefused, SparkRestClient, SparkRestError, deadline_transport
from sparkclient.collector.sample import JobSample, SampleError
from sparkclient.collector.snapshot import infer_trigger_interval_s
from sparkclient.collector.sparkjson import SparkDataError
from sparkclient.contract import control
from sparkclient.contract.binding import plan_stages_from_json
from sparkclient.contract.messages import ProtocolError, RunnerStatus
from sparkclient.contract.spec import KnobError, knobs_from_json, validate_values
from webapp.jobs.connect import AddressRefused, GuardedTransport
from webapp.jobs.models import Job, MetricSnapshot, VertexSnapshot
from webapp.jobs.redis import get_redis
from webapp.jobs.runnerdown import runner_down_reason
from webapp.jobs.sparkui import Refusal, UiTarget, ui_target
from webapp.loop.throttle import cluster_key
from webapp.proposals.reason_text import reason_text

logger = logging.getLogger(__name__)

#: Seconds a collect window ends before "now": the listener publishes a batch's progress just after it.
PUBLISH_LAG_S = 1.0


def runner_status(*, job: Job) -> RunnerStatus:
    """The runner's parsed status hash ``ss:runner:{job}`` (all fields empty when no runner reported).

    Raises:
        sparkclient.contract.ProtocolError: a malformed field (Redis contents are input).
    """
    return control.read_status(get_redis(), job.name)


class KnobsDiffer(ValueError):
    """The runner declares other knobs (names, targets or bounds) than the job's registration."""


def _sync_runner_state(job: Job, status: RunnerStatus) -> None:
    """Adopt the runner's knob values, plan stages, capacity and cluster (``webapp.loop.throttle.cluster_key``;
    the runner is the source of truth for what runs). Knob declarations are adopted only while the job has
    none registered (first use); after that a runner declaring others is refused, so whoever can write
    Redis cannot widen the bounds the autoscaler respects: re-register the job's knobs to change them.

    Raises:
        KnobsDiffer: the declarations differ from the registered ones (nothing is adopted).
        sparkclient.contract.spec.KnobError / ValueError: malformed declarations, values or plan stages.
    """
    updates: dict = {}
    if status.knob_specs:
        declared = knobs_from_json(status.knob_specs)
        registered = job.knob_specs()
        if registered and [k.to_dict() for k in declared] != [k.to_dict() for k in registered]:
            differ = sorted({k.name for k in declared} ^ {k.name for k in registered}
                            | {a.name for a in declared for b in registered if a.name == b.name and a != b})
            raise KnobsDiffer(f"the runner declares other knobs than the job's registration ({', '.join(differ)}): "
                              "re-register the job's knobs (admin, API or register_job) to accept them")
        if not registered:
            updates["knobs"] = [k.to_dict() for k in declared]
    if status.knobs and status.knobs != job.config:
        validate_values(job.knob_specs() or knobs_from_json(status.knob_specs or "[]"), status.knobs)
        updates["config"] = status.knobs
        updates["config_changed_at"] = timezone.now()
    stages = plan_stages_from_json(status.plan_stages)
    stage_dicts = json.loads(status.plan_stages) if stages is not None else []
    if stage_dicts != job.plan_stages:
        updates["plan_stages"] = stage_dicts
    if status.capacity != job.capacity:
        updates["capacity"] = status.capacity
    cluster = cluster_key(status.master, status.ui_url)
    if cluster and cluster != job.cluster:
        updates["cluster"] = cluster
    if status.query_name and not job.query_name:
        updates["query_name"] = status.query_name
    if updates:
        Job.objects.filter(pk=job.pk).update(**updates)
        for field, value in updates.items():
            setattr(job, field, value)


def mark_health(job: Job, health: str, error: str = "", reason: dict | None = None) -> None:
    Job.objects.filter(pk=job.pk).update(health=health, last_error=error, health_reason=reason or {})
    job.health, job.last_error, job.health_reason = health, error, reason or {}


def _running_target(job: Job) -> tuple[RunnerStatus, UiTarget] | None:
    """The runner's status (its knob values, plan stages and capacity adopted) and the Spark UI to
    read, when the runner runs and reports a UI that fits the job's registration; else None, with
    the job marked ``down`` and the reason."""
    try:
        status = runner_status(job=job)
        if status.state:
            _sync_runner_state(job, status)
    except KnobsDiffer as exc:
        mark_health(job, Job.Health.DOWN, str(exc))
        return None
    except (ProtocolError, KnobError, ValueError) as exc:
        mark_health(job, Job.Health.DOWN, f"the runner's status in Redis is malformed: {exc}")
        return None
    if not status.state:
        mark_health(job, Job.Health.DOWN, "no runner has reported for this job: start it with "
                    f"`python -m sparkclient run --pipeline MODULE:FUNCTION --job {job.name}`")
        return None
    crash = runner_down_reason(status)
    if crash is not None:
        mark_health(job, Job.Health.DOWN, reason_text(crash), reason=crash)
        return None
    if not status.running or not status.ui_url:
        mark_health(job, Job.Health.DOWN,
                    f"runner state is {status.state!r}{': ' + status.error if status.error else ''}")
        return None
    # Redis is not trusted with the URL to fetch: the reported UI URL and app id must fit the job's
    # registration, else nothing is fetched (webapp.jobs.sparkui).
    target = ui_target(job.ui_rule(), ui_url=status.ui_url, app_id=status.app_id)
    if isinstance(target, Refusal):
        mark_health(job, Job.Health.DOWN, target.text(), reason=target.to_json())
        return None
    return status, target


def rest_client(base_url: str) -> SparkRestClient:
    """A Spark REST client for one collection: at most ``SCALER_COLLECT_MAX_REQUESTS`` requests, and none
    started, none still reading, once the soft time limit is near (``SCALER_COLLECT_SOFT_TIME_LIMIT_S`` less
    one request's timeout), so a slow driver ends the collection before the task's limits, under any pool
    (a request not made is a :class:`sparkclient.collector.rest.RequestBudgetSpent`: a note on the sample,
    or the job down; one cut is a ``SparkAnswerRefused``: the job down with its reason).
    It connects through :class:`webapp.jobs.connect.GuardedTransport` over the collector's deadline
    transport: a host that resolves to a denied address raises :class:`webapp.jobs.connect.AddressRefused`
    and nothing is fetched."""
    timeout_s = SparkRestClient.DEFAULT_TIMEOUT_S
    return SparkRestClient(base_url, timeout_s, max_requests=settings.SCALER_COLLECT_MAX_REQUESTS,
                           time_budget_s=max(timeout_s, settings.SCALER_COLLECT_SOFT_TIME_LIMIT_S - timeout_s),
                           transport=GuardedTransport(inner=deadline_transport()))


def snapshot_collect(*, job: Job, now: datetime | None = None) -> MetricSnapshot | None:
    """Read the runner status, the progress published since the previous collect and the Spark REST
    API, and store one MetricSnapshot with a VertexSnapshot per stage.

    The window runs from the previous snapshot (or ``SCALER_COLLECT_INTERVAL_S`` ago) to now, and
    holds the batches that completed in it, so consecutive windows count every batch once.

    Returns None, with the job marked ``down`` and the reason in ``last_error``, when the runner is
    not running, Spark does not answer or its host resolves to a denied address (an answer too large or
    too slow also as ``health_reason``: ``sparkclient.collector.answers.AnswerRefusal``), and marked
    ``degraded`` with the reason when Spark's data or the published progress is malformed
    (``SparkDataError``, naming the field) or the sample holds a non-finite or negative value
    (``SampleError``): nothing is stored then. The snapshot
    records how many Spark REST requests the collection made (``rest_requests``, bounded: :func:`rest_client`).
    """
    # The window ends a moment ago, so the progress of a batch that just completed is published.
    now = now or timezone.now() - timedelta(seconds=PUBLISH_LAG_S)
    running = _running_target(job)
    if running is None:
        return None
    status, target = running
    previous = job.snapshots.order_by("-collected_at").values_list("collected_at", flat=True).first()
    window_start = previous if previous and (now - previous).total_seconds() < 10 * settings.SCALER_COLLECT_INTERVAL_S \
        else now - timedelta(seconds=settings.SCALER_COLLECT_INTERVAL_S)
    window_s = max(0.001, (now - window_start).total_seconds())
    # From a little before the window: the last progress before it is the arrival rate's baseline.
    baseline_s = max(60.0, 4 * settings.SCALER_COLLECT_INTERVAL_S)
    # Every run's progress: the previous run's last batch gives a catch-up batch its span (batchwindow.window_batches).
    try:
        progresses = read_progress(get_redis(), job.name,
                                   since_ms=int((window_start.timestamp() - baseline_s) * 1000))
        trigger_interval_s = status.trigger_interval_s or infer_trigger_interval_s(
            [p for p in progresses if p.get("runId") == status.run_id]) or 1.0
    except SparkDataError as exc:
        mark_health(job, Job.Health.DEGRADED, f"published progress: {exc}")
        return None
    config = job.config
    client = rest_client(target.base_url)
    try:
        sample = collect_sample(client, target.app_id, progresses, run_id=status.run_id,
                                trigger_interval_s=trigger_interval_s, window_s=window_s,
                                now_s=now.timestamp(), max_cores=job.capacity or None)
    except SparkRestError as exc:  # an answer past its bound carries its code (the job page words it)
        mark_health(job, Job.Health.DOWN, f"Spark REST API: {exc}",
                    reason=exc.reason() if isinstance(exc, SparkAnswerRefused) else None)
        return None
    except AddressRefused as exc:
        mark_health(job, Job.Health.DOWN, f"Spark REST API: {exc}", reason=exc.to_json())
        return None
    except (SparkDataError, SampleError) as exc:
        mark_health(job, Job.Health.DEGRADED, str(exc))
        return None
    finally:
        client.close()
        logger.info("job %s: %d Spark REST request(s) in this collection (at most %d)", job.name, client.requests,
                    client.max_requests)
    snapshot = _store(job, now=now, config=config, sample=sample, window_s=window_s, rest_requests=client.requests)
    mark_health(job, Job.Health.RUNNING if sample.batches else Job.Health.DEGRADED,
                "" if sample.batches else "no micro-batch completed in the last window")
    return snapshot


def _memory_fields(sample: JobSample) -> dict:
    """The snapshot's memory columns of ``sample`` (empty when it read none)."""
    memory = sample.memory
    if memory is None:
        return {}
    return {"gc_share": memory.gc_share, "heap_peak_bytes": memory.heap_peak_bytes,
            "heap_max_bytes": memory.heap_max_bytes, "state_memory_bytes": memory.state_memory_bytes,
            "nonheap_peak_bytes": memory.nonheap_peak_bytes, "memory": memory.to_json()}


def _store(job: Job, *, now: datetime, config: dict, sample: JobSample, window_s: float,
           rest_requests: int | None = None) -> MetricSnapshot:
    """One MetricSnapshot of ``sample`` with a VertexSnapshot per stage, in one transaction; a
    window without a completed batch keeps the collect window's length."""
    with transaction.atomic():
        snapshot = MetricSnapshot.objects.create(
            job=job, collected_at=now, run_id=sample.run_id, config=config,
            window_s=sample.window_s if sample.batches else window_s,
            batches=sample.batches, backlog=sample.backlog, arrival_rate_per_s=sample.arrival_rate_per_s,
            input_rate_per_s=sample.input_rate_per_s, processed_rate_per_s=sample.processed_rate_per_s,
            batch_duration_s=sample.batch_duration_s, trigger_interval_s=sample.trigger_interval_s,
            batch_overhead_s=sample.batch_overhead_s, batch_ratio=sample.batch_ratio,
            executors=sample.executors, cores=sample.cores, state_rows=sample.state_rows,
            state_bytes=sample.state_bytes, errors=list(sample.errors), rest_requests=rest_requests,
            not_ready=issues_to_json(sample.not_ready), **_memory_fields(sample))
        VertexSnapshot.objects.bulk_create([
            VertexSnapshot(snapshot=snapshot, vertex_id=v.vertex_id, name=v.name, position=v.position,
                           is_source=v.is_source, tasks=v.tasks, busy_s=v.busy_s, busy_max_s=v.busy_max_s,
                           records_in=v.records_in,
                           records_out=v.records_out, spill_bytes=v.spill_bytes, upstream=list(v.upstream),
                           span_s=v.span_s)
            for v in sample.vertices])
    return snapshot
