"""Faults: the rollback/approve race, against a real PostgreSQL server and a threaded
Django server. For each job, a rollback of its succeeded proposal and an approval of its pending
proposal arrive at the same moment; before, both were accepted and two rescales were sent 40 ms
apart. Now the database admits one execution in flight per job: exactly one request wins (200),
the other is refused (409) naming the proposal in flight, per job.
"""

from __future__ import annotations

import json
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import psycopg
import pytest

from sparkclient.demo.processes import ProcessGroup, wait_http
from sparkclient.demo.redisproc import free_port

pytestmark = [pytest.mark.workflow, pytest.mark.timeout(300)]

JOBS = 6

SEED = """
import json
from rest_framework.authtoken.models import Token
from tests.webapp.dashboard_factories import make_succeeded
from tests.webapp.factories import make_job, make_snapshots, make_user
from webapp.loop.evaluate import evaluation_run
pairs = []
for i in range(%d):
    job = make_job(name=f"race{i}", metric_window_s=45)
    make_snapshots(job)
    evaluation_run(job=job)
    pairs.append({"job": job.pk, "pending": job.proposals.get(status="pending").pk, "done": make_succeeded(job).pk})
print(json.dumps({"pairs": pairs, "token": Token.objects.create(user=make_user("olga")).key}))
""" % JOBS


def test_a_rollback_racing_an_approval_of_the_same_job_makes_one_execution_on_postgres(
        postgres_server, redis_server, redis_client, tmp_path):
    env = {**os.environ, "DATABASE_URL": postgres_server.url, "REDIS_URL": redis_server.url,
           "CELERY_BROKER_URL": redis_server.url, "CELERY_RESULT_BACKEND": redis_server.url,
           "SCALER_COLLECT_INTERVAL_S": "3600", "SCALER_STABILIZATION_S": "0", "PYTHONUNBUFFERED": "1",
           "CONN_MAX_AGE": "0"}
    env.pop("TEST_DATABASE_PATH", None)
    group = ProcessGroup(log_dir=tmp_path / "logs", env=env)
    try:
        group.run("migrate", ["python", "manage.py", "migrate", "--noinput"])
        with psycopg.connect(postgres_server.url.replace("postgres://", "postgresql://"), autocommit=True) as db:
            db.execute("TRUNCATE proposals_auditevent, proposals_execution, proposals_proposal, jobs_job CASCADE")
        seeded = json.loads(group.run("seed", ["python", "manage.py", "shell", "-c", SEED]).strip().splitlines()[-1])
        port = free_port()
        web = group.start("web", ["python", "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"])
        base = f"http://127.0.0.1:{port}"
        wait_http(f"{base}/api/", timeout_s=60, process=web.process)
        headers = {"Authorization": f"Token {seeded['token']}"}
        requests = [(pair["job"], f"/api/proposals/{pair['pending']}/approve/", {}) for pair in seeded["pairs"]] + \
                   [(pair["job"], f"/api/proposals/{pair['done']}/rollback/", {"reason": "race"})
                    for pair in seeded["pairs"]]
        barrier = threading.Barrier(len(requests))

        def send(request) -> tuple[int, int, dict]:
            job, url, body = request
            with httpx.Client(base_url=base, timeout=60) as http:
                barrier.wait()
                response = http.post(url, json=body, headers=headers)
                return job, response.status_code, response.json()

        with ThreadPoolExecutor(len(requests)) as pool:
            outcomes = list(pool.map(send, requests))
        per_job = {pair["job"]: sorted(code for job, code, _ in outcomes if job == pair["job"])
                   for pair in seeded["pairs"]}
        print(f"\nrollback vs approve, {JOBS} jobs at once: {per_job}")
        assert all(codes == [200, 409] for codes in per_job.values()), outcomes
        for _job, code, body in outcomes:
            if code == 409:
                assert "one execution at a time" in body["detail"] or "not pending" in body["detail"], body
        with psycopg.connect(postgres_server.url.replace("postgres://", "postgresql://")) as db:
            in_flight = dict(db.execute("SELECT job_id, count(*) FROM proposals_proposal WHERE status IN "
                                        "('approved', 'executing') GROUP BY job_id").fetchall())
        assert in_flight == {pair["job"]: 1 for pair in seeded["pairs"]}
        # What was enqueued: one execution message per job.
        queued = [json.loads(m) for m in redis_client.lrange("celery", 0, -1)]
        assert len(queued) == JOBS, [m["headers"]["argsrepr"] for m in queued]
    finally:
        group.stop()
