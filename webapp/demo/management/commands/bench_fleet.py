"""``manage.py bench_fleet --jobs N --json FILE``: how many jobs one deployment serves.

It starts, as processes: a throw-away PostgreSQL (``sparkclient.demo.pgserver``), Redis, a fake fleet
of N running jobs (``sparkclient.demo.fakefleet``: N fake Spark UIs on loopback replaying the
recorded Spark 4.3.0 capture, and N runners publishing their status and progress), the Celery beat
and ``--workers`` Celery workers (``-P threads -c --threads``, as ``docker-compose.yml`` runs them).
It registers the N jobs, lets the live loop run for ``--duration-s``, then measures
(:mod:`webapp.demo.fleetbench`) and prints one JSON object (also written to ``--json``):

- ``collected_within_interval``, ``evaluated_within_interval``: the fractions of jobs on time over the
  measured period (the run after a warm-up of stabilization + metric window + 2 intervals);
- ``collections_per_due_beat``: snapshots stored over the beats due (jobs × measured s / interval);
  ``collect_wall_s``: one beat's wall time in the worker (collect + evaluate), p50 and p99;
- ``cpu_ms``: CPU ms per collection and per evaluation in the worker thread, p50 and p99;
- ``cores_used``: cores used on average over the measured period by the workers, the beat, the fake
  fleet, PostgreSQL, Redis, and the rest of the machine (``other``); ``beat_cpu_ms`` and
  ``jobs_per_core`` (:func:`capacity`): the deployment's CPU per collection, and the jobs a core serves;
- ``rows_per_job_per_day``: database rows written, and kept after retention;
- ``overview_server_ms``: the jobs overview's server time, p50 and p99, and its SQL queries;
- ``spark_requests_per_collection``, ``load_average`` (1 min, sampled every 5 s: mean and max).

``--phase seed|measure`` are the steps it runs in a child process against the benchmark's database.
"""

from __future__ import annotations

import json
import os
import secrets
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from sparkclient.demo.pgserver import start_postgres
from sparkclient.demo.processes import ProcessGroup
from sparkclient.demo.redisproc import start_redis
from webapp.demo import fleetbench


class Command(BaseCommand):
    help = "Run N fake jobs through the real Celery workers and beat on PostgreSQL and measure the live loop."

    def add_arguments(self, parser):
        parser.add_argument("--jobs", type=int, default=100, help="Jobs in the fleet (default 100).")
        parser.add_argument("--json", type=Path, help="Also write the result to this file.")
        parser.add_argument("--duration-s", type=float, default=300.0, help="How long the loop runs (default 300).")
        parser.add_argument("--workers", type=int, default=2, help="Celery worker processes (default 2).")
        parser.add_argument("--threads", type=int, default=4, help="Threads per worker (-P threads -c; default 4).")
        parser.add_argument("--interval-s", type=float, default=15.0,
                            help="SCALER_COLLECT_INTERVAL_S for the run (default 15).")
        parser.add_argument("--window-s", type=float, default=60.0, help="The jobs' metric window (default 60).")
        parser.add_argument("--stabilization-s", type=float, default=30.0,
                            help="SCALER_STABILIZATION_S for the run (default 30).")
        parser.add_argument("--warmup-s", type=float, help="Seconds left out before measuring (default: "
                                                           "stabilization + window + 2 intervals).")
        parser.add_argument("--requests", type=int, default=30, help="Overview requests timed (default 30).")
        parser.add_argument("--log-dir", type=Path, help="Keep the processes' logs here (default: a temp dir).")
        parser.add_argument("--phase", choices=["run", "seed", "measure"], default="run", help="(internal)")
        parser.add_argument("--urls", type=Path, help="(seed) the fake fleet's {job: ui_url} file")
        parser.add_argument("--start", type=float, help="(measure) the measured period's start, epoch s")
        parser.add_argument("--end", type=float, help="(measure) the measured period's end, epoch s")
        parser.add_argument("--out", type=Path, help="(measure) where to write the measurements")

    def handle(self, *args, **options):
        if options["phase"] == "seed":
            count = fleetbench.seed(urls=json.loads(options["urls"].read_text()), window_s=options["window_s"])
            self.stdout.write(json.dumps({"jobs": count}))
            return
        if options["phase"] == "measure":
            options["out"].write_text(json.dumps(measure(options)))
            return
        if options["jobs"] < 1 or options["workers"] < 1 or options["threads"] < 1 or options["duration_s"] <= 0:
            raise CommandError("--jobs, --workers and --threads must be at least 1, --duration-s positive")
        report = run(options, self.stderr)
        text = json.dumps(report, indent=2)
        self.stdout.write(text)
        if options["json"]:
            options["json"].write_text(text + "\n")


