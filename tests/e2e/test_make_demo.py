"""``make demo`` smoke test: start the demo as ``make demo`` does
(``python -m sparkclient.demo``), wait for the dashboard and the first metric snapshot, sign in with the
admin password it prints, then stop it with Ctrl-C (SIGINT) and check that no process it started
is left behind (psutil)."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import httpx
import psutil
import pytest

from sparkclient.demo.redisproc import free_port
from tests.repo import ROOT
from tests.waiting import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.spark, pytest.mark.timeout(600)]



def _snapshots(db: Path) -> int:
    """Metric snapshots stored so far in the demo's database (0 before it is migrated)."""
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
            return conn.execute("SELECT COUNT(*) FROM jobs_metricsnapshot").fetchone()[0]
    except sqlite3.OperationalError:  # not migrated yet, or locked for a moment
        return 0


def _sign_in(base: str, username: str, password: str) -> httpx.Client:
    client = httpx.Client(base_url=base, timeout=10, follow_redirects=True)
    form = client.get("/accounts/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text).group(1)
    client.post("/accounts/login/", data={"username": username, "password": password,
                                          "csrfmiddlewaretoken": token}, headers={"Referer": f"{base}/accounts/login/"})
    return client


def test_make_demo_starts_collects_metrics_and_stops_without_orphans(tmp_path):
    port = free_port()
    var = tmp_path / "var"
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update({"SPARKSCALER_VAR_DIR": str(var), "PYSPARK_PYTHON": sys.executable, "PYTHONUNBUFFERED": "1"})
    log = tmp_path / "demo.log"
    with log.open("w") as out:
        demo = subprocess.Popen([sys.executable, "-m", "sparkclient.demo", "--port", str(port),
                                 "--collect-interval-s", "5", "--rate", "50", "--partitions", "2"],
                                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    started: set[tuple[int, float]] = set()

    def note_children() -> None:
        try:
            for child in psutil.Process(demo.pid).children(recursive=True):
                started.add((child.pid, child.create_time()))
        except psutil.NoSuchProcess:
            pass

    def alive() -> bool:
        note_children()
        assert demo.poll() is None, f"the demo exited with {demo.returncode}:\n{log.read_text()[-3000:]}"
        return True

    try:
        wait_for(lambda: alive() and "Dashboard: http://127.0.0.1" in log.read_text(), timeout_s=240,
                 interval_s=1, what="the demo to print its dashboard address")
        base = f"http://127.0.0.1:{port}"
        password = re.search(r"user 'admin', password '([^']+)'", log.read_text()).group(1)
        client = _sign_in(base, "admin", password)
        overview = client.get("/")
        assert overview.status_code == 200 and "demo" in overview.text, overview.text[:500]
        wait_for(lambda: alive() and _snapshots(var / "db.sqlite3") > 0, timeout_s=300, interval_s=2,
                 what="the first metric snapshot")
        assert client.get("/api/snapshots/").json()["count"] > 0
        note_children()
        names = {psutil.Process(pid).name() for pid, _ in started if psutil.pid_exists(pid)}
        assert any("java" in name for name in names), names  # the Spark driver runs
    finally:
        if demo.poll() is None:
            demo.send_signal(signal.SIGINT)  # Ctrl-C
            try:
                demo.wait(timeout=120)
            except subprocess.TimeoutExpired:
                demo.kill()
                demo.wait()
    text = log.read_text()
    assert demo.returncode == 0 and "Stopped." in text, text[-3000:]

    def orphans() -> list[str]:
        left = []
        for pid, created in started:
            try:
                process = psutil.Process(pid)
                if process.create_time() == created and process.status() != psutil.STATUS_ZOMBIE:
                    left.append(f"{pid} {' '.join(process.cmdline())[:120]}")
            except psutil.NoSuchProcess:
                pass
        return left

    assert len(started) >= 5, started  # redis, generator, runner (+ its JVM), celery, web
    assert not orphans(), orphans()
