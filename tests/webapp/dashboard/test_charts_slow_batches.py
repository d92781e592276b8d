"""Charts of a job whose micro-batches take longer than the collect interval: most 15 s windows
complete no batch, yet the charts keep their points, and a real stall is still a gap."""

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.webapp.factories import make_job
from webapp.dashboard.figures import executors_figure, series_figure
from webapp.dashboard.reads import chart_data
from webapp.dashboard.views import _rescale_points
from webapp.jobs.models import MetricSnapshot, VertexSnapshot

pytestmark = pytest.mark.django_db


def _windows(job, *, start, count, batch_every, batch_duration_s, name="stage 0"):
    """``count`` 15 s collect windows from ``start``; every ``batch_every``-th completes one batch."""
    for i in range(count):
        done = i % batch_every == batch_every - 1
        snapshot = MetricSnapshot.objects.create(
            job=job, collected_at=start + timedelta(seconds=15 * i), run_id="run-1", config=job.config,
            window_s=15.0, batches=1 if done else 0, arrival_rate_per_s=500.0 if done else 0.0,
            processed_rate_per_s=480.0 if done else 0.0, backlog=1000 + i if done else 0,
            batch_duration_s=batch_duration_s if done else 0.0, trigger_interval_s=10.0,
            batch_ratio=batch_duration_s / 10.0 if done else 0.0, executors=1, cores=2)
        if done:
            VertexSnapshot.objects.create(snapshot=snapshot, vertex_id="v0", name=name, position=0, is_source=True,
                                          tasks=2, busy_s=100.0, records_in=60_000, records_out=60_000, upstream=[])


def _points(values):
    return [v for v in values if v is not None]


def test_two_minute_batches_draw_every_chart_without_gaps():
    job = make_job()
    _windows(job, start=timezone.now() - timedelta(minutes=30), count=120, batch_every=8, batch_duration_s=120.0)
    chart = chart_data(job=job, range_s=3600)
    for series in (chart.arrival_rate, chart.capacity_rate, chart.backlog, chart.batch_ratio, chart.cores):
        assert len(_points(series)) == 15, series
        first = next(i for i, v in enumerate(series) if v is not None)
        assert None not in series[first:], series  # a running batch is not a stall
    (_name, utilization), = chart.utilization.values()
    assert len(_points(utilization)) == 15
    figure = series_figure(chart, [])
    assert all("markers" in trace["mode"] for trace in figure["data"] if trace.get("yaxis") != "y4")


def test_a_stall_longer_than_two_batches_is_still_a_gap():
    job = make_job()
    start = timezone.now() - timedelta(minutes=30)
    _windows(job, start=start, count=40, batch_every=4, batch_duration_s=50.0)  # a batch per minute
    for i in range(40, 60):  # then 5 minutes without a batch: longer than two 50 s batches
        MetricSnapshot.objects.create(job=job, collected_at=start + timedelta(seconds=15 * i), run_id="run-1",
                                      config=job.config, window_s=15.0, batches=0)
    chart = chart_data(job=job, range_s=3600)
    assert chart.arrival_rate[-1] is None
    assert len(_points(chart.arrival_rate)) == 10


def test_the_legend_follows_the_current_stage_names():
    job = make_job()
    start = timezone.now() - timedelta(minutes=10)
    _windows(job, start=start, count=4, batch_every=1, batch_duration_s=5.0, name="Scan old")
    _windows(job, start=start + timedelta(minutes=2), count=4, batch_every=1, batch_duration_s=5.0, name="Scan new")
    chart = chart_data(job=job, range_s=3600)
    (name, _values), = chart.utilization.values()
    assert "new" in name


def test_a_job_that_turns_slow_keeps_its_slow_batches_joined():
    job = make_job()
    start = timezone.now() - timedelta(minutes=45)
    _windows(job, start=start, count=120, batch_every=1, batch_duration_s=2.0)  # 30 min of 2 s batches
    _windows(job, start=start + timedelta(minutes=30), count=60, batch_every=8, batch_duration_s=120.0)
    chart = chart_data(job=job, range_s=3600)
    slow = chart.arrival_rate[-10:]
    assert None not in slow and len(_points(chart.arrival_rate)) == 120 + 7


def test_the_rescales_chart_draws_the_cores_running_whenever_a_batch_completed():
    """Two-minute batches: one 15 s window in eight completes one. The cores running are a point at each
    completed batch with no gap between (the job page's series), each drawn with its marker."""
    job = make_job()
    _windows(job, start=timezone.now() - timedelta(minutes=30), count=120, batch_every=8, batch_duration_s=120.0)
    points = _rescale_points(job, timezone.now() - timedelta(hours=1))
    cores = points["cores"]
    assert len(_points(cores)) == 15 and set(_points(cores)) == {2}
    first = next(i for i, v in enumerate(cores) if v is not None)
    assert None not in cores[first:]  # a running batch is not a gap
    running = executors_figure(points, 1, 8)["data"][0]
    assert running["name"] == "cores running" and running["y"] == cores and "markers" in running["mode"]
