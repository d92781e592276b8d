"""Factories for web app models (plain functions; enough for these tests)."""

from __future__ import annotations

import csv
import json
from contextlib import nullcontext
from datetime import timedelta
from io import StringIO

from django.contrib.admin.sites import site
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import RequestFactory
from django.utils import timezone

from webapp.jobs.models import Job, MetricSnapshot, VertexSnapshot
from webapp.jobs.services import job_register
from webapp.loop.evaluate import evaluation_run
from webapp.proposals.codes import Reason
from webapp.proposals.exports import CSV_TRAILER
from webapp.proposals.models import AuditEvent, Proposal

#: The demo pipeline's knob declarations (sparkclient.demo.examples.nexmark.KNOBS, as the runner publishes them).
KNOBS = [
    {"name": "cores", "default": 1, "min": 1, "max": 8, "sets": "executors", "description": ""},
    {"name": "source_partitions", "default": 1, "min": 1, "max": 16, "sets": "source_partitions", "description": ""},
    {"name": "enrich_partitions", "default": 1, "min": 1, "max": 32, "sets": "repartition", "description": ""},
    {"name": "state_partitions", "default": 2, "min": 1, "max": 64, "sets": "state_partitions", "description": ""},
    {"name": "trigger_interval_s", "default": 2, "min": 1, "max": 600, "sets": "other", "description": ""},
]
#: A heap knob (``KnobTarget.MEMORY``) to add to them.
HEAP_KNOB = {"name": "heap_mb", "default": 1024, "min": 512, "max": 8192, "sets": "memory", "description": "heap"}
CONFIG = {"cores": 1, "source_partitions": 1, "enrich_partitions": 1, "state_partitions": 2, "trigger_interval_s": 2}
#: Its physical plan's stages (sparkclient.contract.binding), as the runner publishes them.
PLAN_STAGES = [
    {"input": "source", "partitions": None, "stateful": False, "operators": ["MicroBatchScan"]},
    {"input": "repartition", "partitions": 1, "stateful": False, "operators": ["MapInPandas"]},
    {"input": "shuffle", "partitions": 2, "stateful": True, "operators": ["StateStoreSave"]},
]


def make_user(username="operator", role="operator", **extra):
    """A user with one role (viewer, operator, admin; None = no role at all)."""
    from webapp.accounts.roles import user_set_role  # noqa: PLC0415 - needs the auth models loaded

    user = get_user_model().objects.create_user(username=username, password="pw-for-tests", **extra)
    return user_set_role(user=user, role=role) if role else user


def make_job(name="demo", *, knobs=(), cluster=None, **policy) -> Job:
    """A registered job of the demo pipeline's knobs and plan stages, plus ``knobs`` (declarations, each
    set to its default), on ``cluster`` (what its runner reports; None: not reported), with ``policy``
    (its policy fields)."""
    job = job_register(name=name, topic="nexmark", query_name=f"{name}-query",
                       config={**CONFIG, **{k["name"]: k["default"] for k in knobs}}, knobs=[*KNOBS, *knobs],
                       policy=policy or None)
    Job.objects.filter(pk=job.pk).update(plan_stages=PLAN_STAGES, **({} if cluster is None else {"cluster": cluster}))
    return Job.objects.select_related("policy").get(pk=job.pk)


def make_snapshots(job: Job, *, count=4, window_s=15.0, arrival=900.0, enrich_busy_s=15.0, backlog_step=2000,
                   tasks=(1, 1, 2), cores=1, end=None, enrich_busy_max_s=None,
                   batch_duration_s=5.0, keeping_up=False) -> list[MetricSnapshot]:
    """``count`` consecutive snapshots of a 3-stage job. Per window: the source reads ``arrival × 0.5 ×
    window`` records in 2 busy s, enrich reads the same in ``enrich_busy_s``, the aggregation in 1 s.
    ``enrich_busy_max_s``: enrich's busiest task's busy time per task (None: not measured).
    ``batch_duration_s``: each batch's duration on the 2 s trigger (5 s: the batches overrun it).
    ``keeping_up``: the sources' arrival rate is what the job reads (else twice it: the backlog grows)."""
    end = end or timezone.now()
    snapshots = []
    for i in range(count):
        at = end - timedelta(seconds=window_s * (count - 1 - i))
        processed = int(arrival * 0.5 * window_s)
        snapshot = MetricSnapshot.objects.create(
            job=job, collected_at=at, run_id="run-1", config=job.config, window_s=window_s, batches=3,
            backlog=backlog_step * (i + 1), arrival_rate_per_s=processed / window_s if keeping_up else arrival,
            input_rate_per_s=processed / window_s,
            processed_rate_per_s=processed / window_s, batch_duration_s=batch_duration_s, trigger_interval_s=2.0,
            batch_overhead_s=0.2, batch_ratio=batch_duration_s / 2.0, executors=1, cores=cores)
        upstream = [[], ["v0"], ["v1"]]
        for pos, (busy, rec_in, rec_out) in enumerate([(2.0, processed, processed),
                                                        (enrich_busy_s, processed, 40),
                                                        (1.0, 40, 10)]):
            VertexSnapshot.objects.create(snapshot=snapshot, vertex_id=f"v{pos}", name=f"stage {pos}", position=pos,
                                          is_source=pos == 0, tasks=tasks[pos], busy_s=busy, records_in=rec_in,
                                          records_out=rec_out, upstream=upstream[pos],
                                          busy_max_s=enrich_busy_max_s if pos == 1 else None)
        snapshots.append(snapshot)
    return snapshots


