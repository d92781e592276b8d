"""Metric collection (``webapp.loop.collect.snapshot_collect``) and its beat task: every way it can
fail, against a real Redis and a fake Spark UI serving the Spark 4.3.0 captures, and the lock that
keeps two collections of one job from overlapping."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from sparkclient.contract import control, keys
from sparkclient.contract.messages import StatusUpdate
from tests.capture_paths import SPARK_4_3_0
from tests.fakespark import APP, RUN_ID, fake_spark_ui
from tests.webapp.factories import CONFIG, make_job
from webapp.jobs.models import Job, MetricSnapshot
from webapp.loop import collect as collector
from webapp.loop import evaluate, tasks, window

pytestmark = pytest.mark.django_db

PROGRESS = json.loads((SPARK_4_3_0 / "p1_recentProgress.json").read_text())
#: A moment after the captured query's last batch (the window ends here).
AFTER_LAST_BATCH = datetime.fromisoformat(PROGRESS[-1]["timestamp"].replace("Z", "+00:00")).timestamp() + 3


def write_runner_status(redis, job: Job, **fields) -> None:
    """What the runner writes to its status hash (``sparkclient.contract.messages.StatusUpdate``)."""
    redis.delete(keys.runner(job.name))
    control.write_status(redis, job.name, StatusUpdate(**fields))


def running(redis, job: Job, ui_url: str, **extra) -> None:
    """A running runner whose Spark UI is at ``ui_url``, registered on the job (the collector fetches
    only a registered job's UI)."""
    Job.objects.filter(pk=job.pk).update(spark_ui_url=ui_url)
    job.refresh_from_db()
    write_runner_status(redis, job, **{"state": "running", "ui_url": ui_url, "app_id": APP, "run_id": RUN_ID,
                          "knobs": dict(CONFIG), **extra})


def collect(job: Job, at_s: float = AFTER_LAST_BATCH):
    return collector.snapshot_collect(job=job, now=datetime.fromtimestamp(at_s, tz=UTC))


def test_no_runner_marks_the_job_down_and_says_how_to_start_one(workflow_redis):
    job = make_job("orders")
    assert collector.snapshot_collect(job=job) is None
    job.refresh_from_db()
    assert job.health == Job.Health.DOWN
    assert "python -m sparkclient run --pipeline MODULE:FUNCTION --job orders" in job.last_error
    assert not MetricSnapshot.objects.exists()


@pytest.mark.parametrize(("fields", "expected"), [
    ({"state": "restarting"}, "runner state is 'restarting'"),
    ({"state": "failed", "error": "StreamingQueryException: boom"},
     "runner state is 'failed': StreamingQueryException: boom"),
    ({"state": "running"}, "runner state is 'running'"),  # running, but no UI address to read
])
def test_a_runner_that_is_not_running_or_has_no_ui_marks_the_job_down(workflow_redis, fields, expected):
    job = make_job()
    write_runner_status(workflow_redis, job, **fields)
    assert collector.snapshot_collect(job=job) is None
    job.refresh_from_db()
    assert (job.health, job.last_error) == (Job.Health.DOWN, expected)
    assert not MetricSnapshot.objects.exists()


CRASH = {"exit_code": 1, "exception": "ValueError", "exception_message": "boom after 15 s",
         "log_path": "/var/jobs/orders/driver.log", "crashes": 3, "crash_window_s": 300.0,
         "restart_at": 1_712_000_060.0}


@pytest.mark.parametrize(("state", "code"), [("crash_looping", "runner_crash_looping"), ("failed", "runner_crashed")])
def test_a_crashed_runner_marks_the_job_down_with_what_killed_it(workflow_redis, state, code):
    job = make_job()
    write_runner_status(workflow_redis, job, state=state, error="driver exited", **CRASH)
    assert collector.snapshot_collect(job=job) is None
    job.refresh_from_db()
    assert job.health == Job.Health.DOWN and job.health_reason == {"code": code, "data": {
        "exit_code": 1, "exception": "ValueError", "message": "boom after 15 s",
        "log_path": "/var/jobs/orders/driver.log", "crashes": 3, "window_s": 300.0, "restart_at": 1_712_000_060.0}}
    assert "ValueError: boom after 15 s (exit code 1)" in job.last_error
    assert "/var/jobs/orders/driver.log" in job.last_error


@pytest.mark.parametrize(("path", "status", "body", "expected"), [
    (f"/api/v1/applications/{APP}/jobs", 500, b'{"message": "internal"}', "HTTP 500"),
    (f"/api/v1/applications/{APP}/stages", 404, b'{"message": "gone"}', "HTTP 404"),
    (f"/api/v1/applications/{APP}/executors", 200, b"<html>a proxy page</html>", "Spark REST API: "),
    (f"/api/v1/applications/{APP}/jobs", 200, b'{"not": "a list"}', "Spark REST API: "),
])
def test_spark_errors_and_malformed_answers_mark_the_job_down_and_store_nothing(workflow_redis, path, status, body,
                                                                                 expected):
    job = make_job()
    with fake_spark_ui() as ui:
        ui.override[path] = (status, body)
        running(workflow_redis, job, ui.url)
        assert collect(job) is None
    job.refresh_from_db()
    assert job.health == Job.Health.DOWN and job.last_error.startswith("Spark REST API: ")
    assert expected in job.last_error
    assert not MetricSnapshot.objects.exists()


def test_spark_not_listening_marks_the_job_down(workflow_redis):
    job = make_job()
    with fake_spark_ui() as ui:
        closed = ui.url
    running(workflow_redis, job, closed)  # the server is gone: connection refused
    assert collect(job) is None
    job.refresh_from_db()
    assert job.health == Job.Health.DOWN and job.last_error.startswith("Spark REST API: ")


def test_no_batch_in_the_window_stores_a_snapshot_and_marks_the_job_degraded(workflow_redis):
    job = make_job()
    with fake_spark_ui() as ui:
        running(workflow_redis, job, ui.url)
        snapshot = collect(job, at_s=AFTER_LAST_BATCH + 3600)  # an hour after the last batch
    job.refresh_from_db()
    assert snapshot is not None and snapshot.batches == 0
    assert (job.health, job.last_error) == (Job.Health.DEGRADED, "no micro-batch completed in the last window")


def collect_captured_query(redis, settings, *, slowest_share: float | None = None) -> tuple[Job, MetricSnapshot | None]:
    """A job whose runner published the captured query's progress, collected once (15 s interval).

    ``slowest_share``: the UI answers every stage's ``taskSummary?quantiles=1`` with a slowest task
    of this share of the stage's summed ``executorRunTime`` (the p1 capture has no such summary)."""
    settings.SCALER_COLLECT_INTERVAL_S = 15
    job = make_job()
    for progress in PROGRESS:
        redis.xadd(keys.progress(job.name), {"json": json.dumps(progress)})
    with fake_spark_ui() as ui:
        if slowest_share is not None:
            for stage in json.loads((SPARK_4_3_0 / "p1_app_stages.json").read_text()):
                path = f"/api/v1/applications/{APP}/stages/{stage['stageId']}/{stage['attemptId']}/taskSummary"
                ui.override[path] = (200, json.dumps({"quantiles": [1.0], "executorRunTime": [
                    stage["executorRunTime"] * slowest_share]}).encode())
        running(redis, job, ui.url, knobs=dict(CONFIG, cores=2))
        snapshot = collect(job)
    return job, snapshot


def test_published_progress_and_the_rest_api_become_a_snapshot_with_vertices(workflow_redis, settings):
    job, snapshot = collect_captured_query(workflow_redis, settings)
    job.refresh_from_db()
    assert snapshot is not None and snapshot.batches > 0, job.last_error
    assert (job.health, job.last_error) == (Job.Health.RUNNING, "")
    assert snapshot.run_id == RUN_ID and snapshot.vertices.count() >= 2
    assert job.config["cores"] == 2  # the runner's configuration is adopted


def test_collect_job_skips_while_another_collect_of_the_job_holds_the_lock(workflow_redis, monkeypatch):
    job = make_job()
    calls = []
    monkeypatch.setattr(evaluate, "collect_and_evaluate", lambda *, job: calls.append(job.pk))
    holder = workflow_redis.lock(f"ss:lock:collect:{job.pk}", timeout=60)
    assert holder.acquire(blocking=False)
    assert tasks.collect_job(job.pk) is False and calls == []
    holder.release()
    assert tasks.collect_job(job.pk) is True and calls == [job.pk]
    assert tasks.collect_job(job.pk) is True and calls == [job.pk, job.pk]  # released after each run


def test_collect_job_releases_the_lock_when_the_collect_raises(workflow_redis, monkeypatch):
    job = make_job()

    def boom(*, job):
        raise RuntimeError("collector crashed")

    monkeypatch.setattr(evaluate, "collect_and_evaluate", boom)
    with pytest.raises(RuntimeError, match="collector crashed"):
        tasks.collect_job(job.pk)
    assert not workflow_redis.exists(f"ss:lock:collect:{job.pk}")


def test_the_webapp_and_the_snapshot_cli_map_one_sample_to_the_same_model_inputs(workflow_redis, settings,
                                                                                  monkeypatch):
    """The one Spark → model mapping: a collected snapshot, stored and read back
    (``window.window_inputs``), gives the metrics, topology and cluster that the snapshot CLI writes
    for the very sample the collector built (``sparkclient.collector.snapshot.sample_to_scenario``)."""
    from scaling.scenario.format import parse
    from sparkclient.collector.snapshot import sample_to_scenario

    built = []
    real = collector.collect_sample
    monkeypatch.setattr(collector, "collect_sample", lambda *a, **k: built.append(real(*a, **k)) or built[-1])
    job, snapshot = collect_captured_query(workflow_redis, settings, slowest_share=0.9)
    assert snapshot is not None and snapshot.batches > 0 and len(built) == 1
    sample = built[0]
    assert window.snapshot_sample(snapshot).vertices == sample.vertices  # stored, nothing lost
    topo, metrics, cluster, _ = window.window_inputs(job=job, snapshots=[snapshot])
    scenario = parse(json.dumps(sample_to_scenario(sample)))
    cli = scenario.steps[0].metrics
    assert set(metrics) == set(cli) and len(metrics) >= 2
    for vertex_id, m in metrics.items():
        for field in ("records_in_per_s", "records_out_per_s", "busy_time_ms_per_s", "backlog",
                      "backlog_growth_per_s", "batch_overhead_s", "busy_time_max_ms_per_s"):
            assert getattr(m, field) == pytest.approx(getattr(cli[vertex_id], field), abs=1e-5), (vertex_id, field)
    assert [(v.id, v.parallelism, v.source) for v in topo.vertices] == [
        (v.id, v.parallelism, v.source) for v in scenario.topology.vertices]
    # The busiest task was measured, stored and read back: a slowest task of 90 % of a stage's busy
    # time on 2 cores is above the mean of every stage of 2 or more tasks.
    assert all(v.busy_max_s is not None for v in snapshot.vertices.all())
    assert all(m.busy_time_max_ms_per_s > m.busy_time_ms_per_s for m in metrics.values() if m.busy_time_ms_per_s)
    assert topo.edges == scenario.topology.edges
    assert cluster.cores == scenario.cluster.cores == sample.cores
