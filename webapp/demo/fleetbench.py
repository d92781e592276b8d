"""The fleet benchmark's measurements (``manage.py bench_fleet``): the jobs it registers, and what it
reads back after the run: whether each job was collected and evaluated within its interval, the CPU
time per collection and per evaluation (the workers' ``webapp.loop.timing`` records), the database
rows per job per day before and after retention, and the jobs overview's server time.

**Within its interval.** The collect beat enqueues every job each ``SCALER_COLLECT_INTERVAL_S``; a
job is collected within its interval over the measured period when no two consecutive snapshots
(and neither end of the period and its nearest snapshot) are more than :data:`GAP_TOLERANCE` intervals
apart. A missed beat (the job's previous collection still queued or running) makes a gap of two
intervals; the queueing jitter of a kept beat stays below half an interval. Evaluations likewise,
from the stored ``Evaluation`` rows.

**Server time** of the overview is measured in the process that serves it (Django's test client:
the whole middleware stack, the view, its queries and the template, no network), while the
workers run.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from sparkclient.demo.fakefleet import CONFIG, KNOBS
from webapp.accounts.roles import user_set_role
from webapp.jobs.models import Evaluation, Job, MetricRollup, MetricSnapshot, VertexRollup, VertexSnapshot
from webapp.jobs.services import job_register
from webapp.loop.evaluate import TIMING_PREFIX

#: Most intervals between two consecutive collections (or evaluations) of a job on time.
GAP_TOLERANCE = 1.5
DAY_S = 86400.0
#: The user the overview is requested as.
BENCH_USER = "fleet-bench"


def job_names(count: int) -> list[str]:
    """The benchmark's job names, ``fleet-0000`` …"""
    return [f"fleet-{i:04d}" for i in range(count)]


def seed(*, urls: dict[str, str], window_s: float) -> int:
    """Register a job per ``{name: Spark UI URL}`` (the replayed query's knobs and configuration, a
    metric window of ``window_s``) and an operator to request the overview as; returns the jobs."""
    for name, url in urls.items():
        job_register(name=name, query_name="ds2q", config=dict(CONFIG), knobs=KNOBS, spark_ui_url=url,
                     policy={"metric_window_s": window_s})
    user = get_user_model().objects.create_user(username=BENCH_USER, password=None)
    user_set_role(user=user, role="operator")
    return len(urls)


def percentiles(values: Sequence[float]) -> dict[str, float | int | None]:
    """``{"p50", "p99", "n"}`` of ``values`` (inclusive method; None for no values)."""
    if not values:
        return {"p50": None, "p99": None, "n": 0}
    if len(values) == 1:
        return {"p50": round(values[0], 2), "p99": round(values[0], 2), "n": 1}
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return {"p50": round(cuts[49], 2), "p99": round(cuts[98], 2), "n": len(values)}


def timing_records(logs: Iterable[Path]) -> list[dict]:
    """The ``webapp.loop.timing`` records in the worker logs (``loop-timing {json}`` lines)."""
    records = []
    for path in logs:
        for line in path.read_text(errors="replace").splitlines():
            at = line.find(TIMING_PREFIX)
            if at >= 0:
                try:
                    records.append(json.loads(line[at + len(TIMING_PREFIX):]))
                except ValueError:
                    continue
    return records


def cpu_ms(records: list[dict], *, start_s: float, end_s: float) -> dict[str, dict]:
    """CPU ms per collection (beats that stored a snapshot) and per evaluation (beats that stored an
    evaluation) in ``[start_s, end_s]``: p50, p99 and how many."""
    kept = [r for r in records if start_s <= r["at"] <= end_s]
    return {"collection": percentiles([r["collect_cpu_ms"] for r in kept if r["collected"]]),
            "evaluation": percentiles([r["evaluate_cpu_ms"] for r in kept if r.get("evaluated")])}


def on_time(times: Sequence[float], *, start_s: float, end_s: float, interval_s: float) -> bool:
    """Whether events at ``times`` (epoch s) leave no gap over :data:`GAP_TOLERANCE` intervals in
    ``[start_s, end_s]``, counting both ends of the period."""
    inside = sorted(t for t in times if start_s <= t <= end_s)
    points = [start_s, *inside, end_s]
    return bool(inside) and all(b - a <= GAP_TOLERANCE * interval_s for a, b in zip(points, points[1:]))


