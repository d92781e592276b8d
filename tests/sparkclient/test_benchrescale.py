"""``python -m sparkclient bench-rescale`` (issue 12): argument checks, the summary table, and one real run."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sparkclient.demo.benchrescale import Run, table

ROOT = Path(__file__).resolve().parents[2]


def _run(path, pause, *, ok=True, catch_up=4.0):
    return Run(path=path, reported_path=path, succeeded=ok, pause_s=pause, downtime_s=pause + 1, added_lag_s=pause * 2,
               catch_up_s=catch_up, exactly_once=ok, same_run_id=False)


def test_the_table_gives_median_min_max_per_path_and_flags_a_run_that_lost_exactly_once():
    text = table([_run("in-process", 1.0), _run("in-process", 3.0), _run("in-process", 2.0),
                  _run("repartition", 2.0, ok=False, catch_up=math.nan)])
    lines = text.splitlines()
    in_process = next(line for line in lines if line.startswith("in-process"))
    assert "2.00/1.00/3.00" in in_process and in_process.rstrip().endswith("yes")
    repartition = next(line for line in lines if line.startswith("repartition"))
    assert "n/a" in repartition  # a catch-up never reached is left out, not averaged as NaN
    assert repartition.rstrip().endswith("NO")


@pytest.mark.parametrize("argv", [["--paths", "nowhere"], ["--runs", "0"]])
def test_bad_arguments_exit_2_with_the_reason(argv):
    out = subprocess.run([sys.executable, "-m", "sparkclient", "bench-rescale", *argv], capture_output=True,
                         text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 2
    assert "--paths takes in-process, handover, in-place, repartition" in out.stderr


@pytest.mark.spark
@pytest.mark.timeout(600)
def test_one_in_process_rescale_is_measured_and_exactly_once(tmp_path):
    out = subprocess.run([sys.executable, "-m", "sparkclient", "bench-rescale", "--runs", "1", "--paths", "in-process",
                          "--json", str(tmp_path / "runs.json")], capture_output=True, text=True, cwd=ROOT,
                         timeout=540, env=dict(os.environ, PYSPARK_PYTHON=sys.executable))
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    [run] = json.loads((tmp_path / "runs.json").read_text())
    assert run["reported_path"] == "in-process" and run["succeeded"] and run["exactly_once"]
    assert run["pause_s"] > 0 and run["catch_up_s"] >= run["pause_s"]
    assert "in-process" in out.stdout and "exactly once" in out.stdout
