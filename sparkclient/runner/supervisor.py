"""``python -m sparkclient run``: run a user's pipeline under a supervisor, rescalable from the dashboard.

    python -m sparkclient run --pipeline mypackage.mymodule:build --job clicks \\
        [--master local|spark://host:7077|k8s://...|yarn] [--knob NAME=VALUE ...] \\
        [--redis-url redis://:PASSWORD@host:6379/0] [--workdir DIR] [--ui-port 4040] [--max-executors N]

The **supervisor** keeps one **driver** child (:mod:`sparkclient.runner.driver`) running. The job's knob
values live in Redis ``ss:config:{job}``; when they exist they win over ``--knob`` (a restarted
supervisor resumes what the autoscaler applied), otherwise the defaults with ``--knob`` overrides are
written there. SIGINT/SIGTERM is forwarded to the driver, which stops the query and Spark; the
supervisor then exits, leaving no JVM behind. A driver that crashes (exit code not 0/75) is recorded
as ``state=failed`` with its exit code, the exception that killed it (its crash record, else its log:
:func:`sparkclient.runner.driverlog.crash_of`) and its log, and restarted after a back-off that doubles
with each crash of the crash-loop window (:mod:`sparkclient.runner.crashloop`); as many crashes in the
window as the rule's are ``state=crash_looping``. The supervisor never gives up: it keeps restarting at
the capped back-off. A rescale left pending rides along to the next driver (a larger heap may be what
ends an out-of-memory loop); it fails ``driver-crashed`` only once as many drivers started on it as the
rule's crashes have crashed (:class:`PendingCrashes`).
``--crash-loop-crashes N --crash-loop-window-s S --crash-backoff-s S --crash-backoff-cap-s S`` set the
rule (defaults: :class:`sparkclient.runner.crashloop.CrashLoopRule`).

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
from sparkclient.runner.crashloop import CrashLoopRule, CrashRuleError, crash_verdict
from sparkclient.runner.driver import EXIT_RESTART, Driver, load_knob_values
from sparkclient.runner.driverlog import CRASH_FILE, Crash, crash_of, driver_log, write_crash
from sparkclient.runner.handover import mark_as
from sparkclient.runner.lease import LeaseUnavailable, release_token
from sparkclient.runner.procgroup import end_process_group
from sparkclient.runner.rescale import EXIT_HANDED_OVER
from sparkclient.runner.standby import StandbyKeeper

log = logging.getLogger(__name__)

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
        self.rule = crash_rule(args)
        self.stopping = threading.Event()
        self.child: subprocess.Popen | None = None
        self.keeper = StandbyKeeper(self.client, self.job, self.spec, lambda handover: self._spawn(standby=handover),
                                    str(driver_log(self.workdir)))

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
        with open(driver_log(self.workdir), "ab") as out:
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
        """Supervise until SIGINT/SIGTERM (0); a crashed driver is restarted, however often."""
        values = self.init_values()
        log_path = str(driver_log(self.workdir))
        control.write_status(self.client, self.job, StatusUpdate(
            state=RunnerState.STARTING, supervisor_pid=os.getpid(), knobs=values, pipeline=self.args.pipeline,
            capacity=self.args.capacity, error="", log_path=log_path, exit_code=0, crashes=0))
        crash_times: list[float] = []
        pending = PendingCrashes(self.rule.crashes)
        adopted: subprocess.Popen | None = None
        crashed = False
        while not self.stopping.is_set():
            log_from = self._log_size()
            pending.driver_started(self._pending_id())
            if adopted is not None:  # the standby that took over after a handover
                self.child, adopted = adopted, None
                child = self.child
                log.info("driver %d took over", child.pid)
            else:
                (self.workdir / CRASH_FILE).unlink(missing_ok=True)  # a record is the next driver's own
                self.child = child = self._spawn()
                # after a crash, the record's state and exit code are the dead driver's: a new one starts
                control.write_status(self.client, self.job, StatusUpdate(
                    state=RunnerState.STARTING if crashed else None, pid=child.pid, error="", exit_code=0,
                    exception="", exception_message=""))
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
            backoff_s = 0.0
            if crashed:  # record it at once; reaping the JVM can take seconds
                now = time.monotonic()
                verdict = crash_verdict(crash_times, now, self.rule)
                crash_times = [t for t in crash_times if t >= now - self.rule.window_s] + [now]
                backoff_s = verdict.backoff_s
                crash = crash_of(self.workdir, driver_log(self.workdir), since=log_from)
                error = crash_error(code, crash, verdict.crashes, self.rule, log_path)
                log.error(error)
                control.write_status(self.client, self.job, StatusUpdate(
                    state=RunnerState.CRASH_LOOPING if verdict.looping else RunnerState.FAILED, error=error,
                    exit_code=code, exception=crash.exception if crash else "",
                    exception_message=crash.message if crash else "", log_path=log_path,
                    crashes=verdict.crashes, crash_window_s=self.rule.window_s,
                    restart_at=time.time() + backoff_s))
                failed = pending.crashed()
                if failed:
                    self._fail_pending(failed, error)
            elif code == EXIT_RESTART:
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
            self.stopping.wait(backoff_s)
        control.write_status(self.client, self.job, StatusUpdate(state=RunnerState.STOPPED))
        return 0

    def _pending_id(self) -> str:
        """The id of the rescale left pending for the next driver (``ss:runner:{job}:pending``), ``""`` for none."""
        raw = self.client.get(keys.runner_pending(self.job))
        try:
            return str(json.loads(raw)["id"]) if raw else ""
        except (ValueError, KeyError, TypeError):
            return ""

    def _log_size(self) -> int:
        """The driver log's size, bytes (0 before the first driver writes it)."""
        try:
            return driver_log(self.workdir).stat().st_size
        except OSError:
            return 0

    def _fail_pending(self, command_id: str, error: str) -> None:
        """Fail the pending rescale ``command_id`` (``driver-crashed``), when it is still the one pending."""
        if self._pending_id() != command_id:
            return
        control.write_result(self.client, self.job, RescaleResult.failed(
            command_id, FailureCode.DRIVER_CRASHED, f"the drivers started on it kept crashing: {error}",
            path=RescalePath.DRIVER_RESTART))
        self.client.delete(keys.runner_pending(self.job))