def measure(options: dict) -> dict:
    """The measurements of the database and the overview (run in a child on the benchmark's database)."""
    start = datetime.fromtimestamp(options["start"], tz=UTC)
    end = datetime.fromtimestamp(options["end"], tz=UTC)
    return {"within": fleetbench.within_interval(start=start, end=end, interval_s=options["interval_s"]),
            "rows": fleetbench.rows_per_job_per_day(start=start, end=end, interval_s=options["interval_s"]),
            "counts": fleetbench.counts(),
            "overview": fleetbench.overview_server_ms(requests=options["requests"])}


def child_env(options: dict, *, database_url: str, redis_url: str, var_dir: Path) -> dict[str, str]:
    """The environment of every child: the benchmark's PostgreSQL and Redis, DEBUG off over plain HTTP
    (as a production deployment behind its proxy), the run's collect interval and stabilization."""
    env = {**os.environ, "DATABASE_URL": database_url, "REDIS_URL": redis_url, "CELERY_BROKER_URL": redis_url,
           "CELERY_RESULT_BACKEND": redis_url, "DEBUG": "false", "SECRET_KEY": secrets.token_urlsafe(50),
           "SECURE_SSL_REDIRECT": "false", "SECURE_HSTS_SECONDS": "0", "SESSION_COOKIE_SECURE": "false",
           "CSRF_COOKIE_SECURE": "false", "SCALER_COLLECT_INTERVAL_S": str(options["interval_s"]),
           "SCALER_STABILIZATION_S": str(options["stabilization_s"]), "SPARKSCALER_VAR_DIR": str(var_dir),
           "LOG_LEVEL": "INFO", "PYTHONUNBUFFERED": "1", "DJANGO_SETTINGS_MODULE": "webapp.settings"}
    env.pop("TEST_DATABASE_PATH", None)
    return env


