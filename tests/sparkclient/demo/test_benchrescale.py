"""``python -m sparkclient bench-rescale``: argument checks, the summary table, and one real run."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest

from sparkclient.demo.benchrescale import Run, table
from tests.repo import ROOT


def _measured_run(path, pause, *, ok=True, catch_up=4.0, effect=math.nan, steps=None):
    return Run(path=path, reported_path=path, succeeded=ok, pause_s=pause, downtime_s=pause + 1, added_lag_s=pause * 2,
               catch_up_s=catch_up, exactly_once=ok, same_run_id=False, time_to_effect_s=effect, handover_steps_s=steps)


def test_the_table_gives_median_min_max_per_path_and_flags_a_run_that_lost_exactly_once():
    text = table([_measured_run("in-process", 1.0), _measured_run("in-process", 3.0), _measured_run("in-process", 2.0),
                  _measured_run("repartition", 2.0, ok=False, catch_up=math.nan)])
    lines = text.splitlines()
    in_process = next(line for line in lines if line.startswith("in-process"))
    assert "2.00/1.00/3.00" in in_process and in_process.rstrip().endswith("yes")
    repartition = next(line for line in lines if line.startswith("repartition"))
    assert "n/a" in repartition  # a catch-up never reached is left out, not averaged as NaN
    assert repartition.rstrip().endswith("NO")


def test_the_table_gives_the_time_to_effect_per_path_and_where_a_handovers_time_went():
    text = table([_measured_run("in-process", 1.0, effect=3.5), _measured_run("in-process", 1.2, effect=4.5),
                  _measured_run("handover", 1.5, effect=82.0, steps={"requested": 0.1, "spawned": 0.6, "session": 50.2,
                                                            "first_batch": 82.0})])
    header, *rows = text.splitlines()
    assert "time_to_effect_s med/min/max" in header
    in_process = next(line for line in rows if line.startswith("in-process"))
    assert "4.00/3.50/4.50" in in_process  # beside the pause's 1.10/1.00/1.20
    assert in_process.index("4.00/3.50/4.50") > in_process.index("1.10/1.00/1.20")
    handover = next(line for line in rows if line.startswith("handover "))
    assert "82.00/82.00/82.00" in handover
    assert "handover steps, s after the command: requested 0.1, spawned 0.6, session 50.2, first_batch 82.0" in rows


@pytest.mark.parametrize("argv", [["--paths", "nowhere"], ["--runs", "0"]])
def test_bad_arguments_exit_2_with_the_reason(argv):
    out = subprocess.run([sys.executable, "-m", "sparkclient", "bench-rescale", *argv], capture_output=True,
                         text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 2
    assert "--paths takes in-process, handover, in-place, repartition" in out.stderr


@pytest.mark.spark
@pytest.mark.timeout(900)
def test_an_in_process_rescale_and_a_prepared_handover_are_measured_on_one_pipeline(tmp_path):
    """One pipeline, as ``--paths in-process,handover`` runs the local paths: an in-process rescale,
    then a warm handover onto the standby made ready before the command."""
    out = subprocess.run([sys.executable, "-m", "sparkclient", "bench-rescale", "--runs", "1", "--paths",
                          "in-process,handover", "--json", str(tmp_path / "runs.json")], capture_output=True,
                         text=True, cwd=ROOT, timeout=840, env=dict(os.environ, PYSPARK_PYTHON=sys.executable))
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    in_process, handover = json.loads((tmp_path / "runs.json").read_text())

    assert in_process["reported_path"] == "in-process" and in_process["succeeded"] and in_process["exactly_once"]
    assert in_process["pause_s"] > 0 and in_process["catch_up_s"] >= in_process["pause_s"]
    # from the command to the first batch, which comes before the backlog is back (polled every 0.25 s)
    assert 0 < in_process["time_to_effect_s"] <= in_process["catch_up_s"] + 0.5

    assert handover["reported_path"] == "driver-handover" and handover["succeeded"] and handover["exactly_once"]
    steps = handover["handover_steps_s"]
    # the standby was spawned and ready before the command (prepared while "pending"), and took the
    # checkpoint after it: the command waited for no driver start
    assert steps["spawned"] < steps["ready"] < 0 <= steps["requested"] < steps["taken"] < steps["first_batch"]
    assert 0 < handover["time_to_effect_s"] == pytest.approx(steps["first_batch"], abs=0.5)
    assert handover["standby_rss_mb"] > 100 and handover["standby_ready_s"] > 0
    assert "in-process" in out.stdout and "exactly once" in out.stdout and "time_to_effect_s" in out.stdout
    assert "standby while it waited" in out.stdout