class PendingCrashes:
    """When a rescale left pending for the next driver has failed: once ``limit`` drivers that started
    with it pending crashed, counted per pending command (the driver that was running when it was
    recorded, an out-of-memory one say, does not count: the pending knobs were not its own)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._pending = ""
        self._crashes = 0
        self._started_on = ""

    def driver_started(self, pending_id: str) -> None:
        """A driver starts while ``pending_id`` is pending (``""``: none)."""
        if pending_id != self._pending:
            self._pending, self._crashes = pending_id, 0
        self._started_on = pending_id

    def crashed(self) -> str:
        """The driver started last crashed: the id of the pending rescale that has now failed, else ``""``."""
        if not self._started_on or self._started_on != self._pending:
            return ""
        self._crashes += 1
        return self._pending if self._crashes >= self.limit else ""


def crash_rule(args: argparse.Namespace) -> CrashLoopRule:
    """The crash-loop rule of the ``run`` flags (a flag left out keeps :class:`CrashLoopRule`'s default).

    Raises:
        CrashRuleError: the flags make no rule (:class:`CrashLoopRule`).
    """
    given = {name: getattr(args, flag) for name, flag in (
        ("crashes", "crash_loop_crashes"), ("window_s", "crash_loop_window_s"), ("backoff_s", "crash_backoff_s"),
        ("backoff_cap_s", "crash_backoff_cap_s")) if getattr(args, flag, None) is not None}
    return CrashLoopRule(**given)


def crash_error(code: int, crash: Crash | None, crashes: int, rule: CrashLoopRule, log_path: str) -> str:
    """The supervisor's log line (and the status's ``error``) for a crash."""
    killed = f"{crash.exception}: {crash.message}" if crash else "no exception in its crash record or log"
    return (f"driver exited with code {code} ({crashes} crash{'es' if crashes != 1 else ''} within "
            f"{rule.window_s:.0f} s{', a crash loop' if crashes >= rule.crashes else ''}): {killed}; see {log_path}")


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
    except (PipelineLoadError, KnobError, CrashRuleError, control.ControlAuthError,
            control.ControlUnreachable) as exc:
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
        write_crash(Path(args.workdir), exc)  # a standby's own failure is the handover's, not a crash
        control.write_status(driver.client, args.job, StatusUpdate(state=RunnerState.FAILED,
                                                                   error=f"{type(exc).__name__}: {exc}"[:2000]))
        return 1
