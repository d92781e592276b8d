"""A user's own pipeline, written outside the project, autoscaled end to end.

Real Spark, a real Redis with a password, a real Celery worker with beat and the Django app on a live
server. The module (tests/own_pipeline.py: the JSON file source, a ``repartition(n)`` knob, a CPU cost
per row, a stateful windowed count on RocksDB, a parquet sink) is written into a temporary folder and
run with ``python -m sparkclient run --pipeline mypipes.clicks:build``; the job is registered through
the API; the load is raised; the scale-up proposal is approved through the API; the runner applies it;
every row written is counted in the sink exactly once. The demo job runs at the same time and both
jobs are on the overview.
"""

from __future__ import annotations

import json
import os
import random
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
import redis
from django.test import Client as DjangoClient
from rest_framework.authtoken.models import Token

from sparkclient.demo.examples.files_load import write_file
from sparkclient.demo.processes import ProcessGroup
from sparkclient.demo.redisproc import free_port, start_redis
from tests.own_pipeline import sink_clicks, write_module
from tests.waiting import runner_failure, wait_for, wait_while_progressing
from tests.webapp.factories import make_user
from webapp.celery import app as celery_app

pytestmark = [pytest.mark.e2e, pytest.mark.spark, pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(1500)]

JOB = "clicks"
ROWS_PER_FILE = 50
#: The standby's warm-up on the pipeline's plan, in batches (``run --warm-up-batches``). At 2.5 ms a
#: row and 50 files a trigger, the default warm-up ran into its 60 s limit on the standby's CPU.
WARM_UP_BATCHES = 2


class Load(threading.Thread):
    """Writes JSON click files into the inbox at ``rate`` rows/s (changeable), counting the rows."""

    def __init__(self, inbox: Path, rate: float) -> None:
        super().__init__(daemon=True, name="clicks-load")
        self.inbox, self.rate, self.rows, self.seq = inbox, rate, 0, 0
        self.stop_event = threading.Event()
        self.rng = random.Random(3)

    def run(self) -> None:
        owed, last = 0.0, time.monotonic()
        while not self.stop_event.wait(0.1):
            now = time.monotonic()
            owed, last = owed + self.rate * (now - last), now
            while owed >= ROWS_PER_FILE:
                self.seq += 1
                write_file(self.inbox, self.seq, ROWS_PER_FILE, self.rng)
                self.rows, owed = self.rows + ROWS_PER_FILE, owed - ROWS_PER_FILE

    def flush(self) -> None:
        """One row an hour ahead: the watermark passes every window of the rows written so far."""
        ahead = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
        (self.inbox / "zz-flush.json").write_text(json.dumps({"user": 0, "page": "/flush", "ts": ahead, "ms": 0}))


@pytest.fixture
def system(live_server, settings, tmp_path):
    from django.db import connection

    redis_server = start_redis(workdir=tmp_path / "redis", password="e2e-secret")
    old_broker, old_backend = celery_app.conf.broker_url, celery_app.conf.result_backend
    settings.REDIS_URL = redis_server.url
    celery_app.conf.broker_url = celery_app.conf.result_backend = redis_server.url
    db_path = connection.settings_dict["NAME"]
    env = {**os.environ, "REDIS_URL": redis_server.url, "SPARKSCALER_REDIS_URL": redis_server.url,
           "DATABASE_URL": f"sqlite:///{db_path}", "PYSPARK_PYTHON": sys.executable, "PYTHONUNBUFFERED": "1",
           "SCALER_COLLECT_INTERVAL_S": "5", "SCALER_STABILIZATION_S": "10", "SCALER_EXECUTION_TIMEOUT_S": "300"}
    group = ProcessGroup(log_dir=tmp_path / "logs", env=env)
    outside = tmp_path / "elsewhere"  # the user's own folder: not the project, not its PYTHONPATH
    pipeline = write_module(outside)
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    load = Load(inbox, rate=40.0)
    ui_ports = {"demo": free_port(), JOB: free_port()}  # registered with the 16 ports Spark tries after each
    try:
        group.start("generator", ["python", "-m", "sparkclient.demo.generator", "--redis-url", redis_server.url,
                                  "--topic", "nexmark", "--partitions", "2", "--rate", "20"])
        group.start("demo", ["python", "-m", "sparkclient", "run",
                             "--pipeline", "sparkclient.demo.examples.nexmark:build", "--job", "demo",
                             "--workdir", str(tmp_path / "demo"), "--ui-port", str(ui_ports["demo"]),
                             "--knob", "trigger_interval_s=5"])
        group.start("clicks", ["python", "-m", "sparkclient", "run", "--pipeline", pipeline, "--job", JOB,
                               "--workdir", str(tmp_path / JOB), "--ui-port", str(ui_ports[JOB]),
                               "--knob", "cost_us=2500", "--warm-up-batches", str(WARM_UP_BATCHES)],
                    extra_env={"PYTHONPATH": os.pathsep.join([str(outside), env.get("PYTHONPATH", "")]),
                               "CLICKS_INBOX": str(inbox)})
        group.start("celery", ["python", "-m", "celery", "-A", "webapp", "worker", "-B", "-P", "threads", "-c", "4",
                               "--loglevel", "INFO", "-s", str(tmp_path / "celerybeat-schedule")])
        load.start()
        yield {"redis": redis.Redis.from_url(redis_server.url, decode_responses=True), "group": group,
               "live_server": live_server, "load": load, "out": tmp_path / JOB / "out", "ui_ports": ui_ports}
    finally:
        load.stop_event.set()
        group.stop()
        redis_server.stop()
        celery_app.conf.broker_url, celery_app.conf.result_backend = old_broker, old_backend


