"""A local Spark standalone cluster (one master, one worker) from the pip ``pyspark`` package.

``python -m sparkclient.demo.cluster start|stop|status [--workdir var/cluster]`` (``make cluster`` /
``make cluster-stop``). The master and the worker are started with ``bin/spark-class`` on
127.0.0.1; the worker offers more cores than the machine has (``--cores``, default 4: executors
of a streaming query are mostly idle between micro-batches). Their PIDs, URLs and ports are kept
in ``<workdir>/cluster.json``; ``stop`` ends exactly those processes (SIGTERM, then SIGKILL),
never anything found by name.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx

from sparkclient.demo.redisproc import free_port
from sparkclient.runner.procgroup import end_process_group

log = logging.getLogger(__name__)

__all__ = ["StandaloneCluster", "spark_class", "start_cluster", "stop_cluster", "load_cluster"]

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
STATE_FILE = "cluster.json"


@dataclass(frozen=True)
class StandaloneCluster:
    """A running master and worker: ``master_url`` (``spark://127.0.0.1:<port>``), the master's web
    UI (``/json/`` lists workers and applications), the PIDs, and where their logs go."""

    master_url: str
    master_ui: str
    worker_ui: str
    master_pid: int
    worker_pid: int
    worker_cores: int
    worker_memory: str
    workdir: str

    def master_json(self, timeout_s: float = 5.0) -> dict:
        """The master's ``/json/`` (workers, cores, active and completed applications)."""
        return httpx.get(f"{self.master_ui}/json/", timeout=timeout_s).json()

    def stop(self, timeout_s: float = 20.0) -> None:
        """Stop the worker, then the master (see :func:`stop_cluster`)."""
        stop_cluster(self, timeout_s=timeout_s)


def spark_class() -> str:
    """``bin/spark-class`` of the installed pyspark (the venv's ``spark-class`` script, else
    ``<pyspark>/bin/spark-class``). Raises ``FileNotFoundError`` when neither exists."""
    beside = Path(sys.executable).with_name("spark-class")
    if beside.is_file():
        return str(beside)
    package = importlib.util.find_spec("pyspark")  # where it is installed, without importing it
    if package is not None and package.origin:
        inside = Path(package.origin).parent / "bin" / "spark-class"
        if inside.is_file():
            return str(inside)
    found = shutil.which("spark-class")
    if found:
        return found
    raise FileNotFoundError("spark-class not found: install pyspark in this environment (pip install pyspark)")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie child counts as gone
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def _spawn(args: list[str], log_path: Path, env: dict[str, str]) -> subprocess.Popen:
    with open(log_path, "ab") as out:
        return subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)


def start_cluster(workdir: str | os.PathLike[str], *, worker_cores: int = 4, worker_memory: str = "4g",
                  master_port: int | None = None, master_ui_port: int | None = None,
                  worker_ui_port: int | None = None, timeout_s: float = 120.0) -> StandaloneCluster:
    """Start a master and one worker on 127.0.0.1 and wait until the worker is ALIVE at the master.

    Ports default to free ones. Writes ``<workdir>/cluster.json``. Raises ``RuntimeError`` (after
    stopping whatever it started) when the cluster is not up within ``timeout_s`` seconds; the
    message names the log files.
    """
    root = Path(workdir).resolve()
    root.mkdir(parents=True, exist_ok=True)
    master_port = master_port or free_port()
    master_ui_port = master_ui_port or free_port()
    worker_ui_port = worker_ui_port or free_port()
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", SPARK_MASTER_HOST="127.0.0.1",
               SPARK_WORKER_DIR=str(root / "work"), SPARK_LOG_DIR=str(root / "logs"),
               SPARK_NO_DAEMONIZE="1")
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    (root / "logs").mkdir(exist_ok=True)
    tool = spark_class()
    master_url = f"spark://127.0.0.1:{master_port}"
    master = _spawn([tool, MASTER_CLASS, "--host", "127.0.0.1", "--port", str(master_port),
                     "--webui-port", str(master_ui_port)], root / "logs" / "master.log", env)
    worker = _spawn([tool, WORKER_CLASS, "--host", "127.0.0.1", "--cores", str(worker_cores),
                     "--memory", worker_memory, "--webui-port", str(worker_ui_port),
                     "--work-dir", str(root / "work"), master_url], root / "logs" / "worker.log", env)
    cluster = StandaloneCluster(master_url=master_url, master_ui=f"http://127.0.0.1:{master_ui_port}",
                                worker_ui=f"http://127.0.0.1:{worker_ui_port}", master_pid=master.pid,
                                worker_pid=worker.pid, worker_cores=worker_cores, worker_memory=worker_memory,
                                workdir=str(root))
    (root / STATE_FILE).write_text(json.dumps(asdict(cluster), indent=2))
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for proc, name in ((master, "master"), (worker, "worker")):
            if proc.poll() is not None:
                stop_cluster(cluster)
                raise RuntimeError(f"the standalone {name} exited with code {proc.returncode}; "
                                   f"see {root / 'logs' / (name + '.log')}")
        try:
            state = cluster.master_json(timeout_s=2.0)
            if any(w.get("state") == "ALIVE" for w in state.get("workers", ())):
                log.info("standalone cluster up at %s (UI %s)", master_url, cluster.master_ui)
                return cluster
        except (httpx.HTTPError, ValueError):
            pass
        time.sleep(0.5)
    stop_cluster(cluster)
    raise RuntimeError(f"the standalone cluster did not come up within {timeout_s:.0f} s; see the logs in "
                       f"{root / 'logs'}")


