"""One apply per approval, against a real PostgreSQL server: 20 concurrent approve requests for one
proposal produce exactly one approval, one execution and 19 clear refusals.

Everything runs as processes on PostgreSQL: the Django server (threaded, one DB connection per
request), a real Celery worker, and a fake runner on the Redis control channel.
"""

from __future__ import annotations

import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import psycopg
import pytest

from sparkclient.demo.processes import ProcessGroup, wait_http
from sparkclient.demo.redisproc import free_port
from tests.webapp.fakerunner import FakeRunner

pytestmark = [pytest.mark.workflow, pytest.mark.timeout(300)]

CONCURRENT = 20

SEED = """
import json
from rest_framework.authtoken.models import Token
from tests.webapp.factories import make_job, make_snapshots, make_user
from webapp.loop.evaluate import evaluation_run
job = make_job(name="pg", metric_window_s=45)
make_snapshots(job)
evaluation_run(job=job)
proposal = job.proposals.get()
tokens = [Token.objects.create(user=make_user(f"op{i}")).key for i in range(%d)]
print(json.dumps({"proposal": proposal.pk, "tokens": tokens}))
""" % CONCURRENT


def test_20_concurrent_approvals_make_one_approval_one_execution_19_refusals(postgres_server, redis_server,
                                                                              redis_client, tmp_path):
    env = {**os.environ, "DATABASE_URL": postgres_server.url, "REDIS_URL": redis_server.url,
           "CELERY_BROKER_URL": redis_server.url, "CELERY_RESULT_BACKEND": redis_server.url,
           "SCALER_EXECUTION_TIMEOUT_S": "20", "SCALER_COLLECT_INTERVAL_S": "3600",
           "SCALER_RECONCILE_INTERVAL_S": "0.5", "SCALER_STABILIZATION_S": "0", "PYTHONUNBUFFERED": "1",
           "CONN_MAX_AGE": "0"}
    env.pop("TEST_DATABASE_PATH", None)
    group = ProcessGroup(log_dir=tmp_path / "logs", env=env)
    runner = FakeRunner(redis_server.url, "pg")
    try:
        group.run("migrate", ["python", "manage.py", "migrate", "--noinput"])
        seeded = json.loads(group.run("seed", ["python", "manage.py", "shell", "-c", SEED]).strip().splitlines()[-1])
        port = free_port()
        web = group.start("web", ["python", "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"])
        group.start("celery", ["python", "-m", "celery", "-A", "webapp", "worker", "-B", "-P", "threads", "-c", "2",
                               "--loglevel", "INFO", "-s", str(tmp_path / "celerybeat-schedule")])
        runner.start()
        base = f"http://127.0.0.1:{port}"
        wait_http(f"{base}/api/", timeout_s=60, process=web.process)

        pk = seeded["proposal"]
        barrier = threading.Barrier(CONCURRENT)

        def approve(token: str) -> tuple[int, dict]:
            with httpx.Client(base_url=base, timeout=60) as http:
                barrier.wait()
                response = http.post(f"/api/proposals/{pk}/approve/", headers={"Authorization": f"Token {token}"})
                return response.status_code, response.json()

        with ThreadPoolExecutor(CONCURRENT) as pool:
            outcomes = list(pool.map(approve, seeded["tokens"]))
        codes = sorted(code for code, _ in outcomes)
        print(f"\n{CONCURRENT} concurrent approvals on PostgreSQL: status codes {codes}")
        assert codes == [200] + [409] * (CONCURRENT - 1), outcomes
        for code, body in outcomes:
            if code == 409:
                assert f"proposal {pk} is " in body["detail"] and "not pending: cannot move it to approved" in \
                    body["detail"], body

        with psycopg.connect(postgres_server.url.replace("postgres://", "postgresql://")) as db:
            def status() -> str:
                return db.execute("SELECT status FROM proposals_proposal WHERE id = %s", [pk]).fetchone()[0]

            deadline = time.monotonic() + 60
            while status() != "succeeded":
                assert time.monotonic() < deadline, f"proposal stuck in {status()}; see {tmp_path / 'logs'}"
                assert not group.dead(), f"{group.dead()[0].name} exited; see {group.dead()[0].log_path}"
                time.sleep(0.3)
                db.commit()
            time.sleep(1.0)  # anything duplicated would show up now
            db.commit()
            executions = db.execute("SELECT count(*), max(attempts) FROM proposals_execution "
                                    "WHERE proposal_id = %s", [pk]).fetchone()
            approvals = db.execute("SELECT actor_name FROM proposals_auditevent WHERE proposal_id = %s "
                                   "AND action = 'approved'", [pk]).fetchall()
            decided_by = db.execute("SELECT u.username FROM proposals_proposal p JOIN auth_user u "
                                    "ON u.id = p.decided_by_id WHERE p.id = %s", [pk]).fetchone()[0]
        assert executions == (1, 1)
        assert len(approvals) == 1 and approvals[0][0] == decided_by
        assert len(runner.commands) == 1, runner.commands
        winner = [body for code, body in outcomes if code == 200][0]
        assert winner["decided_by"] == decided_by
    finally:
        runner.stop()
        group.stop()
