"""``python -m sparkclient run``: run a user's pipeline under a supervisor, rescalable from the dashboard.

    python -m sparkclient run --pipeline mypackage.mymodule:build --job clicks \\
        [--master local|spark://host:7077|k8s://...|yarn] [--knob NAME=VALUE ...] \\
        [--redis-url redis://:PASSWORD@host:6379/0] [--workdir DIR] [--ui-port 4040] [--max-executors N]

The **supervisor** keeps one **driver** child (:mod:`sparkclient.runner.driver`) running. The job's knob
values live in Redis ``ss:config:{job}``; when they exist they win over ``--knob`` (a restarted
supervisor resumes what the autoscaler applied), otherwise the defaults with ``--knob`` overrides are
written there. SIGINT/SIGTERM is forwarded to the driver, which stops the query and Spark; the
supervisor then exits, leaving no JVM behind. A driver that crashes (exit code not 0/75) is recorded
as ``state=failed`` and restarted after a back-off, at most :data:`MAX_CRASH_RESTARTS` times in a row.

The control endpoint is ``--redis-url``, else ``$SPARKSCALER_REDIS_URL`` with the password of the file
``$SPARKSCALER_REDIS_PASSWORD_FILE`` when set (preferred: a command line, password included, shows in ``ps``),
else redis://127.0.0.1:6379/0; the driver child gets it in its environment.
**Capacity** (the most executors a plan may ask for): local mode, the host's cores; a standalone
master, its free cores from the master UI's ``/json`` (``--master-ui``, default port 8080 on the
master's host); elsewhere ``--max-executors``, which also caps the others.
``--first-batch-timeout S``: how long a rescale waits for its first batch, from its command (default
:data:`sparkclient.runner.firstbatch.FIRST_BATCH_TIMEOUT_S`); a driver whose query dies before it hands
the rescale to the next driver, and the deadline stays.
``--warm-up-batches N``: how many micro-batches with rows a standby driver runs on the pipeline's plan
before a warm handover (default :data:`sparkclient.runner.session.WARM_UP_BATCHES`); fewer cost the
standby less CPU beside the running driver, and leave more of the new JVM's first batches cold.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from sparkclient.contract import control, keys
from sparkclient.contract.messages import FailureCode, RescalePath, RescaleResult, RunnerState, StatusUpdate
from sparkclient.contract.sparkconf import launch_settings
from sparkclient.contract.spec import KnobError, PipelineLoadError, load_pipeline, validate_values
from sparkclient.contract.standby import HandoverState
from sparkclient.runner.arguments import parse_pairs
from sparkclient.runner.driver import EXIT_RESTART, Driver, load_knob_values
from sparkclient.runner.driverlog import query_failure
from sparkclient.runner.handover import mark_as
from sparkclient.runner.lease import LeaseUnavailable, release_token
from sparkclient.runner.procgroup import end_process_group
from sparkclient.runner.rescale import EXIT_HANDED_OVER
from sparkclient.runner.standby import StandbyKeeper

log = logging.getLogger(__name__)

#: Crash restarts in a row before the supervisor gives up.
MAX_CRASH_RESTARTS = 5
#: A driver that ran this long before crashing resets the crash counter, in seconds.
CRASH_RESET_S = 120.0
#: How long the supervisor waits for a stopping driver before killing its process group, seconds.
STOP_TIMEOUT_S = 90.0


def standalone_free_cores(master_ui: str, timeout_s: float = 3.0) -> int | None:
    """Free cores of a standalone master (``/json``: ``cores - coresused``), or None when unreadable."""
    try:
        data = httpx.get(master_ui.rstrip("/") + "/json/", timeout=timeout_s).json()
        free = int(data["cores"]) - int(data["coresused"])
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        return None
    return max(0, free)


def cluster_capacity(master: str, *, max_executors: int | None, master_ui: str | None) -> int:
    """The most executors a plan may ask for (see the module docstring); 0 when unknown."""
    if master == "local" or master.startswith("local["):
        capacity = os.cpu_count() or 1
    elif master.startswith("spark://"):
        host = master.removeprefix("spark://").split(",")[0].split(":")[0]
        capacity = standalone_free_cores(master_ui or f"http://{host}:8080") or 0
    else:
        capacity = 0
    if max_executors:
        capacity = min(capacity, max_executors) if capacity else max_executors
    return capacity


class Supervisor:
    """Keeps one driver child process running for the job (see the module docstring)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.job = args.job
        self.workdir = Path(args.workdir)
        self.spec = load_pipeline(args.pipeline)  # a bad reference fails before anything starts
        # a memory knob and a --conf of its Spark key: refused before any driver starts
        launch_settings(self.spec.knobs, None, master=args.master,
                        operator_conf=parse_pairs(args.conf, "--conf", "KEY=VALUE"))
        self.client = control.connect(args.redis_url)
        self.stopping = threading.Event()
        self.child: subprocess.Popen | None = None
        self.keeper = StandbyKeeper(self.client, self.job, self.spec, lambda handover: self._spawn(standby=handover),
                                    str(self.workdir / "driver.log"))

    @property
    def standby(self) -> subprocess.Popen | None:
        """The standby driver process, while one runs (:class:`sparkclient.runner.standby.StandbyKeeper`)."""
        return self.keeper.proc

    def init_values(self) -> dict[str, int]:
        """The knob values to run with, written to ``ss:config:{job}`` when none are stored.

        Raises:
            KnobError: a ``--knob`` flag or the stored values do not fit the pipeline's knobs.
        """
        spec = self.spec
        flags = validate_values(spec.knobs, parse_pairs(self.args.knob), partial=True)
        stored = load_knob_values(self.client, self.job, spec)
        if stored is not None:
            ignored = {k: v for k, v in flags.items() if stored[k] != v}
            if ignored:
                log.warning("job %s resumes its stored knobs %s; --knob %s ignored (delete %s to start over)",
                            self.job, stored, ignored, keys.config(self.job))
            return stored
        values = validate_values(spec.knobs, flags)
        self.client.set(keys.config(self.job), json.dumps(values, sort_keys=True))
        return values

    def on_signal(self, signum: int, _frame: object) -> None:
        """Forward SIGINT/SIGTERM to the drivers (as SIGTERM) and stop supervising."""
        self.stopping.set()
        for child in (self.child, self.standby):
            if child is not None and child.poll() is None:
                child.send_signal(signal.SIGTERM)

    def _spawn(self, standby: str | None = None) -> subprocess.Popen:
        cmd, env = driver_command(self.args, self.workdir, standby)
        self.workdir.mkdir(parents=True, exist_ok=True)
        with open(self.workdir / "driver.log", "ab") as out:
            # own session: the driver, its JVM and Python workers form one process group
            return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    env=env, start_new_session=True)

    @staticmethod
    def reap_group(pid: int, grace_s: float = 10.0) -> None:
        """Make sure nothing of the exited driver's process group (its JVM, Python workers) survives:
        whatever is left after ``grace_s`` s gets SIGTERM, then SIGKILL 5 s later
        (:func:`sparkclient.runner.procgroup.end_process_group`)."""
        end_process_group(pid, grace_s=grace_s, term_wait_s=5.0, kill_wait_s=5.0,
                          what="the driver's process group")

    def _watch_handover(self) -> None:
        """Start, replace or stop the standby driver as the handover and the web app's standby
        request ask (:meth:`sparkclient.runner.standby.StandbyKeeper.tick`)."""
        self.keeper.tick()

    def _wait_child(self, child: subprocess.Popen) -> int:
        while not self.stopping.is_set():
            try:
                return child.wait(timeout=0.2)
            except subprocess.TimeoutExpired:
                self._watch_handover()
                continue
        try:
            return child.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            log.error("driver %d did not stop within %.0f s: killing it", child.pid, STOP_TIMEOUT_S)
            os.killpg(child.pid, signal.SIGKILL)
            return child.wait()

    def run(self) -> int:
        """Supervise until SIGINT/SIGTERM (0) or too many crashes in a row (1)."""
        values = self.init_values()
        control.write_status(self.client, self.job, StatusUpdate(
            state=RunnerState.STARTING, supervisor_pid=os.getpid(), knobs=values, pipeline=self.args.pipeline,
            capacity=self.args.capacity, error=""))
        crashes, error = 0, ""
        adopted: subprocess.Popen | None = None
        while not self.stopping.is_set():
            started, log_from = time.monotonic(), self._log_size()
            if adopted is not None:  # the standby that took over after a handover
                self.child, adopted = adopted, None
                child = self.child
                log.info("driver %d took over", child.pid)
            else:
                self.child = child = self._spawn()
                control.write_status(self.client, self.job, StatusUpdate(pid=child.pid, error=""))
                log.info("driver %d started", child.pid)
            code = self._wait_child(child)
            if code == EXIT_HANDED_OVER and self.standby is not None:
                adopted = self.keeper.take()
                self.reap_group(child.pid)
                continue
            crashed = not self.stopping.is_set() and code not in (0, EXIT_RESTART)
            token = self.client.hget(keys.runner(self.job), "lease_token")
            if crashed and token:  # a dead driver's lease would block the next one until it expires
                release_token(self.client, self.job, token)
            if crashed and self.standby is not None:  # the driver that asked for it is gone
                standby = self.keeper.take()
                standby.terminate()
                standby.wait(timeout=STOP_TIMEOUT_S)
                self.reap_group(standby.pid, grace_s=2.0)
                self.client.hset(keys.handover(self.job), "state", HandoverState.CANCELLED)
            if crashed:  # record it at once; reaping the JVM can take seconds
                crashes = 1 if time.monotonic() - started > CRASH_RESET_S else crashes + 1
                reported = self.client.hget(keys.runner(self.job), "error") or "no error reported"
                cause = query_failure(self.workdir / "driver.log", since=log_from)
                error = (f"driver exited with code {code} (crash {crashes} in a row): {reported}"
                         + (f"; its query had failed with {cause}" if cause else "")
                         + f"; see {self.workdir / 'driver.log'}")
                log.error(error)
                control.write_status(self.client, self.job, StatusUpdate(state=RunnerState.FAILED, error=error))
            elif code == EXIT_RESTART:
                crashes = 0
                control.write_status(self.client, self.job, StatusUpdate(state=RunnerState.RESTARTING))
            self.reap_group(child.pid)
            self.child = None
            if self.standby is not None and self.stopping.is_set():
                standby = self.keeper.take()
                standby.wait(timeout=STOP_TIMEOUT_S)
                self.reap_group(standby.pid)
            if not crashed:
                if self.stopping.is_set() or code == 0:
                    break
                continue
            if crashes > MAX_CRASH_RESTARTS:
                self._fail_pending(error)
                return 1
            self.stopping.wait(min(30.0, 2.0 ** crashes))
        control.write_status(self.client, self.job, StatusUpdate(state=RunnerState.STOPPED))
        return 0

    def _log_size(self) -> int:
        """The driver log's size, bytes (0 before the first driver writes it)."""
        try:
            return (self.workdir / "driver.log").stat().st_size
        except OSError:
            return 0

    def _fail_pending(self, error: str) -> None:
        raw = self.client.get(keys.runner_pending(self.job))
        if raw:
            try:
                command_id = str(json.loads(raw)["id"])
            except (ValueError, KeyError, TypeError):
                command_id = ""
            if command_id:
                control.write_result(self.client, self.job, RescaleResult.failed(
                    command_id, FailureCode.DRIVER_CRASHED, f"the restarted driver kept failing: {error}",
                    path=RescalePath.DRIVER_RESTART))
            self.client.delete(keys.runner_pending(self.job))


