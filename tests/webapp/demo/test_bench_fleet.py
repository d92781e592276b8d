"""``manage.py bench_fleet``: its measurements (``webapp.demo.fleetbench``), and one tiny run of the
whole command (3 jobs for 20 s on PostgreSQL, Redis, the fake fleet, the beat and two workers). The
run's figures depend on the machine's load: it checks that everything was measured, not how fast."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.repo import ROOT
from webapp.demo import fleetbench
from webapp.loop.evaluate import TIMING_PREFIX


@pytest.mark.parametrize(("times", "expected"), [
    ([105, 120, 135, 150, 165, 180, 195], True),       # every 15 s beat
    ([110, 128, 141, 160, 172, 190], True),            # queueing jitter under half an interval
    ([105, 120, 150, 165, 180, 195], False),           # one beat missed: a 30 s gap
    ([130, 145, 160, 175, 190], False),                # late start: 30 s after the period began
    ([105, 120, 135, 150, 165, 175], False),           # stopped 25 s before the end
    ([], False),
])
def test_a_job_is_on_time_when_no_gap_exceeds_one_and_a_half_intervals(times, expected):
    assert fleetbench.on_time(times, start_s=100, end_s=200, interval_s=15) is expected


def test_percentiles_of_the_cpu_times():
    assert fleetbench.percentiles(list(range(1, 101))) == {"p50": 50.5, "p99": 99.01, "n": 100}
    assert fleetbench.percentiles([]) == {"p50": None, "p99": None, "n": 0}
    assert fleetbench.percentiles([3.0]) == {"p50": 3.0, "p99": 3.0, "n": 1}


def test_timing_records_are_read_from_the_worker_logs(tmp_path):
    record = {"job": 4, "at": 150.0, "collected": True, "collect_cpu_ms": 40.0, "evaluate_cpu_ms": 9.0,
              "evaluated": True, "wall_s": 0.3}
    late = dict(record, at=250.0, collect_cpu_ms=90.0)
    missed = dict(record, collected=False, collect_cpu_ms=2.0, evaluate_cpu_ms=None, evaluated=False)
    log = tmp_path / "worker-0.log"
    log.write_text("\n".join([
        f"[2026-11-26 12:00:00,000: INFO/MainProcess] {TIMING_PREFIX}{json.dumps(record)}",
        "[2026-11-26 12:00:00,100: INFO/MainProcess] collected fleet-0004 in 0.30 s (7 batches)",
        f"[2026-11-26 12:00:01,000: INFO/MainProcess] {TIMING_PREFIX}{json.dumps(missed)}",
        f"[2026-11-26 12:00:02,000: INFO/MainProcess] {TIMING_PREFIX}{{not json",
        f"[2026-11-26 12:00:03,000: INFO/MainProcess] {TIMING_PREFIX}{json.dumps(late)}"]))
    records = fleetbench.timing_records([log])
    assert records == [record, missed, late]
    cpu = fleetbench.cpu_ms(records, start_s=100, end_s=200)  # the late one is outside the period
    assert cpu["collection"] == {"p50": 40.0, "p99": 40.0, "n": 1}
    assert cpu["evaluation"] == {"p50": 9.0, "p99": 9.0, "n": 1}


@pytest.mark.timeout(300)  # about 40 s and 15 s of CPU: PostgreSQL, Redis, 2 workers, the beat, 20 s of loop
def test_a_tiny_fleet_runs_through_the_real_loop_and_is_measured(tmp_path):
    env = {**os.environ, "DEBUG": "true", "PYTHONPATH": str(ROOT)}
    env.pop("DATABASE_URL", None)
    out = tmp_path / "fleet.json"
    subprocess.run([sys.executable, "manage.py", "bench_fleet", "--jobs", "3", "--duration-s", "20",
                    "--interval-s", "4", "--window-s", "8", "--stabilization-s", "0", "--requests", "3",
                    "--json", str(out), "--log-dir", str(tmp_path / "run")],
                   cwd=ROOT, env=env, check=True, capture_output=True, timeout=280)
    report = json.loads(out.read_text())
    assert report["jobs"] == 3 and report["workers"] == 2
    assert 0.0 <= report["collected_within_interval"] <= 1.0
    assert 0.0 <= report["evaluated_within_interval"] <= 1.0
    assert report["rows"]["MetricSnapshot"] >= 3 and report["rows"]["Evaluation"] >= 1
    assert report["cpu_ms"]["collection"]["n"] >= 3 and report["cpu_ms"]["collection"]["p50"] > 0
    assert report["rows_per_job_per_day"]["stages_per_snapshot"] == 2.0  # the capture's two stages
    rows = report["rows_per_job_per_day"]
    assert rows["written"] > rows["after_retention"] > 0 and rows["measured_written"] > 0
    overview = report["overview_server_ms"]
    assert overview["rows"] == 3 and overview["n"] == overview["cpu_ms"]["n"] == 3 and overview["queries"] > 0
    # jobs, stages, executors, two SQL executions and the task summaries of the window's stages
    assert report["spark_requests_per_collection"] >= 5