def test_a_user_pipeline_is_registered_scaled_up_on_approval_and_counts_exactly_once(system):
    group, client, load = system["group"], system["redis"], system["load"]
    admin = Token.objects.create(user=make_user("e2e-admin", role="admin"))
    operator = Token.objects.create(user=make_user("e2e-operator"))
    base = system["live_server"].url
    as_admin = httpx.Client(base_url=base, headers={"Authorization": f"Token {admin.key}"}, timeout=60)
    api = httpx.Client(base_url=base, headers={"Authorization": f"Token {operator.key}"}, timeout=60)

    def alive():
        dead = group.dead()
        assert not dead, f"{dead[0].name} exited with {dead[0].process.returncode}; see {dead[0].log_path}"
        return True

    crashed = runner_failure(client, JOB, system["out"].parent / "driver.log")

    policy = {"metric_window_s": 20, "catch_up_duration_s": 60, "restart_time_s": 5, "max_cores": 4}
    for name in ("demo", JOB):
        port = system["ui_ports"][name]
        ui_rule = {"spark_ui_hosts": ["127.0.0.1"], "spark_ui_ports": f"{port}-{min(port + 16, 65535)}"}
        registered = as_admin.post("/api/jobs/", json={"name": name, **ui_rule, "policy": policy})
        assert registered.status_code == 201, registered.text
    job_id = registered.json()["id"]

    wait_for(lambda: alive() and client.hget(f"ss:runner:{JOB}", "state") == "running", timeout_s=300,
             what="the user's pipeline to run", failed=crashed)
    wait_for(lambda: alive() and api.get(f"/api/jobs/{job_id}/").json()["knobs"], timeout_s=120,
             what="the job's knobs, as the runner published them", failed=crashed)
    time.sleep(30)
    load.rate = 700.0  # rows/s: at 2.5 ms a row, more than one core can score

    def scale_up_pending():  # an earlier proposal (say, fewer state partitions at the low load) is withdrawn
        alive()
        body = api.get("/api/proposals/", params={"job": job_id, "status": "pending"}).json()
        up = [p for p in body["results"] if p["proposed_config"]["cores"] > p["current_config"]["cores"]]
        return up[0] if up else None

    proposal = wait_for(scale_up_pending, timeout_s=600, interval_s=2, what="a scale-up proposal for the user's job",
                        failed=crashed)
    assert proposal["proposed_config"]["cores"] > proposal["current_config"]["cores"] == 1
    assert proposal["proposed_config"]["cores"] <= (os.cpu_count() or 1)  # never above the host's capacity
    assert proposal["proposed_config"]["cost_us"] == 2500  # a setting, never scaled
    approved = api.post(f"/api/proposals/{proposal['id']}/approve/", json={})
    assert approved.status_code == 200, approved.text

    def finished():
        alive()
        body = api.get(f"/api/proposals/{proposal['id']}/").json()
        return body if body["status"] in ("succeeded", "failed") else None

    done = wait_for(finished, timeout_s=600, interval_s=2, what="the execution to finish", failed=crashed)
    assert done["status"] == "succeeded", done["execution"]
    assert done["execution"]["path"] == "driver-handover"
    knobs = client.hget(f"ss:runner:{JOB}", "knobs")
    assert f'"cores": {proposal["proposed_config"]["cores"]}' in knobs
    print(f"\nuser pipeline: {proposal['current_config']} -> {proposal['proposed_config']}, "
          f"execution {done['execution']}")

    # both jobs are on the overview
    browser = DjangoClient()
    browser.force_login(operator.user)
    overview = browser.get("/").content.decode()
    assert 'href="/jobs/' in overview and ">demo<" in overview and f">{JOB}<" in overview

    # stop the load, close every window, and count each row exactly once
    load.stop_event.set()
    load.join(timeout=5)
    written = load.rows
    load.flush()

    def counted() -> int:
        alive()
        now = sink_clicks(system["out"])
        assert now <= written, f"the sink counts {now} rows, more than the {written} written: counted twice"
        return now

    # Bounded by progress: it fails when the count stops rising for 3 minutes, however slow the machine.
    wait_while_progressing(counted, target=written, rising=True, stall_s=180, interval_s=3,
                           what=f"the sink to count all {written} rows")
    time.sleep(6)
    assert sink_clicks(system["out"]) == written