def driver_command(args: argparse.Namespace, workdir: Path,
                   standby: str | None = None) -> tuple[list[str], dict[str, str]]:
    """The driver child's argv and environment. The Redis URL (password included) goes in the
    environment as ``SPARKSCALER_REDIS_URL``, never in argv, which ``ps`` shows to everyone."""
    cmd = [sys.executable, "-m", "sparkclient", "run", "--driver", "--pipeline", args.pipeline, "--job", args.job,
           "--workdir", str(workdir), "--ui-port", str(args.ui_port),
           "--master", args.master, "--capacity", str(args.capacity)] + (["--standby", standby] if standby else []) \
        + [arg for conf in args.conf for arg in ("--conf", conf)] \
        + (["--warm-up-batches", str(args.warm_up_batches)] if args.warm_up_batches else []) \
        + ["--first-batch-timeout", repr(float(args.first_batch_timeout))]
    env = {**os.environ, "SPARKSCALER_REDIS_URL": args.redis_url}
    root = str(Path(__file__).resolve().parents[2])
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != root]
    env["PYTHONPATH"] = os.pathsep.join([root, *paths, os.getcwd()])  # the pipeline module may be in cwd
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    return cmd, env


def run(args: argparse.Namespace) -> int:
    """Run the supervisor, or the driver with ``--driver``; returns the exit code."""
    role = "driver" if args.driver else "supervisor"
    logging.basicConfig(level=logging.INFO,
                        format=f"%(asctime)s %(levelname)s {role}[%(process)d] %(name)s: %(message)s")
    for noisy in ("py4j", "httpx"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    args.workdir = args.workdir or str(Path("var") / "jobs" / args.job)
    if args.capacity is None:
        args.capacity = cluster_capacity(args.master, max_executors=args.max_executors, master_ui=args.master_ui)
    try:
        if args.driver:
            return _run_driver(args)
        supervisor = Supervisor(args)
        signal.signal(signal.SIGTERM, supervisor.on_signal)
        signal.signal(signal.SIGINT, supervisor.on_signal)
        return supervisor.run()
    except (PipelineLoadError, KnobError, control.ControlAuthError, control.ControlUnreachable) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _run_driver(args: argparse.Namespace) -> int:
    sys.path.append(os.getcwd())
    confs = parse_pairs(args.conf, "--conf", "KEY=VALUE")
    driver = Driver(spec=load_pipeline(args.pipeline), job=args.job, redis_url=args.redis_url,
                    workdir=Path(args.workdir), ui_port=args.ui_port, master=args.master, capacity=args.capacity,
                    standby=args.standby, spark_conf=confs, warm_up_batches=args.warm_up_batches,
                    first_batch_timeout_s=args.first_batch_timeout)
    signal.signal(signal.SIGTERM, driver.request_stop)
    signal.signal(signal.SIGINT, driver.request_stop)
    try:
        return driver.run()
    except LeaseUnavailable as exc:  # another driver runs this job: touch nothing of it
        log.error("%s", exc)
        return 2
    except Exception as exc:
        log.exception("driver of job %s failed", args.job)
        if args.standby and driver.client.hget(keys.handover(args.job), "state") != HandoverState.RELEASED:
            # a standby that never took over: the running driver carries on; tell it why (when the
            # handover is still this standby's)
            mark_as(driver.client, args.job, args.standby, state=HandoverState.FAILED,
                    error=f"{type(exc).__name__}: {exc}"[:2000])
            return 1
        control.write_status(driver.client, args.job, StatusUpdate(state=RunnerState.FAILED,
                                                                   error=f"{type(exc).__name__}: {exc}"[:2000]))
        return 1