def load_cluster(workdir: str | os.PathLike[str]) -> StandaloneCluster | None:
    """The cluster recorded in ``<workdir>/cluster.json``, or None when there is none."""
    path = Path(workdir) / STATE_FILE
    if not path.is_file():
        return None
    return StandaloneCluster(**json.loads(path.read_text()))


def stop_cluster(cluster: StandaloneCluster, timeout_s: float = 20.0) -> None:
    """End the worker, then the master, by their recorded PIDs: SIGTERM to each one's process group
    (it was started in a session of its own, so this reaches its JVM and nothing else), SIGKILL
    after ``timeout_s`` seconds (:func:`sparkclient.runner.procgroup.end_process_group`). Removes ``cluster.json``."""
    for pid in (cluster.worker_pid, cluster.master_pid):
        if _alive(pid):
            end_process_group(pid, term_wait_s=timeout_s, kill_wait_s=5.0, what="the cluster's process group")
    state = Path(cluster.workdir) / STATE_FILE
    if state.is_file():
        state.unlink()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sparkclient.demo.cluster", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("start", "stop", "status"))
    parser.add_argument("--workdir", default="var/cluster")
    parser.add_argument("--worker-cores", type=int, default=4)
    parser.add_argument("--worker-memory", default="4g")
    parser.add_argument("--master-port", type=int, default=7077)
    parser.add_argument("--master-ui-port", type=int, default=8080)
    parser.add_argument("--worker-ui-port", type=int, default=8081)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    existing = load_cluster(args.workdir)
    if args.command == "start":
        if existing is not None and _alive(existing.master_pid):
            print(f"already running: {existing.master_url} (UI {existing.master_ui}); "
                  f"stop it with `python -m sparkclient.demo.cluster stop --workdir {args.workdir}`")
            return 0
        cluster = start_cluster(args.workdir, worker_cores=args.worker_cores, worker_memory=args.worker_memory,
                                master_port=args.master_port, master_ui_port=args.master_ui_port,
                                worker_ui_port=args.worker_ui_port)
        print(f"standalone cluster: {cluster.master_url}  master UI {cluster.master_ui}  "
              f"worker {cluster.worker_cores} cores (pids {cluster.master_pid}, {cluster.worker_pid})")
        return 0
    if existing is None:
        print(f"no cluster recorded in {Path(args.workdir) / STATE_FILE}")
        return 0 if args.command == "stop" else 1
    if args.command == "stop":
        stop_cluster(existing)
        print(f"stopped {existing.master_url} (pids {existing.worker_pid}, {existing.master_pid})")
        return 0
    up = _alive(existing.master_pid) and _alive(existing.worker_pid)
    print(f"{existing.master_url}: {'running' if up else 'not running'} (UI {existing.master_ui})")
    return 0 if up else 1


if __name__ == "__main__":
    raise SystemExit(main())
