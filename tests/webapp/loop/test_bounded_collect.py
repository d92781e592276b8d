"""Bounded collection: the collect-and-evaluate task has Celery soft and hard time limits, its
per-job lock outlives the hard one, and one collection makes a bounded number of Spark REST
requests, counted on the snapshot (a fake Spark UI serving the Spark 4.3.0 captures)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from celery.exceptions import SoftTimeLimitExceeded

from sparkclient.contract import control, keys
from sparkclient.contract.messages import RunnerState, StatusUpdate
from tests.capture_paths import SPARK_4_3_0
from tests.fakespark import APP, RUN_ID, fake_spark_ui
from tests.webapp.factories import CONFIG, make_job
from webapp.api.serializers import SnapshotSerializer
from webapp.jobs.models import Job
from webapp.loop import collect as collector
from webapp.loop import evaluate, tasks

pytestmark = pytest.mark.django_db

PROGRESS = json.loads((SPARK_4_3_0 / "p1_recentProgress.json").read_text())
AFTER_LAST_BATCH = datetime.fromisoformat(PROGRESS[-1]["timestamp"].replace("Z", "+00:00")).timestamp() + 3
STAGES = json.loads((SPARK_4_3_0 / "p1_app_stages.json").read_text())


def test_the_collect_task_has_soft_and_hard_time_limits_and_its_lock_outlives_them(settings):
    assert tasks.collect_job.soft_time_limit == settings.SCALER_COLLECT_SOFT_TIME_LIMIT_S
    assert tasks.collect_job.time_limit == settings.SCALER_COLLECT_TIME_LIMIT_S
    assert 0 < tasks.collect_job.soft_time_limit < tasks.collect_job.time_limit < tasks.collect_lock_ttl_s()


def test_the_lock_lives_past_the_hard_limit_and_a_soft_limit_stops_the_task_and_frees_it(workflow_redis,
                                                                                         monkeypatch):
    job = make_job()
    key = f"ss:lock:collect:{job.pk}"
    ttl_ms = []

    def stopped(*, job):
        ttl_ms.append(workflow_redis.pttl(key))
        raise SoftTimeLimitExceeded()

    monkeypatch.setattr(evaluate, "collect_and_evaluate", stopped)
    assert tasks.collect_job(job.pk) is False
    assert ttl_ms[0] > tasks.collect_job.time_limit * 1000
    assert not workflow_redis.exists(key)


def _collect(redis, settings, ui, *, cap: int, name: str = "demo"):
    """Collect the captured query once (its runner published the progress) with a cap of ``cap`` requests;
    the UI answers every stage's ``taskSummary`` (the busiest task)."""
    settings.SCALER_COLLECT_INTERVAL_S, settings.SCALER_COLLECT_MAX_REQUESTS = 15, cap
    job = make_job(name=name)
    for progress in PROGRESS:
        redis.xadd(keys.progress(job.name), {"json": json.dumps(progress)})
    for stage in STAGES:
        path = f"/api/v1/applications/{APP}/stages/{stage['stageId']}/{stage['attemptId']}/taskSummary"
        ui.override[path] = (200, json.dumps({"quantiles": [1.0],
                                              "executorRunTime": [stage["executorRunTime"] / 2]}).encode())
    Job.objects.filter(pk=job.pk).update(spark_ui_url=ui.url)
    job.refresh_from_db()
    control.write_status(redis, job.name, StatusUpdate(state=RunnerState.RUNNING, ui_url=ui.url, app_id=APP,
                                                       run_id=RUN_ID, knobs=dict(CONFIG)))
    return job, collector.snapshot_collect(job=job, now=datetime.fromtimestamp(AFTER_LAST_BATCH, tz=UTC))


def test_a_collection_counts_its_requests_on_the_snapshot_and_the_api(workflow_redis, settings):
    with fake_spark_ui() as ui:
        job, snapshot = _collect(workflow_redis, settings, ui, cap=60)
    assert snapshot is not None, Job.objects.get(pk=job.pk).last_error
    assert snapshot.rest_requests == len(ui.requested) and 4 <= snapshot.rest_requests <= 60
    assert not any("budget" in e for e in snapshot.errors)
    assert SnapshotSerializer(snapshot).data["rest_requests"] == snapshot.rest_requests


def test_at_the_cap_the_collection_stops_asking_and_the_sample_says_so(workflow_redis, settings):
    with fake_spark_ui() as ui:
        _, unbounded = _collect(workflow_redis, settings, ui, cap=1000)
        needed = len(ui.requested)
        ui.requested.clear()
        _, snapshot = _collect(workflow_redis, settings, ui, cap=5, name="capped")
    assert needed > 5  # the cap bites
    assert snapshot is not None and snapshot.rest_requests == 5 == len(ui.requested)
    assert any("budget of 5 Spark REST requests per collection is spent" in e for e in snapshot.errors), \
        snapshot.errors
    assert snapshot.batches == unbounded.batches  # what the first requests gave is kept


@pytest.mark.django_db
def test_a_queued_collect_expires_at_the_next_beat(monkeypatch, settings):
    """Workers that fall behind skip to the newest collection: each queued collect expires after one
    collect interval instead of the queue growing by one per job and beat."""
    sent = []
    monkeypatch.setattr(tasks.collect_job, "apply_async", lambda args, **options: sent.append((args, options)))
    job = make_job()
    assert tasks.collect_all() == 1
    assert sent == [((job.pk,), {"expires": settings.SCALER_COLLECT_INTERVAL_S})]
