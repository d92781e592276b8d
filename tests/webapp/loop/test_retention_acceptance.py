"""Acceptance of bounded storage: 200,000 audit events export in constant memory, and 1 day of
snapshots of 10 jobs is pruned to the configured windows while the charts still draw the pruned hours.

The windows are scaled down (raw 6 h, roll-ups 18 h, over a day of snapshots) so that one day of data
crosses both boundaries. Memory is measured with ``tracemalloc`` while the streamed response is consumed;
the figures are printed (``pytest -s``), and the test asserts the bound, never a duration."""

from __future__ import annotations

import time
import tracemalloc
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.webapp.factories import make_audit_trail, make_job, make_user
from webapp.dashboard.reads import chart_data
from webapp.jobs.models import MetricRollup, MetricSnapshot, VertexSnapshot
from webapp.loop.retention import minute_of, prune_metrics
from webapp.proposals.exports import CSV_TRAILER

pytestmark = [pytest.mark.django_db, pytest.mark.slow, pytest.mark.timeout(900)]

EVENTS = 200_000
JOBS = 10
INTERVAL_S = 15
HOUR = timedelta(hours=1)


def _consume(response) -> tuple[int, int, float, bytes]:
    """(bytes, peak bytes allocated while consuming, seconds, the last chunk)."""
    tracemalloc.start()
    started = time.perf_counter()
    total, last = 0, b""
    for chunk in response.streaming_content:
        total, last = total + len(chunk), chunk
    seconds = time.perf_counter() - started
    _current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return total, peak, seconds, last


def test_the_audit_export_of_200000_events_streams_in_constant_memory(client):
    job = make_job()
    make_audit_trail(job, EVENTS)
    client.force_login(make_user("vera", role="viewer"))
    for fmt in ("csv", "json"):
        response = client.get(f"/audit/jobs/{job.pk}.{fmt}")
        assert response.streaming
        total, peak, seconds, last = _consume(response)
        print(f"\n{fmt}: {EVENTS} events, {total / 1e6:.1f} MB in {seconds:.1f} s (traced), "
              f"peak {peak / 1e6:.2f} MB ({peak / total:.1%})")
        assert total > EVENTS * 80  # every event is there, and the export's end says so
        end = f"{CSV_TRAILER},{EVENTS}\r\n" if fmt == "csv" else f'"count": {EVENTS}}}'
        assert last.endswith(end.encode())
        assert peak < 0.10 * total


def _fill_snapshots(now) -> list:
    jobs = [make_job(name=f"job-{i}") for i in range(JOBS)]
    count = 24 * 3600 // INTERVAL_S
    for job in jobs:
        snapshots = MetricSnapshot.objects.bulk_create([
            MetricSnapshot(job=job, collected_at=now - timedelta(seconds=INTERVAL_S * (count - 1 - i)),
                           run_id=f"run-{i // 240}", window_s=INTERVAL_S, batches=3, backlog=1000 + i % 50,
                           arrival_rate_per_s=900.0, input_rate_per_s=880.0, processed_rate_per_s=1200.0,
                           batch_ratio=2.5, executors=1, cores=2) for i in range(count)], batch_size=2000)
        VertexSnapshot.objects.bulk_create([
            VertexSnapshot(snapshot=s, vertex_id=f"v{pos}", name=f"stage {pos}", position=pos, tasks=2,
                           busy_s=3.0 * (pos + 1), records_in=1000, records_out=1000)
            for s in snapshots for pos in range(3)], batch_size=5000)
    return jobs


def test_a_day_of_snapshots_of_10_jobs_is_pruned_to_the_windows_and_still_charted(settings):
    settings.SCALER_RETENTION_RAW_S = 6 * 3600.0
    settings.SCALER_RETENTION_ROLLUP_S = 18 * 3600.0
    now = timezone.now()
    jobs = _fill_snapshots(now)
    started = time.perf_counter()
    done = prune_metrics(now=now)
    print(f"\npruned {done} in {time.perf_counter() - started:.1f} s")
    raw_from, rollup_from = minute_of(now - 6 * HOUR), minute_of(now - 18 * HOUR)
    assert not MetricSnapshot.objects.filter(collected_at__lt=raw_from).exists()
    assert not VertexSnapshot.objects.filter(snapshot__collected_at__lt=raw_from).exists()
    assert not MetricRollup.objects.filter(minute__lt=rollup_from).exists()
    assert not MetricRollup.objects.filter(minute__gte=raw_from).exists()
    assert MetricRollup.objects.count() == JOBS * 12 * 60  # every minute of the rolled-up 12 hours
    assert done["snapshots"] == JOBS * 24 * 3600 // INTERVAL_S - MetricSnapshot.objects.count()
    assert MetricSnapshot.objects.count() >= JOBS * 6 * 3600 // INTERVAL_S  # the raw window is whole
    chart = chart_data(job=jobs[3], range_s=24 * 3600)
    assert chart.t[0] <= (now - 17.9 * HOUR).isoformat()
    pruned = [(a, b) for t, a, b in zip(chart.t, chart.arrival_rate, chart.backlog) if t < raw_from.isoformat()]
    assert len(pruned) > 100 and all(a == pytest.approx(900.0) and b is not None for a, b in pruned)
    assert len(chart.utilization) == 3 and all(v is not None for _n, values in chart.utilization.values()
                                               for v in values)
