"""``python -m sparkclient bench-rescale``: the cost of each rescale path, measured on the demo pipeline.

    python -m sparkclient bench-rescale [--runs 5] [--rate 300]
        [--paths in-process,handover,in-place,repartition,memory-cluster] [--json FILE]

Starts Redis, the Nexmark generator at a steady ``--rate`` and the demo pipeline under
``python -m sparkclient run`` in local mode, where the local paths run one after the other (the
``in-place`` and ``memory-cluster`` paths each on a fresh pipeline on a local standalone cluster of
its own), then performs each path ``--runs`` times, alternating between two configurations:

- ``in-process``: ``enrich_partitions`` 1 ↔ 2 (a restart inside the driver);
- ``handover``: ``cores`` 1 ↔ 2 in local mode (a warm driver handover), as the product runs it: the
  standby is prepared first (the web app's request while the proposal is pending,
  :mod:`sparkclient.contract.standby`), and the command is sent once it is ready;
- ``in-place``: ``cores`` 1 ↔ 2 on the standalone cluster (executors changed while the query runs);
- ``repartition``: ``state_partitions`` 2 ↔ 3 (offline RocksDB state repartition);
- ``memory-cluster``: ``memory_mb`` 1,024 ↔ 1,536 on the standalone cluster (``spark.executor.memory``:
  a new driver whose executors start with the new heap, handed over to from a prepared standby, as
  for ``handover``).

Per run it records, from the runner's result and the backlog sampled every 0.25 s:

- ``pause_s``: the runner's measure, from the last batch's end before the stop to the first batch's
  start after (0 in place);
- ``standby_rss_mb``, ``standby_cpu_pct`` and ``standby_ready_s`` (handover only): what the prepared
  standby costs while it waits (its process group's resident memory, MB, and CPU, % of one core,
  as it reports them after 10 s of waiting) and how long it took to be ready after the request;
- ``time_to_effect_s``: from the command sent (the bench's approval) to the end of the first batch on
  the new configuration that the runner reports (:func:`scaling.forecast.rescale_cost.measured_time_to_effect_s`,
  the web app's formula), so a handover's standby start and an in-place executor request count;
- ``added_lag_s`` and ``catch_up_s`` by :func:`scaling.forecast.rescale_cost.rescale_cost` (the web app's formula):
  peak lag during the rescale − mean lag in the 10 s before, seconds of input; and seconds from the
  command until the backlog is back to its level before (within one trigger interval's input);
- exactly once: after the run the load pauses, the query drains, and the sink must hold every bid
  exactly once.

It prints, per path, the median, min and max of each figure and whether every run was exactly once,
and for each handover where its time went (seconds after the command of each step the runner stamps,
:class:`sparkclient.runner.handover.HandoverStep`, and of the first batch); ``--json`` also writes
every run. The figures depend on the machine and its load: run it on a quiet one.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import redis

from scaling.forecast.rescale_cost import LagSample, measured_time_to_effect_s, rescale_cost
from sparkclient.contract import keys
from sparkclient.contract.control import read_status, send_command, wait_result
from sparkclient.contract.load import set_rate
from sparkclient.contract.messages import RescaleCommand
from sparkclient.contract.standby import (
    HandoverState,
    StandbyAction,
    StandbyRequest,
    read_standby_status,
    send_standby_request,
)
from sparkclient.demo.cluster import start_cluster, stop_cluster
from sparkclient.demo.generator import read_counts
from sparkclient.demo.redislog import PartitionedLog
from sparkclient.demo.redisproc import start_redis
from sparkclient.demo.sink import sink_total
from sparkclient.runner.handover import read_timings

PATHS = ("in-process", "handover", "in-place", "repartition", "memory-cluster")
TOPIC, JOB = "bench", "bench"
TRIGGER_S = 1  # the pipeline's trigger interval during the bench, seconds
ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Run:
    """One measured rescale."""

    path: str
    reported_path: str
    succeeded: bool
    pause_s: float
    downtime_s: float
    added_lag_s: float
    catch_up_s: float
    exactly_once: bool
    same_run_id: bool
    error: str = ""
    time_to_effect_s: float = math.nan
    handover_steps_s: dict[str, float] | None = None  # step -> seconds after the command (handover only)
    standby_rss_mb: float = math.nan  # the prepared standby while it waits (handover only)
    standby_cpu_pct: float = math.nan
    standby_ready_s: float = math.nan  # from the prepare request to the standby ready


def _wait(predicate, timeout_s: float, what: str, interval_s: float = 0.25) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval_s)
    raise TimeoutError(f"timed out after {timeout_s:.0f} s waiting for {what}")


class Bench:
    """One running demo pipeline under load, and the measurements of rescales of it."""

    def __init__(self, workdir: Path, *, rate: float, master: str, master_ui: str | None) -> None:
        self.workdir, self.rate = workdir, rate
        self.redis = start_redis(workdir=workdir / "redis")
        self.client = redis.Redis.from_url(self.redis.url, decode_responses=True)
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable, NEXMARK_TOPIC=TOPIC,
                   PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
        self.generator = subprocess.Popen(
            [sys.executable, "-m", "sparkclient.demo.generator", "--redis-url", self.redis.url, "--topic", TOPIC,
             "--partitions", "2", "--rate", str(rate)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        cmd = [sys.executable, "-m", "sparkclient", "run", "--pipeline", "sparkclient.demo.examples.nexmark:build",
               "--job", JOB, "--redis-url", self.redis.url, "--workdir", str(workdir / "job"), "--master", master,
               "--ui-port", "4090", "--knob", "enrich_latency_ms=1", "--knob", f"trigger_interval_s={TRIGGER_S}"]
        if master_ui:
            cmd += ["--master-ui", master_ui]
        self.supervisor = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait(lambda: self.client.xlen(f"ss:progress:{JOB}") >= 3, 300, "the pipeline's first batches")
        time.sleep(10)  # past the cold first batches

    def backlog(self) -> float:
        """Records written to the log and not yet read by a completed trigger."""
        latest = sum(PartitionedLog(self.client, TOPIC).latest_offsets().values())
        last = self.client.xrevrange(f"ss:progress:{JOB}", count=1)
        if not last:
            return float(latest)
        sources = json.loads(last[0][1]["json"]).get("sources") or [{}]
        end = sources[0].get("endOffset") or {}
        return float(latest - sum(int(v) for v in end.values())) if isinstance(end, dict) else float(latest)

    def sample(self) -> LagSample:
        """The backlog now, as a :class:`~scaling.forecast.rescale_cost.LagSample` (arrivals at the
        generator's rate)."""
        return LagSample(time.monotonic(), self.backlog(), self.rate)

    def prepare_standby(self, proposal: str, knobs: dict[str, int]) -> float:
        """Ask for a standby with ``knobs`` as the web app does while a proposal is pending; returns
        the seconds until it said ready.

        Raises:
            TimeoutError: not ready within 300 s.
        """
        asked = time.monotonic()
        send_standby_request(self.client, JOB, StandbyRequest(StandbyAction.PREPARE, proposal, knobs, ttl_s=600))
        _wait(lambda: read_standby_status(self.client, JOB).state == HandoverState.READY, 300, "the standby")
        return time.monotonic() - asked

    def rescale(self, path: str, command_id: str, knobs: dict[str, int], *, prepare: bool = False) -> Run:
        """Send one rescale, sample the backlog every 0.25 s around it, and measure it
        (``scaling.forecast.rescale_cost``: steady level over the 10 s before, tolerance one trigger's input).
        ``prepare``: a standby with ``knobs`` is prepared and ready before the 10 s before the command."""
        ready_s = self.prepare_standby(command_id, knobs) if prepare else math.nan
        samples = []
        for _ in range(40):  # 10 s of steady lag
            samples.append(self.sample())
            time.sleep(0.25)
        standby = read_standby_status(self.client, JOB) if prepare else None
        run_id = read_status(self.client, JOB).run_id
        sent, sent_epoch = time.monotonic(), time.time()
        send_command(self.client, JOB, RescaleCommand(id=command_id, knobs=knobs))
        result = None
        while result is None:
            samples.append(self.sample())
            if time.monotonic() - sent > 300:
                raise TimeoutError(f"no result for {command_id}")
            if self.client.exists(f"ss:control:{JOB}:result:{command_id}"):
                result = wait_result(self.client, JOB, command_id, timeout_s=0.25, poll_s=0.05)
            time.sleep(0.25)
        finished, answered_epoch = time.monotonic(), time.time()
        self.client.delete(keys.standby_request(JOB))  # the proposal is done: the web app withdraws its request
        effect_s = measured_time_to_effect_s(approved_at_s=sent_epoch, first_batch_at_s=result.first_batch_at,
                                             answered_at_s=answered_epoch)

        def measure():
            return rescale_cost(samples, started_at_s=sent, finished_at_s=finished, steady_window_s=10.0,
                                tolerance_records=self.rate * TRIGGER_S)

        cost = measure()
        deadline = time.monotonic() + 240
        while cost.catch_up_s is None and time.monotonic() < deadline:
            time.sleep(0.25)
            samples.append(self.sample())
            cost = measure()
        same_run = read_status(self.client, JOB).run_id == run_id
        nan = float("nan")
        return Run(path=path, reported_path=result.path.value, succeeded=result.succeeded,
                   pause_s=nan if result.pause_s is None else result.pause_s,
                   downtime_s=nan if result.downtime_s is None else result.downtime_s,
                   added_lag_s=nan if cost.added_lag_s is None else cost.added_lag_s,
                   catch_up_s=nan if cost.catch_up_s is None else cost.catch_up_s,
                   exactly_once=self.exactly_once(), same_run_id=same_run, error=result.error or "",
                   time_to_effect_s=nan if effect_s is None else effect_s,
                   handover_steps_s=self.handover_steps(sent_epoch, result.first_batch_at)
                   if result.path.value == "driver-handover" else None,
                   standby_rss_mb=nan if standby is None or standby.rss_mb is None else standby.rss_mb,
                   standby_cpu_pct=nan if standby is None or standby.cpu_pct is None else standby.cpu_pct,
                   standby_ready_s=ready_s)

    def handover_steps(self, sent_epoch: float, first_batch_at: float | None) -> dict[str, float]:
        """Seconds after the command of each step of the last handover, and of its first batch."""
        stamps = {**read_timings(self.client, JOB), **({"first_batch": first_batch_at} if first_batch_at else {})}
        return {step: round(at - sent_epoch, 2) for step, at in stamps.items() if at >= sent_epoch - 600}

    def exactly_once(self) -> bool:
        """Pause the load, let the query drain, compare the sink with the bids written; resume."""
        set_rate(self.client, TOPIC, 0)
        time.sleep(1.0)
        bids = read_counts(self.client, TOPIC)["bid"]
        sink = self.workdir / "job" / "sink.sqlite"
        try:
            _wait(lambda: self.backlog() == 0 and sink_total(sink) >= bids, 120, "the sink to drain")
            time.sleep(2)
            ok = sink_total(sink) == bids
        except TimeoutError:
            ok = False
        set_rate(self.client, TOPIC, self.rate)
        time.sleep(5)
        return ok

    def knobs(self) -> dict[str, int]:
        return dict(read_status(self.client, JOB).knobs)

    def stop(self) -> None:
        for proc in (self.generator, self.supervisor):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        self.generator.wait(timeout=30)
        self.supervisor.wait(timeout=180)
        self.redis.stop()


CHANGES = {"in-process": ("enrich_partitions", 1, 2), "handover": ("cores", 1, 2), "in-place": ("cores", 1, 2),
           "repartition": ("state_partitions", 2, 3), "memory-cluster": ("memory_mb", 1024, 1536)}
#: The paths that run on a standalone cluster of their own, and those whose standby is prepared first.
ON_CLUSTER, PREPARED = frozenset({"in-place", "memory-cluster"}), frozenset({"handover", "memory-cluster"})


def bench_paths(paths: list[str], runs: int, workdir: Path, rate: float) -> list[Run]:
    """``runs`` rescales along each of ``paths``: the local-mode ones one after the other on one
    fresh pipeline (each path changes only its own knob), each of :data:`ON_CLUSTER` on a fresh
    pipeline on a standalone cluster of its own (2 cores, and 4 GB so that a standby's executor fits
    beside the running one's)."""
    out = []
    local = [p for p in paths if p not in ON_CLUSTER]
    if local:
        out += _bench_on(local, runs, workdir / "local", rate, master="local", master_ui=None)
    for path in (p for p in paths if p in ON_CLUSTER):
        cluster = start_cluster(workdir / path / "cluster", worker_cores=2, worker_memory="4g")
        try:
            out += _bench_on([path], runs, workdir / path, rate, master=cluster.master_url,
                             master_ui=cluster.master_ui)
        finally:
            stop_cluster(cluster)
    return out


def _bench_on(paths: list[str], runs: int, workdir: Path, rate: float, *, master: str,
              master_ui: str | None) -> list[Run]:
    """``runs`` rescales along each of ``paths`` in turn on one pipeline under ``master``."""
    bench = Bench(workdir, rate=rate, master=master, master_ui=master_ui)
    out = []
    try:
        for path in paths:
            knob, low, high = CHANGES[path]
            for i in range(runs):
                knobs = {**bench.knobs(), knob: high if i % 2 == 0 else low}
                run = bench.rescale(path, f"{path}-{i}", knobs, prepare=path in PREPARED)
                print(json.dumps(asdict(run)), flush=True)
                out.append(run)
    finally:
        bench.stop()
    return out


def table(runs: list[Run]) -> str:
    """The per-path summary table (median, min, max of each figure; exactly once in every run)."""
    lines = [f"{'path':<15} {'n':>2} {'pause_s med/min/max':>22} {'time_to_effect_s med/min/max':>31} "
             f"{'added_lag_s med/min/max':>26} {'catch_up_s med/min/max':>25} {'standby_rss_mb med/min/max':>28} "
             f"{'exactly once':>13}"]
    for path in PATHS:
        mine = [r for r in runs if r.path == path]
        if not mine:
            continue

        def fig(name: str) -> str:
            values = [getattr(r, name) for r in mine if getattr(r, name) == getattr(r, name)]  # NaN left out
            if not values:
                return "n/a"
            return f"{statistics.median(values):.2f}/{min(values):.2f}/{max(values):.2f}"

        ok = all(r.exactly_once and r.succeeded for r in mine)
        lines.append(f"{path:<15} {len(mine):>2} {fig('pause_s'):>22} {fig('time_to_effect_s'):>31} "
                     f"{fig('added_lag_s'):>26} "
                     f"{fig('catch_up_s'):>25} {fig('standby_rss_mb'):>28} {'yes' if ok else 'NO':>13}")
    for r in runs:
        if r.handover_steps_s:
            steps = ", ".join(f"{step} {at:.1f}" for step, at in r.handover_steps_s.items())
            lines.append(f"handover steps, s after the command: {steps}")
        if r.standby_rss_mb == r.standby_rss_mb:
            lines.append(f"standby while it waited: {r.standby_rss_mb:.0f} MB resident, {r.standby_cpu_pct:.1f} % of "
                         f"one core; ready {r.standby_ready_s:.1f} s after the request")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sparkclient bench-rescale", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--rate", type=float, default=300.0, help="generator events/s")
    parser.add_argument("--paths", default=",".join(PATHS))
    parser.add_argument("--json", help="write every run to this file")
    parser.add_argument("--keep",
                        help="work in this directory and keep it (the drivers' logs), instead of a temporary one")


def run(args: argparse.Namespace) -> int:
    paths = [p.strip() for p in args.paths.split(",") if p.strip()]
    if not paths or set(paths) - set(PATHS) or args.runs < 1:
        print(f"error: --paths takes {', '.join(PATHS)}; --runs >= 1", file=sys.stderr)
        return 2
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="bench-rescale-") as tmp:
        if args.keep:
            tmp = args.keep
            Path(tmp).mkdir(parents=True, exist_ok=True)
        runs.extend(bench_paths(paths, args.runs, Path(tmp), args.rate))
    print(f"\nbench-rescale {time.strftime('%Y-%m-%d')} on {os.cpu_count()} cores, rate {args.rate:g} events/s, "
          f"{args.runs} runs per path, load average (1 min) {os.getloadavg()[0]:.2f} at the end")
    print(table(runs))
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in runs], indent=2))
    return 0 if all(r.succeeded and r.exactly_once for r in runs) else 1
