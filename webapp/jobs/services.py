"""Writes for jobs: registration, metric collection and evaluation (HackSoft style: keyword-only,
typed, atomic). Celery tasks call these; views never do this work themselves."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, replace
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from scaling import ClusterState, Edge, JobPlan, PlanRequest, Policy, Topology, Vertex, VertexMetrics, evaluate
from scaling.metrics import busy_time_ms_per_s, true_processing_rate
from scaling.state import state_from_dict, state_to_dict
from sparkclient import control
from webapp.jobs.models import Evaluation, Job, JobPolicy, MetricSnapshot, VertexSnapshot
from webapp.jobs.redis import get_redis
from webapp.jobs.selectors import snapshots_in_window
from webapp.jobs.sparkui import Refusal, ui_target

logger = logging.getLogger(__name__)

#: Seconds a collect window ends before "now": the listener publishes a batch's progress just after it.
PUBLISH_LAG_S = 1.0


#: Registration fields of ``Job`` that ``job_register`` sets when they are given.
REGISTRATION_FIELDS = ("topic", "query_name", "spark_ui_url", "spark_ui_hosts", "spark_ui_ports", "knobs")


class RegistrationError(ValueError):
    """A registration was refused. ``errors`` maps a field to its messages; the policy's fields are
    under ``"policy"`` as their own mapping. Nothing was saved."""

    def __init__(self, errors: dict) -> None:
        super().__init__("; ".join(f"{field}: {msgs}" for field, msgs in errors.items()))
        self.errors = errors


def _validation_errors(exc) -> dict[str, list[str]]:
    return {field: [str(m) for m in messages] for field, messages in exc.message_dict.items()}


def _unknown_policy_fields(values: dict) -> dict[str, list[str]]:
    """``{field: ["not a policy field"]}`` for each key of ``values`` that a policy may not be given."""
    editable = {f.name for f in JobPolicy._meta.concrete_fields} - {"id", "job"}
    return {str(field): ["not a policy field"] for field in values if field not in editable}


def job_register(*, name: str, topic: str = "", query_name: str = "", config: dict | None = None,
                 knobs: list | None = None, policy: dict | None = None, spark_ui_url: str | None = None,
                 spark_ui_hosts: list | None = None, spark_ui_ports: str | None = None,
                 exists_ok: bool = True) -> Job:
    """Register a job (and its policy), or update the registration of an existing one.

    The one registration path of the admin's add form aside (which runs the same ``clean()``s):
    the API (``POST /api/jobs/``), ``manage.py register_job``, ``make demo`` and the tests.

    Args:
        name: the runner's ``--job`` name (a slug).
        spark_ui_url, spark_ui_hosts, spark_ui_ports: where the Spark UI may be read (fixed URL,
            or discovery rule); see ``webapp.jobs.sparkui``. None keeps the stored value (the
            default rule, this machine's ports 4040-4056, for a new job).
        knobs: the pipeline's knob declarations (``sparkclient.contract.Knob`` dicts, validated by
            ``webapp.jobs.knobs``); None keeps the stored ones. The runner reports them too.
        config: the initial knob values (the runner reports them later).
        policy: ``JobPolicy`` field values; applied to a new policy and to an existing one.
        exists_ok: False refuses a name that is already registered.

    Raises:
        RegistrationError: a field is invalid (same validation as the admin: the models'
            ``full_clean()``), or the name is taken and ``exists_ok`` is False. Nothing is saved.
    """
    from django.core.exceptions import ValidationError  # noqa: PLC0415
    from django.db import IntegrityError  # noqa: PLC0415

    given = {"topic": topic or None, "query_name": query_name or None, "spark_ui_url": spark_ui_url,
             "spark_ui_hosts": spark_ui_hosts, "spark_ui_ports": spark_ui_ports, "knobs": knobs}
    given = {k: v for k, v in given.items() if v is not None}
    try:
        with transaction.atomic():
            job = Job.objects.select_for_update().filter(name=name).first()
            created = job is None
            if not created and not exists_ok:
                raise RegistrationError({"name": [f"a job named {name!r} is already registered; edit it with "
                                                  f"PATCH /api/jobs/{job.pk}/"]})
            if created:
                job = Job(name=name, config=config or {})
                if spark_ui_url and spark_ui_hosts is None:
                    job.spark_ui_hosts = []  # a fixed URL alone: no discovery rule besides it
            elif config and not job.config:
                job.config = config
            for field, value in given.items():
                setattr(job, field, value)
            errors: dict = {}
            try:
                job.full_clean(validate_unique=created)
            except ValidationError as exc:
                errors.update(_validation_errors(exc))
            job_policy = None if created else JobPolicy.objects.filter(job=job).first()
            job_policy = job_policy or JobPolicy()
            policy_errors = _unknown_policy_fields(policy or {})
            if not policy_errors:
                for field, value in (policy or {}).items():
                    setattr(job_policy, field, value)
                try:
                    job_policy.full_clean(exclude=["job"])
                except ValidationError as exc:
                    policy_errors.update(_validation_errors(exc))
            if policy_errors:
                errors["policy"] = policy_errors
            if errors:
                raise RegistrationError(errors)
            job.save()
            job_policy.job = job
            job_policy.save()
    except IntegrityError:
        raise RegistrationError({"name": [f"a job named {name!r} is already registered"]}) from None
    return job


def job_update(*, job: Job, changes: dict, actor: str) -> Job:
    """Edit a registered job's registration fields (``REGISTRATION_FIELDS``), with the admin's
    validation, and record an audit event ``job_changed`` with the changed fields before and after.

    Raises:
        RegistrationError: a field is invalid, or not a registration field; nothing is saved.
    """
    unknown = [f for f in changes if f not in REGISTRATION_FIELDS]
    if unknown:
        raise RegistrationError({f: ["not a registration field"] for f in unknown})
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job.pk)
        _edit_audited(job, job, changes, clean=lambda: job.full_clean(validate_unique=False), actor=actor,
                      action="job_changed", reason="registration edited")
    return job


def _edit_audited(job: Job, instance, changes: dict, *, clean, actor: str, action: str, reason: str) -> None:
    """Set ``changes`` on ``instance``, validate with ``clean`` (the admin's checks), save those
    fields, and record ``action`` in the audit trail with the fields that changed, before and after.

    Raises:
        RegistrationError: ``clean`` refused a value (errors keyed by field); nothing is saved.
    """
    from django.core.exceptions import ValidationError  # noqa: PLC0415

    from webapp.proposals.models import AuditEvent  # noqa: PLC0415

    before = {f: getattr(instance, f) for f in changes}
    for field, value in changes.items():
        setattr(instance, field, value)
    try:
        clean()
    except ValidationError as exc:
        raise RegistrationError(_validation_errors(exc)) from None
    instance.save(update_fields=list(changes))
    after = {f: getattr(instance, f) for f in changes}
    changed = [f for f in changes if before[f] != after[f]]
    if changed:
        AuditEvent.objects.create(job=job, actor=actor, action=action, before={f: before[f] for f in changed},
                                  after={f: after[f] for f in changed}, reason=reason)


def job_policy_update(*, job: Job, changes: dict, actor: str) -> JobPolicy:
    """Edit a job's policy (mode included) with the admin's validation (``JobPolicy.full_clean``:
    the field validators and ``clean()``), and record an audit event ``policy_changed`` with the
    changed fields before and after.

    Raises:
        RegistrationError: a value is invalid or the field is not a policy field (errors keyed by
            field); nothing is saved.
    """
    if errors := _unknown_policy_fields(changes):
        raise RegistrationError(errors)
    with transaction.atomic():
        policy = JobPolicy.objects.select_for_update().get(job=job)
        _edit_audited(job, policy, changes, clean=lambda: policy.full_clean(exclude=["job"]), actor=actor,
                      action="policy_changed", reason="policy edited")
    return policy


def runner_status(*, job: Job) -> control.RunnerStatus:
    """The runner's parsed status hash ``ss:runner:{job}`` (all fields empty when no runner reported).

    Raises:
        sparkclient.control.ProtocolError: a malformed field (Redis contents are input).
    """
    return control.read_status(get_redis(), job.name)


class KnobsDiffer(ValueError):
    """The runner declares other knobs (names, targets or bounds) than the job's registration."""


def _sync_runner_state(job: Job, status: control.RunnerStatus) -> None:
    """Adopt the runner's knob values, plan stages and capacity (the runner is the source of truth for
    what runs). Knob declarations are adopted only while the job has none registered (first use);
    after that a runner declaring others is refused, so whoever can write Redis cannot widen the
    bounds the autoscaler respects: re-register the job's knobs to change them.

    Raises:
        KnobsDiffer: the declarations differ from the registered ones (nothing is adopted).
        sparkclient.contract.KnobError / ValueError: malformed declarations, values or plan stages.
    """
    from sparkclient.contract import validate_values  # noqa: PLC0415

    from sparkclient.binding import plan_stages_from_json  # noqa: PLC0415
    from sparkclient.contract import knobs_from_json  # noqa: PLC0415

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
    if status.query_name and not job.query_name:
        updates["query_name"] = status.query_name
    if updates:
        Job.objects.filter(pk=job.pk).update(**updates)
        for field, value in updates.items():
            setattr(job, field, value)


def _mark(job: Job, health: str, error: str = "", reason: dict | None = None) -> None:
    Job.objects.filter(pk=job.pk).update(health=health, last_error=error, health_reason=reason or {})
    job.health, job.last_error, job.health_reason = health, error, reason or {}


def snapshot_collect(*, job: Job, now: datetime | None = None) -> MetricSnapshot | None:
    """Read the runner status, the progress published since the previous collect and the Spark REST
    API, and store one MetricSnapshot with a VertexSnapshot per stage.

    The window runs from the previous snapshot (or ``SCALER_COLLECT_INTERVAL_S`` ago) to now, and
    holds the batches that completed in it, so consecutive windows count every batch once.

    Returns None, with the job marked ``down`` and the reason in ``last_error``, when the runner is
    not running or Spark does not answer, and marked ``degraded`` with the reason when Spark's data
    or the published progress is malformed (``SparkDataError``, naming the field) or the sample
    holds a non-finite or negative value (``SampleError``): nothing is stored then.
    """
    from django.conf import settings  # noqa: PLC0415

    from sparkclient.progress import read_progress  # noqa: PLC0415
    from sparkclient.rest import SparkRestClient, SparkRestError  # noqa: PLC0415
    from sparkclient.sparkjson import SparkDataError  # noqa: PLC0415
    from sparkclient.topology import SampleError, collect_sample  # noqa: PLC0415

    # The window ends a moment ago, so the progress of a batch that just completed is published.
    now = now or timezone.now() - timedelta(seconds=PUBLISH_LAG_S)
    from sparkclient.contract import KnobError  # noqa: PLC0415

    try:
        status = runner_status(job=job)
        if status.state:
            _sync_runner_state(job, status)
    except KnobsDiffer as exc:
        _mark(job, Job.Health.DOWN, str(exc))
        return None
    except (control.ProtocolError, KnobError, ValueError) as exc:
        _mark(job, Job.Health.DOWN, f"the runner's status in Redis is malformed: {exc}")
        return None
    if not status.state:
        _mark(job, Job.Health.DOWN, "no runner has reported for this job: start it with "
                                    f"`python -m sparkclient run --pipeline MODULE:FUNCTION --job {job.name}`")
        return None
    if not status.running or not status.ui_url:
        _mark(job, Job.Health.DOWN, f"runner state is {status.state!r}"
                                    f"{': ' + status.error if status.error else ''}")
        return None
    # Redis is not trusted with the URL to fetch: the reported UI URL and app id must fit the job's
    # registration, else nothing is fetched (webapp.jobs.sparkui).
    target = ui_target(job.ui_rule(), ui_url=status.ui_url, app_id=status.app_id)
    if isinstance(target, Refusal):
        _mark(job, Job.Health.DOWN, target.text(), reason=target.to_json())
        return None
    previous = job.snapshots.order_by("-collected_at").values_list("collected_at", flat=True).first()
    window_start = previous if previous and (now - previous).total_seconds() < 10 * settings.SCALER_COLLECT_INTERVAL_S \
        else now - timedelta(seconds=settings.SCALER_COLLECT_INTERVAL_S)
    window_s = max(0.001, (now - window_start).total_seconds())
    # From a little before the window: the last progress before it is the arrival rate's baseline.
    baseline_s = max(60.0, 4 * settings.SCALER_COLLECT_INTERVAL_S)
    # Every run's progress: the previous run's last batch gives a catch-up batch its span (topology.window_batches).
    from sparkclient.snapshot import infer_trigger_interval_s  # noqa: PLC0415

    try:
        progresses = read_progress(get_redis(), job.name,
                                   since_ms=int((window_start.timestamp() - baseline_s) * 1000))
        trigger_interval_s = status.trigger_interval_s or infer_trigger_interval_s(
            [p for p in progresses if p.get("runId") == status.run_id]) or 1.0
    except SparkDataError as exc:
        _mark(job, Job.Health.DEGRADED, f"published progress: {exc}")
        return None
    config = job.config
    client = SparkRestClient(target.base_url)
    try:
        sample = collect_sample(client, target.app_id, progresses, run_id=status.run_id,
                                trigger_interval_s=trigger_interval_s, window_s=window_s,
                                now_s=now.timestamp())
    except SparkRestError as exc:
        _mark(job, Job.Health.DOWN, f"Spark REST API: {exc}")
        return None
    except (SparkDataError, SampleError) as exc:
        _mark(job, Job.Health.DEGRADED, str(exc))
        return None
    finally:
        client.close()
    with transaction.atomic():
        snapshot = MetricSnapshot.objects.create(
            job=job, collected_at=now, run_id=sample.run_id, config=config,
            window_s=sample.window_s if sample.batches else window_s,
            batches=sample.batches, backlog=sample.backlog, arrival_rate_per_s=sample.arrival_rate_per_s,
            input_rate_per_s=sample.input_rate_per_s, processed_rate_per_s=sample.processed_rate_per_s,
            batch_duration_s=sample.batch_duration_s, trigger_interval_s=sample.trigger_interval_s,
            batch_overhead_s=sample.batch_overhead_s, batch_ratio=sample.batch_ratio,
            executors=sample.executors, cores=sample.cores, state_rows=sample.state_rows,
            state_bytes=sample.state_bytes, errors=list(sample.errors))
        VertexSnapshot.objects.bulk_create([
            VertexSnapshot(snapshot=snapshot, vertex_id=v.vertex_id, name=v.name, position=v.position,
                           is_source=v.is_source, tasks=v.tasks, busy_s=v.busy_s, records_in=v.records_in,
                           records_out=v.records_out, spill_bytes=v.spill_bytes, upstream=list(v.upstream))
            for v in sample.vertices])
    _mark(job, Job.Health.RUNNING if sample.batches else Job.Health.DEGRADED,
          "" if sample.batches else "no micro-batch completed in the last window")
    return snapshot


def scaling_policy(policy: JobPolicy) -> Policy:
    """The ``scaling.Policy`` of a job's policy row (every option, see ``webapp.jobs.policy``)."""
    from webapp.jobs.policy import scaling_policy as build  # noqa: PLC0415

    return build(policy)


def window_inputs(*, job: Job, snapshots: list[MetricSnapshot]
                  ) -> tuple[Topology, dict[str, VertexMetrics], ClusterState, float]:
    """Aggregate a window of snapshots into the planner's inputs (sums over the window, so a
    snapshot without a completed batch weighs in correctly).

    Returns (topology, metrics per vertex id, cluster, mean batch duration in seconds).
    A stage is adjustable only when its binding to a knob is confirmed (:func:`stage_bindings`);
    the executors go up to the least of the policy's ``max_cores``, the executors knob's max and the
    cluster's capacity.
    """
    latest = snapshots[-1]
    total_s = sum(s.window_s for s in snapshots)
    sums: dict[str, dict[str, float]] = {}
    for snapshot in snapshots:
        for v in snapshot.vertices.all():
            acc = sums.setdefault(v.vertex_id, {"busy_s": 0.0, "in": 0.0, "out": 0.0})
            acc["busy_s"] += v.busy_s
            acc["in"] += v.records_in
            acc["out"] += v.records_out
    arrival = sum(s.arrival_rate_per_s * s.window_s for s in snapshots) / total_s
    overhead = sum(s.batch_overhead_s * s.batches for s in snapshots) / max(1, sum(s.batches for s in snapshots))
    vertices, metrics, edges = [], {}, []
    bindings = stage_bindings(job=job, snapshot=latest)
    for v in latest.vertices.all():
        binding = bindings[v.position] if v.position < len(bindings) else None
        vertices.append(Vertex(id=v.vertex_id, name=v.name, parallelism=max(1, v.tasks), source=v.is_source,
                               adjustable=bool(binding and binding.adjustable)))
        edges.extend(Edge(source=u, target=v.vertex_id) for u in v.upstream)
        acc = sums.get(v.vertex_id, {"busy_s": 0.0, "in": 0.0, "out": 0.0})
        records_in_per_s = acc["in"] / total_s
        # A batch longer than the window reports all its busy time at its end: more than 1000 ms per
        # second per task. The rate is still records over busy time (DS2 Eq. 1), given directly.
        overfull = acc["busy_s"] > total_s * max(1, v.tasks) and acc["in"] > 0
        tpr = true_processing_rate(acc["in"], acc["busy_s"]) * max(1, v.tasks) if overfull else None
        growth = (arrival - records_in_per_s) if v.is_source else 0.0
        metrics[v.vertex_id] = VertexMetrics(
            records_in_per_s=records_in_per_s, records_out_per_s=acc["out"] / total_s,
            busy_time_ms_per_s=busy_time_ms_per_s(acc["busy_s"], total_s, v.tasks), backlog=float(latest.backlog) if v.is_source else 0.0,
            backlog_growth_per_s=growth, batch_overhead_s=overhead, true_processing_rate=tpr)
    policy = job.policy
    ceiling = executors_ceiling(job=job)
    cluster = ClusterState(executors=max(1, latest.cores), cores_per_executor=1,
                           min_executors=min(policy.min_cores, ceiling), max_executors=ceiling,
                           trigger_interval_s=latest.trigger_interval_s or 1.0)
    batches = sum(s.batches for s in snapshots)
    mean_batch_s = sum(s.batch_duration_s * s.batches for s in snapshots) / batches if batches else 0.0
    return Topology(tuple(vertices), tuple(edges)), metrics, cluster, mean_batch_s


def executors_ceiling(*, job: Job) -> int:
    """The most executors a plan may ask for: the least of the policy's ``max_cores``, the executors
    knob's ``max`` and the cluster's capacity (when known); never below 1."""
    policy = job.policy
    limits = [max(policy.min_cores, policy.max_cores)]
    executors = next((k for k in job.knob_specs() if k.sets == "executors"), None)
    if executors is not None:
        limits.append(executors.max)
    if job.capacity:
        limits.append(job.capacity)
    return max(1, min(limits))


def stage_bindings(*, job: Job, snapshot: MetricSnapshot) -> tuple:
    """Each stage of ``snapshot``'s newest batch bound to its knob (:func:`sparkclient.binding.bind_stages`),
    from the runner's plan stages and the tasks Spark ran; in stage order."""
    from sparkclient.binding import bind_stages, plan_stages_from_json  # noqa: PLC0415

    try:
        plan = plan_stages_from_json(json.dumps(job.plan_stages)) if job.plan_stages else None
    except ValueError:
        plan = None
    tasks = [v.tasks for v in sorted(snapshot.vertices.all(), key=lambda v: v.position)]
    return bind_stages(plan, job.knob_specs(), job.config, tasks)


def plan_to_config(*, job: Job, plan: JobPlan) -> dict:
    """The knob values a plan asks for: the executors knob, and each bound stage's knob set to the
    stage's proposed parallelism (a knob bound to several stages takes the largest)."""
    config = dict(job.config)
    specs = job.knob_specs()
    executors = next((k for k in specs if k.sets == "executors"), None)
    if executors is not None:
        config[executors.name] = plan.executors_proposed * plan.cores_per_executor
    snapshot = job.snapshots.order_by("-collected_at").first()
    bindings = stage_bindings(job=job, snapshot=snapshot) if snapshot is not None else ()
    positions = {v.vertex_id: v.position for v in snapshot.vertices.all()} if snapshot is not None else {}
    proposed: dict[str, int] = {}
    for vertex_plan in plan.vertices:
        position = positions.get(vertex_plan.vertex_id, -1)
        binding = bindings[position] if 0 <= position < len(bindings) else None
        if binding is not None and binding.adjustable and binding.knob:
            proposed[binding.knob] = max(proposed.get(binding.knob, 0), vertex_plan.proposed)
    config.update(proposed)
    return config


def plan_as_json(plan: JobPlan) -> dict:
    """A JobPlan as JSON (infinite rates as the string ``"inf"``, as in SCENARIO.md)."""
    def clean(value):
        if isinstance(value, float):
            return "inf" if value == float("inf") else round(value, 3)
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [clean(v) for v in value]
        return value
    data = asdict(plan)
    data.pop("next_state", None)  # the job's state is stored on the job, not in every plan
    return clean(data)


def stable_snapshots(*, job: Job, snapshots: list[MetricSnapshot]) -> list[MetricSnapshot]:
    """The snapshots of the current query run, without its first ``SCALER_STABILIZATION_S`` seconds.

    FLIP-271's ``job.autoscaler.stabilization.interval``: right after a (re)start, a cold JVM, Python
    workers and state store loading make the first batches slow, and a catch-up batch carries the
    backlog; metrics from then say nothing about the steady state. A new ``run_id`` marks a restart.
    The run started at most one collect interval before its first snapshot (whose window may reach
    back over the downtime to the previous run's last batch, :func:`sparkclient.topology.window_batches`).
    """
    from django.conf import settings  # noqa: PLC0415

    if not snapshots:
        return []
    run_id = snapshots[-1].run_id
    first = job.snapshots.filter(run_id=run_id).order_by("collected_at").first()
    started = first.collected_at - timedelta(seconds=min(first.window_s, settings.SCALER_COLLECT_INTERVAL_S))
    stable_from = started + timedelta(seconds=settings.SCALER_STABILIZATION_S)
    return [s for s in snapshots if s.run_id == run_id and s.collected_at - timedelta(seconds=s.window_s) >= stable_from]


def evaluation_run(*, job: Job, now: datetime | None = None) -> Evaluation | None:
    """Evaluate the metric window of ``job`` with the micro-batch planner and store the result.

    Returns None while the window is not yet full (the job stays ``collecting``). Every evaluation
    goes to ``proposal_create``, which creates, revises, keeps or withdraws the pending proposal; a
    scale-up held by the live loop's rules (ineffective-scale-up block, restart awareness) carries
    the rule in ``Evaluation.hold`` and proposes nothing.
    """
    from webapp.proposals.services import proposal_create  # noqa: PLC0415 - apps depend one way at import

    policy = job.policy
    snapshots = stable_snapshots(job=job, snapshots=snapshots_in_window(job=job, window_s=policy.metric_window_s,
                                                                        now=now))
    covered_s = sum(s.window_s for s in snapshots)
    if not snapshots or covered_s < 0.9 * policy.metric_window_s or not snapshots[-1].vertices.exists():
        if job.health == Job.Health.RUNNING:
            _mark(job, Job.Health.COLLECTING,
                  f"{covered_s:.0f} of {policy.metric_window_s:.0f} s of metrics in the window")
        return None
    if not any(s.batches for s in snapshots):
        # No micro-batch completed in the window (a batch longer than the window, or a stalled
        # query): its busy time is not reported yet, so the window says nothing about the load.
        _mark(job, Job.Health.DEGRADED, f"no micro-batch completed in the last {covered_s:.0f} s: not evaluated")
        return None
    topology, metrics, cluster, mean_batch_s = window_inputs(job=job, snapshots=snapshots)
    durations = tuple(s.batch_duration_s for s in snapshots if s.batches) or ((mean_batch_s,) if mean_batch_s else ())
    # The algorithm the policy names (scaling/policies.py registry), with the job's memory: pending
    # delayed scale-downs (FLINK-36018), applied scalings, measured restart times.
    state = state_from_dict(job.scaler_state)
    plan = evaluate(PlanRequest(topology=topology, metrics=metrics, policy=scaling_policy(policy), mode="micro-batch",
                                cluster=cluster, state=state, now_s=(now or timezone.now()).timestamp(),
                                batch_durations_s=durations))
    if plan.next_state is not None:
        # Only the pending scale-downs carry over from an evaluation: a scaling enters the history
        # when its execution succeeds (webapp.proposals.services), not when it is proposed.
        kept = replace(state, pending_scale_downs=plan.next_state.pending_scale_downs)
        if kept != state:
            Job.objects.filter(pk=job.pk).update(scaler_state=state_to_dict(kept))
            job.scaler_state = state_to_dict(kept)
    proposed_config = plan_to_config(job=job, plan=plan)
    now = now or timezone.now()
    plan_json = plan_as_json(plan)
    direction = _evaluation_direction(job=job, plan=plan, proposed_config=proposed_config)
    hold, hold_detail = "", {}
    if plan.decision == "scale" and direction == Evaluation.Direction.UP and proposed_config != job.config:
        hold, hold_detail = _scale_up_hold(job=job, plan=plan_json, proposed_config=proposed_config, now=now)
    evaluation = Evaluation.objects.create(
        job=job, decision=plan.decision, reasons=list(plan.reasons), plan=plan_json,
        proposed_config=proposed_config, window_s=covered_s, direction=direction, hold=hold, hold_detail=hold_detail,
        held_scale_down=_held_scale_down(job=job, plan=plan))
    # Every evaluation goes to the proposals: it may create, revise, keep or withdraw the pending one.
    proposal_create(evaluation=evaluation, now=now)
    return evaluation


def _evaluation_direction(*, job: Job, plan: JobPlan, proposed_config: dict) -> str:
    """Where an evaluation points: the direction of its change when it scales, else up when the load
    is above the utilization band, down when below it (``VertexPlan.outside_bounds`` is the band
    test of the micro-batch planner), none inside it."""
    from webapp.proposals.holds import config_direction  # noqa: PLC0415

    if plan.decision == "scale" and proposed_config != job.config:
        way = config_direction(job=job, current=job.config, proposed=proposed_config)
        if way in (Evaluation.Direction.UP, Evaluation.Direction.DOWN):
            return way
    if not any(v.outside_bounds for v in plan.vertices):
        return Evaluation.Direction.NONE
    high = scaling_policy(job.policy).band[1]
    return Evaluation.Direction.UP if (plan.load or 0.0) > high else Evaluation.Direction.DOWN


def _scale_up_hold(*, job: Job, plan: dict, proposed_config: dict, now: datetime) -> tuple[str, dict]:
    """The live loop's rules that keep a scale-up from becoming a proposal: the ineffective-scale-up
    block, then restart awareness (``webapp.proposals.restart``). Returns ``(hold, detail)``, or
    ``("", {})`` when none applies."""
    from webapp.proposals.reasons import EvaluationHold  # noqa: PLC0415
    from webapp.proposals.restart import restart_hold  # noqa: PLC0415
    from webapp.proposals.holds import blocked_knobs  # noqa: PLC0415

    blocked = blocked_knobs(job=job, current=job.config, proposed=proposed_config)
    if blocked:
        return EvaluationHold.SCALE_UP_BLOCKED, {"knobs": blocked, "proposal": job.scale_up_block.get("proposal")}
    held = restart_hold(job=job, plan=plan, now=now)
    return (str(held[0]), held[1]) if held else ("", {})


def _held_scale_down(*, job: Job, plan: JobPlan) -> dict:
    """While the planner holds a scale-down of the executors (FLINK-36018), the plan as it would
    run: ``{executors, cores, config, plan}``; else ``{}``."""
    from scaling.planner import EXECUTORS_KEY  # noqa: PLC0415

    pending = plan.next_state.pending(EXECUTORS_KEY) if plan.next_state is not None else None
    if pending is None or plan.decision == "scale" or plan.executors_current is None:
        return {}
    executors = min(plan.executors_current, pending.max_recommended)
    if executors >= plan.executors_current:
        return {}
    held = replace(plan, decision="scale", executors_proposed=executors, next_state=None,
                   vertices=tuple(replace(v, proposed=v.recommended if v.recommended is not None else v.proposed)
                                  for v in plan.vertices))
    config = plan_to_config(job=job, plan=held)
    return {"executors": executors, "cores": executors * (plan.cores_per_executor or 1), "config": config,
            "plan": plan_as_json(held)}


def collect_and_evaluate(*, job: Job) -> None:
    """One beat for one job: collect a snapshot, then evaluate unless a proposal is executing."""
    from webapp.proposals.models import Proposal  # noqa: PLC0415

    started = time.monotonic()
    snapshot = snapshot_collect(job=job)
    if snapshot is None:
        return
    busy = job.proposals.filter(status__in=[Proposal.Status.APPROVED, Proposal.Status.EXECUTING,
                                            Proposal.Status.ROLLING_BACK]).exists()
    if not busy:
        evaluation_run(job=job)
    logger.info("collected %s in %.2f s (%d batches)", job.name, time.monotonic() - started, snapshot.batches)
