"""The main job end to end: a real PySpark pipeline, a real Redis server, a real Celery worker with
beat (no eager mode), the Django app on a live server, approval through the REST API.

The pipeline starts under-provisioned (1 core, 1 partition per adjustable stage) for the offered
rate; the autoscaler must propose a scale-up, execute it after approval, drain the backlog, and
every generated bid must be counted in the sink exactly once.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import httpx
import pytest
import redis
from rest_framework.authtoken.models import Token

from sparkclient.demo.processes import ProcessGroup
from tests.repo import ROOT
from tests.waiting import runner_failure, wait_for, wait_while_progressing
from tests.webapp.factories import make_user
from webapp.jobs.models import Job
from webapp.jobs.services import job_register

pytestmark = [pytest.mark.e2e, pytest.mark.spark, pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(900)]

JOB, TOPIC = "e2e", "e2e-nexmark"
RATE = 300.0  # events/s; ~92 % are bids, each costing 3 ms in the enrich stage, plus per-batch overhead
MAX_PER_BATCH = 3000  # admission control (records per micro-batch), as maxOffsetsPerTrigger for Kafka




def backlog(client: redis.Redis) -> float | None:
    """The source backlog (latest − end offset) of the newest progress that reports one."""
    from sparkclient.collector.offsets import source_backlog
    from sparkclient.collector.progress import read_progress

    for progress in reversed(read_progress(client, JOB)):
        value = source_backlog(progress["sources"][0]) if progress.get("sources") else None
        if value is not None:
            return value
    return None


@pytest.fixture
def system(redis_server, live_server, celery_broker, settings, tmp_path):
    """Generator, runner and Celery worker+beat as processes, all pointed at the same Redis and DB
    (``celery_broker`` points this process's Celery app there too, and restores it afterwards)."""
    from django.db import connection

    settings.REDIS_URL = redis_server.url
    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    client.flushdb()
    db_path = connection.settings_dict["NAME"]
    env = {**os.environ, "REDIS_URL": redis_server.url, "DATABASE_URL": f"sqlite:///{db_path}",
           "PYSPARK_PYTHON": sys.executable, "SCALER_COLLECT_INTERVAL_S": "5", "SCALER_STABILIZATION_S": "10",
           "PYTHONUNBUFFERED": "1", "SCALER_EXECUTION_TIMEOUT_S": "180"}
    group = ProcessGroup(log_dir=tmp_path / "logs", env=env)
    job = job_register(name=JOB, topic=TOPIC, query_name=f"{JOB}-query",
                       policy={"metric_window_s": 20, "catch_up_duration_s": 60, "restart_time_s": 5, "max_cores": 4})
    try:
        group.start("generator", ["python", "-m", "sparkclient.demo.generator", "--redis-url", redis_server.url,
                                  "--topic", TOPIC, "--partitions", "2", "--rate", str(RATE)])
        knobs = {"cores": 1, "source_partitions": 1, "enrich_partitions": 1, "state_partitions": 2,
                 "trigger_interval_s": 2, "enrich_latency_ms": 3, "max_records_per_batch": MAX_PER_BATCH}
        group.start("runner", ["python", "-m", "sparkclient", "run",
                               "--pipeline", "sparkclient.demo.examples.nexmark:build",
                               "--job", JOB, "--redis-url", redis_server.url, "--workdir", str(tmp_path / "runner"),
                               "--ui-port", "4051", *[a for k, v in knobs.items() for a in ("--knob", f"{k}={v}")]],
                    extra_env={"NEXMARK_TOPIC": TOPIC})
        group.start("celery", ["python", "-m", "celery", "-A", "webapp", "worker", "-B", "-P", "threads", "-c", "4",
                               "--loglevel", "INFO", "-s", str(tmp_path / "celerybeat-schedule")])
        yield {"job": job, "redis": client, "group": group, "live_server": live_server, "logs": tmp_path / "logs",
               "workdir": tmp_path / "runner"}
    finally:
        group.stop()
        _dump_logs(tmp_path / "logs")


def _dump_logs(log_dir: Path) -> None:
    artifacts = Path(os.environ.get("TEST_ARTIFACTS", ROOT / "test-artifacts"))
    artifacts.mkdir(parents=True, exist_ok=True)
    for log in [*log_dir.glob("*.log"), *log_dir.parent.glob("runner/*.log")]:
        (artifacts / f"e2e-{log.name}").write_bytes(log.read_bytes())


def sink_shortfall(client: redis.Redis, sink_path: str) -> str:
    """Which (10 s window, key) counts the sink lacks, recounted from the log itself, plus what the
    progress says about late rows: the diagnosis when exactly-once fails."""
    from collections import Counter

    from sparkclient.collector.progress import read_progress
    from sparkclient.demo.sink import read_counts

    expected: Counter = Counter()
    partitions = int(client.hget(f"ss:log:{TOPIC}:meta", "partitions"))
    for p in range(partitions):
        for _id, fields in client.xrange(f"ss:log:{TOPIC}:{p}"):
            event = json.loads(fields["v"])
            if event["type"] == "bid":
                expected[(event["date_time"] - event["date_time"] % 10_000, event["auction"] % 10)] += 1
    got = {(w, k): c for w, k, c in read_counts(sink_path)}
    short = {key: expected[key] - got.get(key, 0) for key in expected if expected[key] != got.get(key, 0)}
    dropped = sum(op.get("numRowsDroppedByWatermark", 0) for pr in read_progress(client, JOB)
                  for op in pr.get("stateOperators", []))
    return (f"log has {sum(expected.values())} bids in {len(expected)} (window, key) groups; sink differs in "
            f"{len(short)}: {sorted(short.items())[:12]}; rows dropped by watermark per progress: {dropped}; "
            f"lost to retention: {client.get(f'ss:log:{TOPIC}:lost') or 0}")


def test_scale_up_proposal_is_approved_executed_and_drains_the_backlog(system):
    from sparkclient.contract.load import set_rate
    from sparkclient.demo.generator import read_counts
    from sparkclient.demo.sink import sink_total

    client, group = system["redis"], system["group"]
    job: Job = system["job"]
    base = system["live_server"].url
    token = Token.objects.create(user=make_user("e2e-operator"))
    api = httpx.Client(base_url=base, headers={"Authorization": f"Token {token.key}"}, timeout=60)

    def alive():
        dead = group.dead()
        assert not dead, f"{dead[0].name} exited with {dead[0].process.returncode}; see {dead[0].log_path}"
        return True

    crashed = runner_failure(client, JOB, system["workdir"] / "driver.log")

    wait_for(lambda: alive() and client.hget(f"ss:runner:{JOB}", "state") == "running", timeout_s=120,
             what="the runner to report running", failed=crashed)
    started = time.monotonic()

    def pending():
        alive()
        body = api.get("/api/proposals/", params={"job": job.pk, "status": "pending"}).json()
        return body["results"][0] if body["results"] else None

    proposal = wait_for(pending, timeout_s=240, interval_s=2, what="a scale-up proposal", failed=crashed)
    proposal_after_s = time.monotonic() - started
    assert proposal["proposed_config"]["cores"] > proposal["current_config"]["cores"] == 1
    assert proposal["proposed_config"]["enrich_partitions"] > 1
    assert proposal["proposed_config"]["trigger_interval_s"] == 2  # a setting, never scaled

    approved_at = time.monotonic()
    approved = api.post(f"/api/proposals/{proposal['id']}/approve/")
    assert approved.status_code == 200, approved.text

    def finished():
        alive()
        body = api.get(f"/api/proposals/{proposal['id']}/").json()
        return body if body["status"] in ("succeeded", "failed") else None

    done = wait_for(finished, timeout_s=240, interval_s=2, what="the execution to finish", failed=crashed)
    executed_after_s = time.monotonic() - approved_at
    assert done["status"] == "succeeded", done["execution"]
    execution = done["execution"]
    assert execution["path"] == "driver-handover"  # cores changed: local[N] needs a new driver, warmed up first
    assert execution["downtime_s"] > 0
    print(f"\nproposal after {proposal_after_s:.1f} s; executed {executed_after_s:.1f} s after approval; "
          f"{proposal['current_config']} -> "
          f"{proposal['proposed_config']}; downtime {execution['downtime_s']:.1f} s ({execution['path']})")

    # The backlog stops growing: with the new configuration it drains to what one trigger brings.
    # Bounded by progress: it fails when the backlog stops falling for 2 minutes, however slow the machine.
    peak = backlog(client) or 0
    wait_while_progressing(lambda: alive() and backlog(client), target=RATE * 2, stall_s=120,
                           what=f"the backlog (peak {peak:.0f}) to drain below {RATE * 2:.0f}")

    # Stop the load, let the pipeline drain, and count every bid exactly once.
    set_rate(client, TOPIC, 0)
    sink_path = str(system["workdir"] / "sink.sqlite")
    bids = lambda: read_counts(client, TOPIC)["bid"]  # noqa: E731
    counts_seen = [bids()]

    def generator_idle():  # the generator rereads its rate every 0.25 s and may write one more chunk
        time.sleep(1.0)
        counts_seen.append(bids())
        return counts_seen[-1] == counts_seen[-2]

    wait_for(generator_idle, timeout_s=30, interval_s=0, what="the generator to stop writing")
    expected = bids()
    wait_while_progressing(lambda: alive() and backlog(client), target=0, stall_s=120, what="the backlog to drain")
    try:
        wait_while_progressing(lambda: sink_total(sink_path), target=expected, rising=True, stall_s=60,
                               what=f"the sink to count all {expected} bids")
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {sink_shortfall(client, sink_path)}") from None
    # Three more triggers (2 s each): nothing may be counted twice. Not a deadline: idle triggers run
    # no batch (no new batch id to wait for), so this is the one fixed wait.
    time.sleep(6)
    assert sink_total(sink_path) == expected == bids()
    assert expected > 0
    assert json.loads(client.hget(f"ss:runner:{JOB}", "knobs"))["cores"] == proposal["proposed_config"]["cores"]
