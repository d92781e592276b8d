"""Benchmark: server time of the dashboard with 100 jobs × 24 h of 15 s snapshots (5,760 per job:
576,000 snapshots and 1,728,000 vertex rows). The target is 300 ms (median of 20 requests) for the
jobs overview and a job page. Prints the figures; asserts nothing about time (a benchmark, not a test).

Run it from the repository root (it builds the fleet in a temporary SQLite database)::

    python -m tests.webapp.dashboard.bench_dashboard [--jobs 100] [--requests 20]

``tests/webapp/dashboard/test_dashboard_fleet.py`` renders the same pages with the same fleet and checks what
they show, without timing them."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from scaling.values.reasons import PlanReason, Reason

JOBS = 100
SNAPSHOTS_PER_JOB = 24 * 3600 // 15  # 5760
TARGET_MS = 300.0
REQUESTS = 20

#: The pages timed: (name, URL with ``{job}`` for a job's id).
PAGES = [("jobs overview", "/"), ("jobs overview (live rows)", "/jobs/live/"), ("job page", "/jobs/{job}/"),
         ("job page, 24 h range", "/jobs/{job}/?range=24h"), ("job page (live JSON)", "/jobs/{job}/live/"),
         ("history page", "/jobs/{job}/history/")]


def _bulk_insert(table: str, columns: list[str], rows: list[tuple]) -> None:
    from django.db import connection

    sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join(['%s'] * len(columns))})"
    with connection.cursor() as cursor:
        for start in range(0, len(rows), 50_000):
            cursor.executemany(sql, rows[start:start + 50_000])


def make_fleet(now, jobs_count: int = JOBS) -> list:
    """``jobs_count`` jobs with 24 h of snapshots each (raw multi-row inserts: the ORM would take minutes)."""
    from django.db import connection

    from tests.webapp.dashboard_factories import make_evaluation, make_succeeded
    from tests.webapp.factories import make_job
    from webapp.jobs.models import Job, MetricSnapshot, VertexSnapshot

    jobs = [make_job(f"job-{i:03d}", metric_window_s=45) for i in range(jobs_count)]
    adapt = connection.ops.adapt_datetimefield_value
    config = json.dumps(jobs[0].config)
    times = [adapt(now - timedelta(seconds=15 * (SNAPSHOTS_PER_JOB - 1 - k))) for k in range(SNAPSHOTS_PER_JOB)]
    next_id = (MetricSnapshot.objects.order_by("-id").values_list("id", flat=True).first() or 0) + 1
    snapshots, vertices = [], []
    upstream = ["[]", '["v0"]', '["v1"]']
    vertex_id = (VertexSnapshot.objects.order_by("-id").values_list("id", flat=True).first() or 0) + 1
    for job in jobs:
        for k, at in enumerate(times):
            wave = (k % 240) / 240.0
            snapshots.append((next_id, job.pk, at, "run-1", config, 15.0, 7, int(2000 * wave), 900.0 + 300 * wave,
                              880.0, 870.0, 1.8, 2.0, 0.2, 0.9, 2, 2, 0, 0, "[]", "{}"))
            for pos, busy in enumerate((3.0, 12.0 + 6 * wave, 1.0)):
                vertices.append((vertex_id, next_id, f"v{pos}", f"stage {pos}", pos, pos == 0, 2, busy,
                                 13_000, 13_000 if pos < 2 else 40, 0, upstream[pos]))
                vertex_id += 1
            next_id += 1
    _bulk_insert("jobs_metricsnapshot",
                 ["id", "job_id", "collected_at", "run_id", "config", "window_s", "batches", "backlog",
                  "arrival_rate_per_s", "input_rate_per_s", "processed_rate_per_s", "batch_duration_s",
                  "trigger_interval_s", "batch_overhead_s", "batch_ratio", "executors", "cores", "state_rows",
                  "state_bytes", "errors", "memory"], snapshots)
    _bulk_insert("jobs_vertexsnapshot",
                 ["id", "snapshot_id", "vertex_id", "name", "position", "is_source", "tasks", "busy_s", "records_in",
                  "records_out", "spill_bytes", "upstream"], vertices)
    Job.objects.update(health=Job.Health.RUNNING)
    for i, job in enumerate(jobs):
        make_evaluation(job, decision="no-change",
                        reasons=[Reason(PlanReason.WITHIN_BAND, data={"load": 0.62, "low": 0.4, "high": 1.0})],
                        vertices=[{"vertex_id": f"v{p}", "current": 2, "proposed": 2, "utilization": 0.5,
                                   "true_processing_rate": 4000.0, "target_data_rate": 900.0,
                                   "ideal_parallelism": 1} for p in range(3)])
        for hours_ago in (20, 8):  # two rescales in the day, drawn as markers
            make_succeeded(job, cores_from=2, cores_to=2, finished_at=now - timedelta(hours=hours_ago))
    return jobs


def median_ms(client, url: str, requests: int = REQUESTS) -> float:
    """The median server time of ``requests`` GETs of ``url`` after one warm-up, in ms."""
    client.get(url)  # warm caches (templates, query plans)
    samples = []
    for _ in range(requests):
        started = time.perf_counter()
        response = client.get(url)
        samples.append(time.perf_counter() - started)
        assert response.status_code == 200, url
    return statistics.median(samples) * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=JOBS)
    parser.add_argument("--requests", type=int, default=REQUESTS)
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="bench-dashboard-"))
    os.environ["DATABASE_URL"] = f"sqlite:///{workdir / 'bench.sqlite3'}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    import django
    from django.core.management import call_command
    from django.test import Client
    from django.test.utils import setup_test_environment
    from django.utils import timezone

    django.setup()
    setup_test_environment()  # the test client's host, in-memory e-mail
    call_command("migrate", verbosity=0)
    from django.db import transaction

    from tests.webapp.factories import make_user

    try:
        started = time.perf_counter()
        with transaction.atomic():  # one commit, not one per row
            jobs = make_fleet(timezone.now(), args.jobs)
        built_s = time.perf_counter() - started
        client = Client()
        client.force_login(make_user("bench"))
        job = jobs[len(jobs) // 2]
        print(f"{len(jobs)} jobs x {SNAPSHOTS_PER_JOB} snapshots built in {built_s:.1f} s (SQLite); server time, "
              f"median of {args.requests} (target {TARGET_MS:.0f} ms for the overview and job pages):")
        for name, url in PAGES:
            ms = median_ms(client, url.format(job=job.pk), args.requests)
            print(f"  {name:28s} {ms:7.1f} ms")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