def make_pending(name="demo", *, knobs=(), cluster=None, memory=None, commits=None, keeping_up=False,
                 **policy) -> Proposal:
    """The proposal a job's first evaluation left (a scale-up, pending unless ``policy`` approves it):
    ``make_job(name, knobs=knobs, cluster=cluster, metric_window_s=45, **policy)`` with
    ``make_snapshots``' four snapshots (``keeping_up``: of a job keeping up with its load, as a
    memory recommendation needs), ``memory`` (MetricSnapshot fields, e.g. the heap readings) set
    on each. ``commits``: pytest-django's ``django_capture_on_commit_callbacks``, to run what the
    evaluation leaves to its commit (the standby request) before returning."""
    with commits(execute=True) if commits else nullcontext():
        job = make_job(name, knobs=knobs, cluster=cluster, metric_window_s=45, **policy)
        snapshots = make_snapshots(job, keeping_up=keeping_up)
        if memory:
            MetricSnapshot.objects.filter(pk__in=[s.pk for s in snapshots]).update(**memory)
        evaluation_run(job=job)
    return Proposal.objects.select_related("job").get(job=job)


def reason_json(code, **data) -> dict:
    """A coded reason as the web app stores it: ``{"code", "data"}`` (``webapp.proposals.codes.Reason``)."""
    return Reason(code, data).as_json()


def command_output(*args) -> str:
    """What ``manage.py`` prints for the command line ``args`` (``call_command``)."""
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def job_admin_form(user, **fields):
    """The admin's add form of a job as ``user`` gets it, bound to a new job's fields with ``fields`` changed."""
    request = RequestFactory().get("/admin/jobs/job/add/")
    request.user = user
    form_class = site._registry[Job].get_form(request)
    return form_class(data={"name": "x", "query_name": "", "topic": "", "config": "{}", "knobs": "[]",
                            "spark_ui_url": "", "spark_ui_hosts": "[]", "spark_ui_ports": "4040-4056",
                            "health": "collecting", "last_error": "", "health_reason": "{}", "scaler_state": "{}",
                            "plan_stages": "[]", "capacity": "0", **fields})

def make_audit_trail(job: Job, events: int) -> None:
    """``events`` audit events of ``job``, written 10,000 per query: the actor alternates between a policy
    and a spreadsheet formula, every fourth event has a coded reason."""
    reason = reason_json("load_above_band", load=1.42, band=[0.6, 0.8])
    for start in range(0, events, 10_000):
        AuditEvent.objects.bulk_create([
            AuditEvent(job=job, actor_name="policy:ds2" if i % 2 else "=cmd|' /C calc'!A0",
                       action="proposed" if i % 3 else "approved", before={"cores": 2}, after={"cores": 3},
                       reason=reason if i % 4 == 0 else {}) for i in range(start, min(events, start + 10_000))])


def read_audit_export(body: str, fmt: str) -> tuple[list, int | None]:
    """An audit export (``"csv"`` or ``"json"``) as a client reads it: its rows (CSV: dicts of the header's
    columns; JSON: the events) and the row count its end gives, None when it ends without one. A complete
    export's count is the number of its rows; a cut JSON export does not parse (``([], None)``)."""
    if fmt == "csv":
        header, *records = list(csv.reader(StringIO(body, newline=""))) or [[]]
        count = None
        if records and records[-1][:1] == [CSV_TRAILER]:
            trailer = records.pop()
            count = int(trailer[1]) if len(trailer) == 2 and trailer[1].isdigit() else None
        return [dict(zip(header, record, strict=False)) for record in records], count
    try:
        export = json.loads(body)
    except ValueError:
        return [], None
    return export["events"], export.get("count")
