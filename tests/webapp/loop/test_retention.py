"""Metric retention (``webapp.loop.retention``): per-minute roll-ups, the pruning windows, what the live
loop reads is kept, and the charts draw the roll-ups past the raw window."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.db import connection
from django.utils import timezone

from tests.webapp.factories import make_job, make_snapshots, make_user
from webapp.dashboard.reads import chart_data
from webapp.dashboard.views import _rescale_points
from webapp.jobs.models import Evaluation, MetricRollup, MetricSnapshot, VertexRollup
from webapp.loop import tasks
from webapp.loop.retention import minute_of, prune_metrics, raw_cutoff, rollup_of
from webapp.proposals.models import AuditEvent, Proposal

pytestmark = pytest.mark.django_db

HOUR = timedelta(hours=1)


@pytest.fixture
def windows(settings):
    """Raw kept 2 h, roll-ups 6 h, small batches (several transactions per job)."""
    settings.SCALER_RETENTION_RAW_S = 2 * 3600.0
    settings.SCALER_RETENTION_ROLLUP_S = 6 * 3600.0
    settings.SCALER_RETENTION_BATCH = 50
    return settings


def _row(at, window_s, batches, backlog, arrival, capacity=0.0, ratio=1.0, executors=1, cores=2, pk=1):
    return (pk, at, window_s, batches, backlog, arrival, capacity, ratio, executors, cores)


def test_a_rollup_weights_rates_by_window_keeps_the_last_and_largest_backlog_and_sums_batches():
    at = timezone.now().replace(second=0, microsecond=0)
    rows = [_row(at, 10.0, 2, 500, 100.0, ratio=1.0, pk=1), _row(at + timedelta(seconds=20), 30.0, 4, 300, 200.0,
                                                                 ratio=3.0, cores=4, pk=2),
            _row(at + timedelta(seconds=40), 15.0, 0, 9999, 0.0, pk=3)]  # no batch: not a measurement
    vertices = {1: [("v0", "scan", 0, 2, 10.0)], 2: [("v0", "scan", 0, 2, 30.0)], 3: [("v0", "scan", 0, 2, 15.0)]}
    rollup, stages = rollup_of(7, at, rows, vertices)
    assert rollup.arrival_rate_per_s == pytest.approx((100 * 10 + 200 * 30) / 40)
    assert rollup.batch_ratio == pytest.approx((1 * 10 + 3 * 30) / 40)
    assert (rollup.backlog_last, rollup.backlog_max, rollup.batches, rollup.snapshots) == (300, 500, 6, 3)
    assert (rollup.data_s, rollup.window_s, rollup.cores) == (40.0, 55.0, 4)
    # utilization 10/10/2 = 0.5 over 10 s, 30/30/2 = 0.5 over 30 s
    assert [(s.vertex_id, s.utilization) for s in stages] == [("v0", pytest.approx(0.5))]


def test_a_minute_without_any_batch_rolls_up_to_a_gap():
    at = timezone.now().replace(second=0, microsecond=0)
    rollup, stages = rollup_of(7, at, [_row(at, 15.0, 0, 10, 5.0)], {})
    assert (rollup.arrival_rate_per_s, rollup.backlog_last, rollup.data_s, stages) == (None, None, 0.0, [])


def _history(job, *, hours: float, end, run_every_h: float = 1.0):
    """Snapshots every 60 s over ``hours`` up to ``end``, a new run every ``run_every_h`` hours."""
    count = int(hours * 60)
    made = []
    for start in range(0, count, int(run_every_h * 60)):
        n = min(int(run_every_h * 60), count - start)
        chunk = make_snapshots(job, count=n, window_s=60.0, end=end - timedelta(minutes=count - start - n))
        MetricSnapshot.objects.filter(pk__in=[s.pk for s in chunk]).update(run_id=f"run-{start}")
        made += chunk
    return made


def test_pruning_leaves_raw_rows_in_the_raw_window_and_rollups_in_theirs(windows):
    now = timezone.now()
    job = make_job()
    _history(job, hours=8, end=now)
    event = AuditEvent.objects.create(job=job, actor_name="system", action="config_changed")
    AuditEvent.objects.filter(pk=event.pk).update(at=now - 400 * 24 * HOUR)
    done = prune_metrics(now=now)
    assert AuditEvent.objects.filter(pk=event.pk).exists()  # the audit trail is never pruned
    raw = job.snapshots.order_by("collected_at").values_list("collected_at", flat=True)
    assert raw[0] >= minute_of(now - 2 * HOUR)
    minutes = list(job.rollups.order_by("minute").values_list("minute", flat=True))
    assert minutes[0] >= minute_of(now - 6 * HOUR) and minutes[-1] < minute_of(now - 2 * HOUR)
    assert len(minutes) == len(set(minutes)) and done["rollups"] == len(minutes) >= 3 * 60
    assert VertexRollup.objects.filter(rollup__job=job).count() == 3 * len(minutes)
    # Re-running changes nothing; a second run at the same time (the beat twice) neither.
    assert prune_metrics(now=now) == {"snapshots": 0, "rollups": 0, "rollups_deleted": 0, "evaluations": 0}
    assert list(job.rollups.order_by("minute").values_list("minute", flat=True)) == minutes


@pytest.mark.parametrize("batch", [2, 4, 5])
def test_a_batch_never_splits_a_minute(windows, batch):
    """Three snapshots a minute over four old minutes, pruned ``batch`` at a time: a batch that ends inside a
    minute leaves that minute for the next one, and a minute of more than ``batch`` snapshots goes whole."""
    windows.SCALER_RETENTION_BATCH = batch
    now = timezone.now()
    job = make_job()
    first = minute_of(now - 3 * HOUR)
    make_snapshots(job, count=12, window_s=20.0, end=first + timedelta(minutes=3, seconds=50))
    newest = make_snapshots(job, count=1, end=now)
    MetricSnapshot.objects.filter(pk=newest[0].pk).update(run_id="run-2")  # the newest run starts now
    prune_metrics(now=now)
    rollups = list(job.rollups.order_by("minute").values_list("minute", "snapshots", "batches"))
    assert rollups == [(first + timedelta(minutes=m), 3, 9) for m in range(4)]
    assert list(job.snapshots.values_list("pk", flat=True)) == [newest[0].pk]


def test_a_minute_rolled_up_already_keeps_its_rollup(windows):
    now = timezone.now()
    job = make_job()
    _history(job, hours=3, end=now)
    old = minute_of(now - 2.5 * HOUR)
    MetricRollup.objects.create(job=job, minute=old, snapshots=1, window_s=1.0, data_s=1.0, batches=1,
                                arrival_rate_per_s=1.0)
    prune_metrics(now=now)
    assert job.rollups.get(minute=old).arrival_rate_per_s == 1.0
    assert not job.snapshots.filter(collected_at__lt=minute_of(now - 2 * HOUR)).exists()


def test_rollups_past_their_window_are_deleted(windows):
    now = timezone.now()
    job = make_job()
    MetricRollup.objects.create(job=job, minute=minute_of(now - 7 * HOUR), snapshots=1, window_s=1.0, data_s=1.0,
                                batches=1)
    assert prune_metrics(now=now)["rollups_deleted"] == 1
    assert not MetricRollup.objects.exists()


def test_what_the_loop_reads_is_kept(windows):
    now = timezone.now()
    job = make_job(metric_window_s=3 * 3600)
    # The metric window plus the hour an execution's cost is followed.
    assert raw_cutoff(job=job, now=now) == minute_of(now - 4 * HOUR)
    # The metric window before a proposal awaiting its verification.
    proposal = Proposal.objects.create(job=job, status=Proposal.Status.SUCCEEDED, current_config={},
                                       proposed_config={})
    Proposal.objects.filter(pk=proposal.pk).update(created_at=now - 5 * HOUR)
    assert raw_cutoff(job=job, now=now) == minute_of(now - 8 * HOUR)
    Proposal.objects.filter(pk=proposal.pk).update(verification=Proposal.Verification.VERIFIED)
    assert raw_cutoff(job=job, now=now) == minute_of(now - 4 * HOUR)


def test_the_first_snapshot_of_the_newest_run_is_kept(windows):
    now = timezone.now()
    job = make_job()
    made = _history(job, hours=4, end=now, run_every_h=4)  # one run
    tasks.prune_metrics()
    assert job.snapshots.filter(pk=made[0].pk).exists()
    assert job.snapshots.filter(collected_at__lt=now - 2 * HOUR).count() == 1


def test_the_charts_draw_the_rollups_past_the_raw_window(windows):
    now = timezone.now()
    job = make_job()
    _history(job, hours=6, end=now)
    before = chart_data(job=job, range_s=24 * 3600)
    prune_metrics(now=now)
    after = chart_data(job=job, range_s=24 * 3600)
    assert job.snapshots.earliest("collected_at").collected_at >= minute_of(now - 2 * HOUR)
    assert after.t[0] <= (now - 5.9 * HOUR).isoformat()  # the pruned hours are still drawn
    drawn = [a for t, a in zip(after.t, after.arrival_rate) if t < (now - 2 * HOUR).isoformat()]
    assert drawn and all(a == pytest.approx(900.0) for a in drawn)
    assert after.backlog[0] is not None and len(after.t) == pytest.approx(len(before.t), abs=3)
    assert [name for name, _values in after.utilization.values()] == [n for n, _v in before.utilization.values()]
    assert all(v is not None for _name, values in after.utilization.values() for v in values[:5])


def test_the_rescales_chart_draws_the_cores_of_the_rollups_too(windows):
    now = timezone.now()
    job = make_job()
    _history(job, hours=4, end=now)
    prune_metrics(now=now)
    points = _rescale_points(job, now - 5 * HOUR)
    assert points["t"][0] <= (now - 3.9 * HOUR).isoformat() and set(points["cores"]) == {1}
    assert len(points["t"]) == pytest.approx(4 * 60, abs=3)


def test_the_retention_beat_runs_the_registered_task():
    entry = django_settings.CELERY_BEAT_SCHEDULE["prune-metrics"]
    assert entry["task"] == tasks.prune_metrics.name
    assert entry["schedule"] == django_settings.SCALER_RETENTION_INTERVAL_S


@pytest.mark.django_db(transaction=True)
def test_two_runs_at_once_roll_up_each_minute_once(windows):
    now = timezone.now()
    job = make_job()
    _history(job, hours=5, end=now)
    results: list[dict] = []

    def run() -> None:
        try:
            results.append(prune_metrics(now=now))
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    minutes = list(job.rollups.values_list("minute", flat=True))
    assert len(results) == 2 and sum(r["rollups"] for r in results) >= len(minutes) >= 3 * 60 - 2
    assert len(set(minutes)) == len(minutes)
    assert VertexRollup.objects.filter(rollup__job=job).count() == 3 * len(minutes)
    assert not job.snapshots.filter(collected_at__lt=minute_of(now - 2 * HOUR)).exists()


def test_the_job_page_offers_a_week_drawn_from_the_rollups(windows, client):
    now = timezone.now()
    job = make_job()
    _history(job, hours=4, end=now)
    prune_metrics(now=now)
    client.force_login(make_user("vera", role="viewer"))
    assert 'href="?range=7d"' in client.get(f"/jobs/{job.pk}/?range=7d").content.decode()
    series = client.get(f"/jobs/{job.pk}/live/?range=7d").json()["series"]["data"]
    arrival = next(trace for trace in series if trace["name"] == "input (arrival) rate")
    assert arrival["x"][0] <= (now - 3.5 * HOUR).isoformat()  # a point per 28 min (7 d / 360)
    assert arrival["y"][0] == pytest.approx(900.0)


def test_evaluations_past_the_raw_window_go_except_the_newest_and_a_proposals(windows):
    now = timezone.now()
    job, other = make_job(), make_job(name="other")
    made = [Evaluation.objects.create(job=job, decision="no-change", window_s=60.0) for _ in range(5)]
    for age_h, evaluation in zip((5, 4, 3, 1, 0), made, strict=True):
        Evaluation.objects.filter(pk=evaluation.pk).update(created_at=now - age_h * HOUR)
    cited = Proposal.objects.create(job=job, evaluation=made[1], status=Proposal.Status.REJECTED,
                                    current_config={}, proposed_config={})
    lone = Evaluation.objects.create(job=other, decision="no-change", window_s=60.0)
    Evaluation.objects.filter(pk=lone.pk).update(created_at=now - 9 * HOUR)  # its job's newest: kept
    assert prune_metrics(now=now)["evaluations"] == 2  # 5 h and 3 h old, cited by nothing
    assert set(Evaluation.objects.values_list("pk", flat=True)) == {made[1].pk, made[3].pk, made[4].pk, lone.pk}
    assert Proposal.objects.get(pk=cited.pk).evaluation_id == made[1].pk
    assert prune_metrics(now=now)["evaluations"] == 0
