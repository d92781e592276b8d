"""A driver that crashes in a loop is named, with real Spark and Chromium: the runner
(``python -m sparkclient run``, a real ``redis-server``) runs :mod:`tests.sparkclient.runner.crash_pipeline`,
whose query raises ``ValueError`` after :data:`RAISE_AFTER_S` s of life, again in every new driver.
Each driver outlives :data:`RESET_S`: a rule that starts its count over after a long life would never
see a loop here, while the crash-loop rule counts the crashes in its window however long each driver
lived (3 within 10 min here, first back-off 5 s).
The runner backs off, doubling, and its state becomes ``crash_looping`` with the exception's class and
message. The web app's collect step (in the test's process) marks the job down; the job page, the
overview, the inbox and a ``job_down`` webhook then name the exception and what to do.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from sparkclient.contract.control import read_status
from sparkclient.contract.messages import RunnerState
from sparkclient.demo.redisproc import free_port
from tests.browser.conftest import screenshot
from tests.browser.test_dashboard_browser import login
from tests.repo import ROOT
from tests.sparkclient.runner.crash_pipeline import MESSAGE
from tests.waiting import wait_for
from tests.webapp.factories import make_user
from tests.webapp.inbox.factories import Endpoint, notify_jobs_down
from webapp.inbox.models import NotificationTarget
from webapp.jobs.models import Job
from webapp.jobs.services import job_register
from webapp.loop.collect import snapshot_collect

pytestmark = [pytest.mark.spark, pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(900)]

JOB = "crash-loop"
PIPELINE = "tests.sparkclient.runner.crash_pipeline:build"
#: Each driver's query raises this long after it was built, seconds; every life outlasts RESET_S, a
#: long life in a rule that resets its count on one (120 s in production terms, scaled down).
RAISE_AFTER_S = 25
RESET_S = 20
CRASHES, WINDOW_S, BACKOFF_S = 3, 600, 5


def test_a_driver_crashing_in_a_loop_is_named_on_every_page_and_in_the_webhook(
        page, workflow_redis, redis_server, tmp_path):
    make_user("operator")
    port = free_port()
    job = job_register(name=JOB, spark_ui_hosts=["127.0.0.1"], spark_ui_ports=f"{port}-{port + 16}")
    endpoint = Endpoint()
    NotificationTarget.objects.create(name="crash team", job=job, webhook_url=endpoint.url)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYSPARK_PYTHON": sys.executable}
    supervisor = subprocess.Popen(
        [sys.executable, "-m", "sparkclient", "run", "--pipeline", PIPELINE, "--job", JOB, "--redis-url",
         redis_server.url, "--workdir", str(tmp_path / "job"), "--ui-port", str(port),
         "--knob", f"raise_after_s={RAISE_AFTER_S}", "--crash-loop-crashes", str(CRASHES),
         "--crash-loop-window-s", str(WINDOW_S), "--crash-backoff-s", str(BACKOFF_S)], cwd=ROOT, env=env)
    try:
        states: list[tuple[str, int]] = []
        lives_s: list[float] = []  # each crashed driver's life, from its start to the supervisor's record
        backoffs_s: list[float] = []  # the wait before each restart, as the record schedules it

        def looping():
            assert supervisor.poll() is None, f"the supervisor exited with {supervisor.returncode}"
            status = read_status(workflow_redis, JOB)
            # the supervisor's record of a crash carries its exit code (the dying driver's own "failed" does not)
            if status.state in (RunnerState.FAILED, RunnerState.CRASH_LOOPING) and status.exit_code and \
                    (status.state, status.crashes) not in states:
                now = time.time()
                states.append((status.state, status.crashes))
                lives_s.append(now - status.started_at)
                backoffs_s.append(status.restart_at - now)
            return status if status.state == RunnerState.CRASH_LOOPING else None

        status = wait_for(looping, timeout_s=CRASHES * 120, interval_s=0.5, what="the runner to report crash_looping")
        # every crash before the loop was a plain crash; each driver lived past RESET_S; the back-off doubled
        assert states == [("failed", 1), ("failed", 2), ("crash_looping", 3)], states
        assert min(lives_s) > RESET_S, lives_s
        for seen, scheduled in zip(backoffs_s, (BACKOFF_S, 2 * BACKOFF_S, 4 * BACKOFF_S), strict=True):
            assert scheduled - 5 <= seen <= scheduled, backoffs_s  # seen up to a busy poll later
        message = MESSAGE.format(s=RAISE_AFTER_S)
        assert (status.exception, status.exception_message, status.exit_code) == ("ValueError", message, 1)
        assert status.log_path == str(tmp_path / "job" / "driver.log") and status.crash_window_s == WINDOW_S
        assert status.restart_at > 0
        snapshot_collect(job=job)  # the loop's collect step marks the job down with the reason
    finally:
        supervisor.send_signal(signal.SIGTERM)
        supervisor.wait(timeout=180)
    job.refresh_from_db()
    assert job.health == Job.Health.DOWN and job.health_reason["code"] == "runner_crash_looping"
    assert job.health_reason["data"]["exception"] == "ValueError"

    [body] = notify_jobs_down(endpoint)
    assert body["kind"] == "job_down" and body["data"]["down"]["data"]["message"] == message
    assert f"crash looping: {CRASHES} driver crashes" in body["text"] and f"ValueError: {message}" in body["text"]
    assert "fix the pipeline" in body["text"] and str(tmp_path / "job" / "driver.log") in body["text"]

    login(page)
    row = page.locator(f"#jobs tr[data-job='{JOB}'] .health-note")
    assert row.inner_text() == f"crash looping: ValueError: {message}"
    page.goto(f"/jobs/{job.pk}/")
    health = page.locator("#health-text").inner_text()
    assert f"ValueError: {message} (exit code 1)" in health and str(tmp_path / "job" / "driver.log") in health
    assert "crash looping" in health and "fix the pipeline" in health
    screenshot(page, "crash-loop-job")
    page.goto("/inbox/")
    item = page.locator("#inbox tr[data-kind='job_down']")
    assert f"crash looping: {CRASHES} driver crashes" in item.inner_text()
    assert f"ValueError: {message}" in item.inner_text()
    assert page.problems == [], page.problems