def _wait_for_file(path: Path, group: ProcessGroup, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if group.dead():
            raise CommandError(f"{group.dead()[0].name} exited; see {group.dead()[0].log_path}")
        if time.monotonic() > deadline:
            raise CommandError(f"{path} was not written within {timeout_s:.0f} s")
        time.sleep(0.2)


def _start_loop(group: ProcessGroup, options: dict, work: Path) -> None:
    group.start("beat", ["python", "-m", "celery", "-A", "webapp", "beat", "--loglevel", "INFO",
                         "-s", str(work / "celerybeat-schedule")])
    for i in range(options["workers"]):
        group.start(f"worker-{i}", ["python", "-m", "celery", "-A", "webapp", "worker", "-P", "threads",
                                    "-c", str(options["threads"]), "-n", f"fleet{i}@%h", "--loglevel", "INFO",
                                    "--without-gossip", "--without-mingle"])


def _run_for(group: ProcessGroup, duration_s: float, stderr) -> list[float]:
    """Wait ``duration_s`` while the loop runs; returns the 1-minute load average every 5 s."""
    loads, end = [], time.monotonic() + duration_s
    while time.monotonic() < end:
        if group.dead():
            raise CommandError(f"{group.dead()[0].name} exited; see {group.dead()[0].log_path}")
        loads.append(os.getloadavg()[0])
        stderr.write(f"bench_fleet: {end - time.monotonic():.0f} s left, load {loads[-1]:.2f}")
        time.sleep(min(5.0, max(0.0, end - time.monotonic())))
    return loads


_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


def _proc_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` used so far; 0 when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) * _TICK_S


def _children_of(parent: int) -> list[int]:
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == parent:
                pids.append(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            continue
    return pids


def cpu_snapshot(group: ProcessGroup, postgres, redis) -> dict[str, float]:
    """CPU seconds used so far by each role: the workers, the beat, the fake fleet, PostgreSQL (the
    postmaster and its backends), Redis, and the whole machine (``/proc/stat``, every process)."""
    roles: dict[str, float] = {}
    for child in group.children:
        role = child.name.split("-")[0]
        roles[role] = roles.get(role, 0.0) + _proc_cpu_s(child.process.pid)
    postmaster = int((postgres.data_dir / "data" / "postmaster.pid").read_text().split()[0])
    roles["postgres"] = sum(_proc_cpu_s(p) for p in [postmaster, *_children_of(postmaster)])
    roles["redis"] = _proc_cpu_s(redis.process.pid)
    cpu = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    roles["machine"] = (sum(int(v) for v in cpu) - int(cpu[3]) - int(cpu[4])) * _TICK_S  # all but idle, iowait
    return roles


def cpu_share(before: dict[str, float], after: dict[str, float], seconds: float) -> dict[str, float]:
    """Cores used on average by each role between two :func:`cpu_snapshot` (``other``: the rest of
    the machine, other people's processes included)."""
    used = {role: round((after.get(role, 0.0) - before.get(role, 0.0)) / seconds, 3) for role in after}
    used["other"] = round(used["machine"] - sum(v for k, v in used.items() if k != "machine"), 3)
    return used


def run(options: dict, stderr) -> dict:
    """Start everything, run the loop for ``--duration-s``, measure, stop everything; the report."""
    work = options["log_dir"] or Path(tempfile.mkdtemp(prefix="sparkscaler-fleet-"))
    work.mkdir(parents=True, exist_ok=True)
    postgres = start_postgres()
    redis = start_redis(workdir=work / "redis")
    env = child_env(options, database_url=postgres.url, redis_url=redis.url, var_dir=work / "var")
    group = ProcessGroup(log_dir=work / "logs", env=env)
    manage = ["python", "manage.py"]  # the repository's, run from its root (ProcessGroup's cwd)
    try:
        group.run("migrate", [*manage, "migrate", "--noinput"])
        (work / "jobs.json").write_text(json.dumps(fleetbench.job_names(options["jobs"])))
        group.start("fakefleet", ["python", "-m", "sparkclient.demo.fakefleet", "--jobs", str(work / "jobs.json"),
                                  "--redis", redis.url, "--urls", str(work / "urls.json"),
                                  "--stats", str(work / "fakefleet-stats.json")])
        _wait_for_file(work / "urls.json", group)
        group.run("seed", [*manage, "bench_fleet", "--phase", "seed", "--urls", str(work / "urls.json"),
                           "--window-s", str(options["window_s"])])
        _start_loop(group, options, work)
        started = time.time()
        warmup_s = options["warmup_s"] if options["warmup_s"] is not None else \
            options["stabilization_s"] + options["window_s"] + 2 * options["interval_s"]
        warmup_s = min(warmup_s, options["duration_s"] / 2)
        loads = _run_for(group, warmup_s, stderr)
        cpu_before = cpu_snapshot(group, postgres, redis)
        loads += _run_for(group, options["duration_s"] - warmup_s, stderr)
        start_s, end_s = started + warmup_s, time.time()
        cores = cpu_share(cpu_before, cpu_snapshot(group, postgres, redis), end_s - start_s)
        group.run("measure", [*manage, "bench_fleet", "--phase", "measure", "--start", str(start_s),
                              "--end", str(end_s), "--interval-s", str(options["interval_s"]),
                              "--requests", str(options["requests"]), "--out", str(work / "measure.json")])
    finally:
        group.stop()
        redis.stop()
        postgres.stop()
    return report(options, work=work, start_s=start_s, end_s=end_s, loads=loads, cores=cores)


def capacity(cores: dict[str, float], *, collections: int, seconds: float, interval_s: float) -> dict:
    """What one beat costs the deployment and how many jobs a core serves: ``beat_cpu_ms`` is the
    CPU of the workers, PostgreSQL and Redis per stored collection (the fake fleet's is not the
    deployment's); ``jobs_per_core`` = interval / beat CPU. A threads-pool worker process runs its
    Python on one core at a time (the GIL): ``jobs_per_core`` is also the most jobs one worker
    process keeps on time, on a core of its own."""
    if not collections:
        return {"beat_cpu_ms": None, "jobs_per_core": None}
    beat_s = sum(cores.get(role, 0.0) for role in ("worker", "beat", "postgres", "redis")) * seconds / collections
    return {"beat_cpu_ms": round(beat_s * 1000, 1), "jobs_per_core": round(interval_s / beat_s) if beat_s else None}


def report(options: dict, *, work: Path, start_s: float, end_s: float, loads: list[float],
           cores: dict[str, float]) -> dict:
    """The benchmark's JSON result from the measurements, the workers' timing records and the fake
    fleet's request counts."""
    measured = json.loads((work / "measure.json").read_text())
    records = fleetbench.timing_records(sorted((work / "logs").glob("worker-*.log")))
    stats_path = work / "fakefleet-stats.json"
    requests = json.loads(stats_path.read_text())["requests"] if stats_path.exists() else None
    beats = sum(1 for r in records if r["collected"])
    in_period = [r for r in records if start_s <= r["at"] <= end_s]
    wanted = options["jobs"] * (end_s - start_s) / options["interval_s"]
    return {
        "jobs": options["jobs"], "workers": options["workers"], "threads_per_worker": options["threads"],
        "duration_s": options["duration_s"], "interval_s": options["interval_s"],
        "measured_s": round(end_s - start_s, 1),
        "collected_within_interval": measured["within"]["collected"],
        "evaluated_within_interval": measured["within"]["evaluated"],
        "collections_per_due_beat": round(sum(1 for r in in_period if r["collected"]) / wanted, 3),
        "collect_wall_s": fleetbench.percentiles([r["wall_s"] for r in in_period]),
        "cpu_ms": fleetbench.cpu_ms(records, start_s=start_s, end_s=end_s),
        "cores_used": cores,
        **capacity(cores, collections=sum(1 for r in in_period if r["collected"]), seconds=end_s - start_s,
                   interval_s=options["interval_s"]),
        "rows_per_job_per_day": measured["rows"], "rows": measured["counts"],
        "overview_server_ms": measured["overview"],
        "spark_requests_per_collection": round(requests / beats, 1) if requests and beats else None,
        "load_average": {"mean": round(statistics.fmean(loads), 2) if loads else None,
                         "max": round(max(loads), 2) if loads else None, "cpus": os.cpu_count()},
        "logs": str(work / "logs"),
    }
