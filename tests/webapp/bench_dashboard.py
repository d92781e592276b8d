"""Server time of the dashboard with 100 jobs × 24 h of 15 s snapshots (5,760 per job: 576,000
snapshots and 1,728,000 vertex rows): the jobs overview and a job page each render in under 300 ms
(median of 20 requests). Prints the figures."""

from __future__ import annotations

import json
import statistics
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from tests.webapp.dashboard_factories import make_evaluation, make_role_user, make_succeeded
from tests.webapp.factories import make_job
from webapp.jobs.models import Job, MetricSnapshot, VertexSnapshot

pytestmark = [pytest.mark.perf, pytest.mark.django_db, pytest.mark.timeout(600)]

JOBS = 100
SNAPSHOTS_PER_JOB = 24 * 3600 // 15  # 5760
BUDGET_S = 0.300
REQUESTS = 20


def _bulk_insert(table: str, columns: list[str], rows: list[tuple]) -> None:
    sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join(['%s'] * len(columns))})"
    with connection.cursor() as cursor:
        for start in range(0, len(rows), 50_000):
            cursor.executemany(sql, rows[start:start + 50_000])


def make_fleet(now) -> list[Job]:
    """100 jobs with 24 h of snapshots each (raw multi-row inserts: the ORM would take minutes)."""
    jobs = [make_job(f"job-{i:03d}", metric_window_s=45) for i in range(JOBS)]
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
                              880.0, 870.0, 1.8, 2.0, 0.2, 0.9, 2, 2, 0, 0, "[]"))
            for pos, busy in enumerate((3.0, 12.0 + 6 * wave, 1.0)):
                vertices.append((vertex_id, next_id, f"v{pos}", f"stage {pos}", pos, pos == 0, 2, busy,
                                 13_000, 13_000 if pos < 2 else 40, 0, upstream[pos]))
                vertex_id += 1
            next_id += 1
    _bulk_insert("jobs_metricsnapshot",
                 ["id", "job_id", "collected_at", "run_id", "config", "window_s", "batches", "backlog",
                  "arrival_rate_per_s", "input_rate_per_s", "processed_rate_per_s", "batch_duration_s",
                  "trigger_interval_s", "batch_overhead_s", "batch_ratio", "executors", "cores", "state_rows",
                  "state_bytes", "errors"], snapshots)
    _bulk_insert("jobs_vertexsnapshot",
                 ["id", "snapshot_id", "vertex_id", "name", "position", "is_source", "tasks", "busy_s", "records_in",
                  "records_out", "spill_bytes", "upstream"], vertices)
    Job.objects.update(health=Job.Health.RUNNING)
    for i, job in enumerate(jobs):
        make_evaluation(job, decision="no-change", reasons=["load 0.62 within the utilization band [0.4, 1.0]"],
                        vertices=[{"vertex_id": f"v{p}", "current": 2, "proposed": 2, "utilization": 0.5,
                                   "true_processing_rate": 4000.0, "target_data_rate": 900.0,
                                   "ideal_parallelism": 1} for p in range(3)])
        for hours_ago in (20, 8):  # two rescales in the day, drawn as markers
            make_succeeded(job, cores_from=2, cores_to=2, finished_at=now - timedelta(hours=hours_ago))
    return jobs


def median_ms(client, url: str) -> float:
    client.get(url)  # warm caches (templates, query plans)
    samples = []
    for _ in range(REQUESTS):
        started = time.perf_counter()
        response = client.get(url)
        samples.append(time.perf_counter() - started)
        assert response.status_code == 200, url
    return statistics.median(samples) * 1000


def test_overview_and_job_page_render_under_300_ms_with_100_jobs_of_24_h(client):
    now = timezone.now()
    started = time.perf_counter()
    jobs = make_fleet(now)
    built_s = time.perf_counter() - started
    assert MetricSnapshot.objects.count() == JOBS * SNAPSHOTS_PER_JOB
    client.force_login(make_role_user("perf"))
    job = jobs[JOBS // 2]
    figures = {
        "jobs overview": median_ms(client, "/"),
        "jobs overview (live rows)": median_ms(client, "/jobs/live/"),
        "job page": median_ms(client, f"/jobs/{job.pk}/"),
        "job page, 24 h range": median_ms(client, f"/jobs/{job.pk}/?range=24h"),
        "job page (live JSON)": median_ms(client, f"/jobs/{job.pk}/live/"),
        "history page": median_ms(client, f"/jobs/{job.pk}/history/"),
    }
    print(f"\n{JOBS} jobs x {SNAPSHOTS_PER_JOB} snapshots built in {built_s:.1f} s; "
          f"server time, median of {REQUESTS}:")
    for name, ms in figures.items():
        print(f"  {name:28s} {ms:6.1f} ms")
    assert figures["jobs overview"] < BUDGET_S * 1000, figures
    assert figures["job page"] < BUDGET_S * 1000, figures
    assert figures["job page, 24 h range"] < BUDGET_S * 1000, figures
