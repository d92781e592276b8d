"""A job whose micro-batches take 2 minutes shows points on every chart, in Chromium: with 15 s
collect windows only one in eight completes a batch, yet every row of the job page's series chart
(rates, backlog, batch ratio, cores, utilization) draws its values."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.browser.conftest import screenshot
from tests.browser.test_dashboard_browser import login
from tests.webapp.factories import make_job, make_user
from webapp.jobs.models import Job, MetricSnapshot, VertexSnapshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]

WINDOW_S = 15.0
BATCH_S = 120.0
EVERY = 8  # 120 s of batch per 8 windows of 15 s


def slow_job(*, windows: int = 120, fast_windows: int = 0) -> Job:
    """The last ``windows`` collect windows of a job (30 min by default), every ``EVERY``-th of which
    completes one 120 s batch of the job's three stages; the others complete none (the batch is still
    running). Before them, ``fast_windows`` windows that each complete a 2 s batch."""
    job = make_job("two-minute-batches")
    start = timezone.now() - timedelta(seconds=WINDOW_S * (fast_windows + windows - 1))
    for i in range(fast_windows + windows):
        fast = i < fast_windows
        done = fast or (i - fast_windows) % EVERY == EVERY - 1
        batch_s = 2.0 if fast else BATCH_S
        snapshot = MetricSnapshot.objects.create(
            job=job, collected_at=start + timedelta(seconds=WINDOW_S * i), run_id="run-1", config=job.config,
            window_s=WINDOW_S, batches=1 if done else 0, arrival_rate_per_s=500.0 if done else 0.0,
            input_rate_per_s=480.0 if done else 0.0, processed_rate_per_s=480.0 if done else 0.0,
            backlog=20_000 + 100 * i if done else 0, batch_duration_s=batch_s if done else 0.0,
            trigger_interval_s=10.0, batch_overhead_s=0.5 if done else 0.0,
            batch_ratio=batch_s / 10.0 if done else 0.0, executors=1, cores=2)
        if done:
            VertexSnapshot.objects.bulk_create([
                VertexSnapshot(snapshot=snapshot, vertex_id="v0", name="stage 0", position=0, is_source=True, tasks=2,
                               busy_s=100.0, records_in=57_600, records_out=57_600, upstream=[]),
                VertexSnapshot(snapshot=snapshot, vertex_id="v1", name="stage 1", position=1, tasks=2, busy_s=110.0,
                               records_in=57_600, records_out=100, upstream=["v0"]),
                VertexSnapshot(snapshot=snapshot, vertex_id="v2", name="stage 2", position=2, tasks=2, busy_s=4.0,
                               records_in=100, records_out=10, upstream=["v1"])])
    Job.objects.filter(pk=job.pk).update(health=Job.Health.RUNNING)
    return job


#: Per y-axis of the series chart: the traces' non-null values (from the figure Plotly drew, the
#: div's ``data``), the marker points and the line segments Chromium rendered in its subplot.
SUBPLOTS_JS = """() => {
    const gd = document.getElementById('series');
    const axes = {};
    for (const trace of gd.data) {
        if (trace.name === 'rescale') continue;
        const axis = trace.yaxis || 'y';
        axes[axis] = axes[axis] || {values: 0, points: 0, lines: 0};
        axes[axis].values += trace.y.filter(v => v !== null && v !== undefined).length;
    }
    for (const subplot of gd.querySelectorAll('.cartesianlayer .subplot')) {
        const axis = [...subplot.classList].find(c => c.startsWith('x')).replace(/^x\\d*/, '');
        if (!axes[axis]) continue;
        axes[axis].points += subplot.querySelectorAll('.scatterlayer .trace .points path').length;
        axes[axis].lines += [...subplot.querySelectorAll('.scatterlayer .trace .js-line')]
            .filter(p => (p.getAttribute('d') || '').search(/[LHV]/) > 0).length;
    }
    return axes; }"""


def test_two_minute_batches_draw_points_on_every_chart(page):
    make_user("operator")
    job = slow_job()
    login(page)
    page.goto(f"/jobs/{job.pk}/")
    page.wait_for_selector("#series .main-svg .scatterlayer")
    page.wait_for_load_state("networkidle")
    screenshot(page, "pagechecks-two-minute-batches-job")
    axes = page.evaluate(SUBPLOTS_JS)
    assert set(axes) == {"y", "y2", "y3", "y4", "y5"}, axes
    batches = 120 // EVERY
    for axis, drawn in axes.items():
        assert drawn["values"] >= batches, (axis, drawn)  # every completed batch is a value
        assert drawn["lines"] >= 1, (axis, drawn)  # joined across the windows the batch was running
        if axis != "y4":  # executors and cores are steps without markers
            assert drawn["points"] >= batches, (axis, drawn)
    assert page.problems == [], page.problems


#: Per trace of the series chart: its values from ``since`` (ISO time) on, null where it draws a gap.
TRACES_SINCE_JS = """(since) => document.getElementById('series').data.filter(t => t.name !== 'rescale')
    .map(t => ({name: t.name, y: t.y.filter((_y, i) => t.x[i] >= since)}))"""


def test_a_job_that_turns_slow_keeps_its_points_joined(page):
    """30 min of 2 s batches, then 15 min of 2-minute batches: the slow batches are joined as they
    are when the job was always slow; only a stall longer than the batches is a gap."""
    make_user("operator")
    fast_windows = 120
    job = slow_job(windows=60, fast_windows=fast_windows)
    slow_since = job.snapshots.order_by("collected_at")[fast_windows].collected_at
    login(page)
    page.goto(f"/jobs/{job.pk}/")
    page.wait_for_selector("#series .main-svg .scatterlayer")
    page.wait_for_load_state("networkidle")
    screenshot(page, "pagechecks-turns-slow-job")
    for trace in page.evaluate(TRACES_SINCE_JS, slow_since.isoformat()):
        drawn = [i for i, y in enumerate(trace["y"]) if y is not None]
        assert len(drawn) >= 60 // EVERY, trace
        assert None not in trace["y"][drawn[0]:drawn[-1] + 1], trace  # a running batch is not a stall