def _times(model, field: str, *, start: datetime, end: datetime) -> dict[int, list[float]]:
    by_job: dict[int, list[float]] = {}
    rows = model.objects.filter(**{f"{field}__gte": start, f"{field}__lte": end}).values_list("job_id", field)
    for job_id, at in rows.iterator(chunk_size=10_000):
        by_job.setdefault(job_id, []).append(at.timestamp())
    return by_job


def within_interval(*, start: datetime, end: datetime, interval_s: float) -> dict[str, float]:
    """The fractions of jobs collected and evaluated within their interval in ``[start, end]``."""
    ids = list(Job.objects.values_list("pk", flat=True))
    out = {}
    for key, model, field in (("collected", MetricSnapshot, "collected_at"), ("evaluated", Evaluation, "created_at")):
        times = _times(model, field, start=start, end=end)
        good = sum(on_time(times.get(i, []), start_s=start.timestamp(), end_s=end.timestamp(), interval_s=interval_s)
                   for i in ids)
        out[key] = round(good / len(ids), 4) if ids else 0.0
    return out


def rows_per_job_per_day(*, start: datetime, end: datetime, interval_s: float) -> dict[str, float]:
    """Database rows per job per day at one collection and one evaluation per ``interval_s`` (the
    stages per snapshot as measured in ``[start, end]``), and the retention settings
    (``SCALER_RETENTION_RAW_S``, ``SCALER_RETENTION_ROLLUP_S``):

    - ``written``: snapshot, stage and evaluation rows a job writes per day (before retention);
    - ``after_retention``: what a day of history keeps once past the raw window: one roll-up per
      minute with a roll-up per stage (evaluations past it are pruned, but for those a proposal cites);
    - ``held_metrics``: the rows a job holds in steady state: snapshots, stages and evaluations of
      the raw window, and the roll-ups of the roll-up window; ``evaluations``: written per day;
    - ``measured_written``: the snapshot, stage and evaluation rows this run wrote per job per day
      (below ``written`` when beats were missed).
    """
    jobs = max(1, Job.objects.count())
    span_s = max(1.0, (end - start).total_seconds())
    snapshots = MetricSnapshot.objects.filter(collected_at__gte=start, collected_at__lte=end)
    snapshot_count = snapshots.count()
    stages = VertexSnapshot.objects.filter(snapshot__in=snapshots).count() / max(1, snapshot_count)
    measured = (snapshot_count * (1 + stages)
                + Evaluation.objects.filter(created_at__gte=start, created_at__lte=end).count()) * DAY_S / span_s / jobs
    beats = DAY_S / interval_s
    rollups = DAY_S / 60 * (1 + stages)
    raw_days, rollup_days = settings.SCALER_RETENTION_RAW_S / DAY_S, settings.SCALER_RETENTION_ROLLUP_S / DAY_S
    return {"written": round(beats * (2 + stages)), "after_retention": round(rollups),
            "evaluations": round(beats), "stages_per_snapshot": round(stages, 2),
            "held_metrics": round(beats * (2 + stages) * raw_days + rollups * rollup_days),
            "measured_written": round(measured)}


def overview_server_ms(*, requests: int) -> dict:
    """The jobs overview ``/`` requested ``requests`` times in this process as :data:`BENCH_USER`
    (after one unmeasured request): server time p50/p99 in ms, the CPU time of the serving thread
    (``cpu_ms``: the database's own time is not in it; on a loaded machine the wall time also holds
    the waits for a core), and the SQL queries of one request."""
    client = Client()
    client.force_login(get_user_model().objects.get(username=BENCH_USER))
    response = client.get("/")
    if response.status_code != 200:
        raise RuntimeError(f"the overview answered HTTP {response.status_code}")
    with CaptureQueriesContext(connection) as captured:
        client.get("/")
    queries = len(captured)  # now: the next request resets the connection's query log
    times, cpu = [], []
    for _ in range(requests):
        started, started_cpu = time.perf_counter(), time.thread_time()
        client.get("/")
        times.append((time.perf_counter() - started) * 1000)
        cpu.append((time.thread_time() - started_cpu) * 1000)
    rows = response.content.count(b"<tr data-job=")
    return {**percentiles(times), "cpu_ms": percentiles(cpu), "queries": queries, "rows": rows}


def counts() -> dict[str, int]:
    """Row counts of the metric tables."""
    return {m.__name__: m.objects.count() for m in (MetricSnapshot, VertexSnapshot, Evaluation, MetricRollup,
                                                   VertexRollup)}
