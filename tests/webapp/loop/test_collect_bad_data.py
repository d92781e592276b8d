"""Bad data from Spark: a failing collect marks the job degraded with the reason, stores
nothing, and no infinite value ever reaches the API or the live page.

The collect is the real ``snapshot_collect``: a real Redis holds the runner status and the published
progress (the p1 Spark 4.3.0 capture); the Spark REST API is the same capture served by an
``httpx.MockTransport``.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone

import httpx
import pytest
from rest_framework.authtoken.models import Token

from sparkclient.collector.batchwindow import batch_end_s
from sparkclient.contract import keys
from tests.capture_paths import P1_RUN_ID, SPARK_4_3_0, spark_json
from tests.webapp.factories import make_job, make_user
from webapp.jobs.models import Job, MetricSnapshot, SampleRefused, VertexSnapshot
from webapp.loop.collect import snapshot_collect

pytestmark = pytest.mark.django_db

APP_ID = json.loads((SPARK_4_3_0 / "p1_app.json").read_text())["id"]


@pytest.fixture
def spark_rest(monkeypatch):
    """The p1 capture as the Spark REST API; ``payloads`` may be edited by a test before collecting."""
    payloads = {"jobs": spark_json("p1_app_jobs.json"), "stages": spark_json("p1_app_stages.json"),
                "executors": spark_json("p1_app_executors.json")}

    def handle(request: httpx.Request) -> httpx.Response:
        tail = request.url.path.rsplit("/", 1)[-1]
        if tail in payloads:
            return httpx.Response(200, content=json.dumps(payloads[tail]).encode(),
                                  headers={"content-type": "application/json"})
        return httpx.Response(404, text="not captured")

    import sparkclient.collector.rest as rest

    original = rest.SparkRestClient.__init__

    def init(self, base_url, timeout_s=5.0, **kwargs):  # noqa: ANN001
        kwargs["transport"] = httpx.MockTransport(handle)
        kwargs["attempts"] = 1
        original(self, base_url, timeout_s, **kwargs)

    monkeypatch.setattr(rest.SparkRestClient, "__init__", init)
    return payloads


@pytest.fixture
def published(workflow_redis, settings):
    """The runner status and the p1 progress entries in Redis; returns (job, now, client)."""
    settings.SCALER_COLLECT_INTERVAL_S = 10
    job = make_job("demo")
    # Registered where the (mocked) Spark UI is: the collector fetches only a registered job's UI.
    Job.objects.filter(pk=job.pk).update(spark_ui_url="http://spark.invalid:4040")
    job.refresh_from_db()
    workflow_redis.hset(keys.runner(job.name), mapping={
        "state": "running", "ui_url": "http://spark.invalid:4040", "app_id": APP_ID, "run_id": P1_RUN_ID})
    progresses = spark_json("p1_recentProgress.json")
    for progress in progresses:
        entry_ms = int(batch_end_s(progress) * 1000)
        workflow_redis.xadd(keys.progress(job.name), {"json": json.dumps(progress)}, id=f"{entry_ms}-0")
    now = datetime.fromtimestamp(batch_end_s(progresses[-2]) + 0.5, tz=timezone.utc)
    return job, now, workflow_redis


def _strict_json(text: str):
    def refuse(constant: str):
        raise AssertionError(f"non-standard JSON constant {constant} in the response")

    return json.loads(text, parse_constant=refuse)


def test_a_good_collect_stores_finite_values(spark_rest, published):
    job, now, _redis = published
    snapshot = snapshot_collect(job=job, now=now)
    assert snapshot is not None, job.last_error
    job.refresh_from_db()
    assert job.health == Job.Health.RUNNING
    assert snapshot.batches == 5 and snapshot.arrival_rate_per_s == pytest.approx(2000.0)


def test_a_truncated_progress_entry_marks_the_job_degraded_with_the_reason(spark_rest, published):
    job, now, redis = published
    text = json.dumps(spark_json("p1_recentProgress.json")[13])
    redis.xadd(keys.progress(job.name), {"json": text[: len(text) // 2]})
    assert snapshot_collect(job=job, now=now) is None
    job.refresh_from_db()
    assert job.health == Job.Health.DEGRADED
    assert f"{keys.progress(job.name)} entry" in job.last_error and "malformed" in job.last_error
    assert not MetricSnapshot.objects.exists()


@pytest.mark.parametrize(("field", "value", "problem"), [
    ("executorRunTime", math.inf, "not-finite"),
    ("executorRunTime", -5, "negative"),
    ("numTasks", "four", "wrong-type"),
    ("inputRecords", 1e300, "too-large"),
])
def test_malformed_rest_data_marks_the_job_degraded_naming_the_field(spark_rest, published, field, value, problem):
    job, now, _redis = published
    for stage in spark_rest["stages"]:
        stage[field] = value
    assert snapshot_collect(job=job, now=now) is None
    job.refresh_from_db()
    assert job.health == Job.Health.DEGRADED
    assert field in job.last_error and problem in job.last_error
    assert not MetricSnapshot.objects.exists() and not VertexSnapshot.objects.exists()


def test_cores_beyond_any_cluster_mark_the_job_degraded_naming_the_field(spark_rest, published):
    """4,097 cores on one executor: more than the policy allows any cluster (4,096)."""
    job, now, _redis = published
    spark_rest["executors"][-1]["totalCores"] = 4097
    assert snapshot_collect(job=job, now=now) is None
    job.refresh_from_db()
    assert job.health == Job.Health.DEGRADED
    assert "totalCores" in job.last_error and "too-large" in job.last_error
    assert not MetricSnapshot.objects.exists()


def test_a_progress_whose_durations_are_not_an_object_marks_the_job_degraded(spark_rest, published):
    job, now, redis = published
    progress = {**spark_json("p1_recentProgress.json")[13], "durationMs": 533}
    redis.xadd(keys.progress(job.name), {"json": json.dumps(progress)})
    assert snapshot_collect(job=job, now=now) is None
    job.refresh_from_db()
    assert job.health == Job.Health.DEGRADED
    assert "durationMs" in job.last_error and "wrong-type" in job.last_error
    assert not MetricSnapshot.objects.exists()


def test_an_infinite_value_is_refused_at_store_time_and_never_reaches_the_api_or_the_live_page(client, spark_rest,
                                                                                               published):
    job, now, _redis = published
    assert snapshot_collect(job=job, now=now) is not None
    with pytest.raises(SampleRefused, match="busy_s"):
        VertexSnapshot.objects.bulk_create([VertexSnapshot(snapshot=MetricSnapshot.objects.get(), vertex_id="v9",
                                                           busy_s=math.inf)])
    with pytest.raises(SampleRefused, match="arrival_rate_per_s"):
        MetricSnapshot.objects.create(job=job, collected_at=now, window_s=10.0, arrival_rate_per_s=math.nan)
    with pytest.raises(SampleRefused, match="backlog"):
        MetricSnapshot.objects.create(job=job, collected_at=now, window_s=10.0, backlog=-1)
    token = Token.objects.create(user=make_user("api-reader"))
    for url in ("/api/snapshots/", "/api/vertices/"):
        response = client.get(url, HTTP_AUTHORIZATION=f"Token {token.key}")
        assert response.status_code == 200, url
        assert _strict_json(response.content.decode())["count"] >= 1
    client.force_login(make_user("page-reader"))
    live = client.get(f"/jobs/{job.pk}/live/")
    assert live.status_code == 200
    _strict_json(live.content.decode())
