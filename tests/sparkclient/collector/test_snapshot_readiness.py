"""The snapshot path refuses what the loop refuses: a sample that is not ready (``JobSample.not_ready``,
:mod:`sparkclient.collector.readiness`) makes no scenario, from ``sample_to_scenario`` (a
``SampleNotReadyError`` with the issues) and from ``python -m sparkclient snapshot`` (exit 3, one line);
a snapshot's window starts after its run's first batch after a start."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from scaling.values.readiness import NotReady, SampleIssue
from sparkclient.collector.batchwindow import batch_end_s
from sparkclient.collector.snapshot import (
    SampleNotReadyError,
    load_captures,
    sample_from_captures,
    sample_to_scenario,
    window_after_start,
)
from sparkclient.collector.snapshot_cli import NOT_READY
from tests.capture_paths import FIXTURES, JOIN_CAPTURE, P1_RUN_ID, SPARK_4_3_0
from tests.repo import ROOT
from tests.scaling.factories import NOT_READY_DATA
from tests.sparkclient.collector.test_readiness import NoSql, _join_sample


def test_the_unusable_join_plan_makes_no_scenario_and_the_readable_one_does():
    """The join without its SQL plan: the clicks scan reads as a stage with no records in, which
    planned as ideal parallelism 0 and a scale-down; the snapshot refuses it with the loop's code."""
    with pytest.raises(SampleNotReadyError) as refused:
        sample_to_scenario(_join_sample(NoSql))
    assert [i.code for i in refused.value.issues] == [NotReady.SQL_PLAN_UNUSABLE]
    assert "sql-plan-unusable: the SQL plan is unusable: 2 sources in the progress, 1 source stage(s) found" \
        in str(refused.value)
    assert [v["source"] for v in sample_to_scenario(_join_sample())["vertices"][:2]] == [True, True]


def test_every_not_ready_code_refuses_the_scenario():
    assert set(NOT_READY_DATA) == set(NotReady)  # a new code gets a row
    ready = sample_from_captures(load_captures(SPARK_4_3_0))
    assert ready.ready and sample_to_scenario(ready)["steps"]
    for code, data in NOT_READY_DATA.items():
        issues = (SampleIssue(code, data),)
        with pytest.raises(SampleNotReadyError, match=f"is not ready \\({code}: ") as refused:
            sample_to_scenario(replace(ready, not_ready=issues))
        assert refused.value.issues == issues


def test_a_snapshot_window_starts_after_the_runs_first_batch():
    """p1's batch 0 and r1's batch 10 (the restarted run's catch-up) are left out of the window; kept on
    request, the sample is not ready and refused."""
    p1 = load_captures(SPARK_4_3_0)
    assert (sample_from_captures(p1).first_batch_id, sample_from_captures(p1).ready) == (1, True)
    kept = sample_from_captures(p1, from_start=True)
    assert kept.first_batch_id == 0 and [i.code for i in kept.not_ready] == [NotReady.FIRST_BATCH]
    with pytest.raises(SampleNotReadyError):
        sample_to_scenario(kept)
    r1 = sample_from_captures(load_captures(FIXTURES / "spark-4.3.0-restart"))
    assert (r1.first_batch_id, r1.ready) == (11, True)


def test_a_window_holding_only_the_first_batch_keeps_its_start():
    """Nothing after the first batch: the window is not moved (the sample says why it is not ready)."""
    progresses = [p for p in load_captures(SPARK_4_3_0).progresses if p["runId"] == P1_RUN_ID]
    end_0, end_1 = sorted(batch_end_s(p) for p in progresses if p["batchId"] in (0, 1))
    assert window_after_start(progresses, P1_RUN_ID, end_0 - 1, end_1 - 0.01) == end_0 - 1
    assert window_after_start(progresses, P1_RUN_ID, end_0 - 1, end_1 + 0.01) == pytest.approx(end_0 + 0.001)
    assert window_after_start(progresses, P1_RUN_ID, end_0 + 0.5, end_1 + 0.01) == end_0 + 0.5


def _join_folder(folder: Path, *, sql: bool) -> Path:
    """The join capture saved as a captures folder, with or without its SQL executions."""
    capture = json.loads(JOIN_CAPTURE.read_text())
    files = {"app_jobs.json": "jobs", "app_stages.json": "stages", "app_executors.json": "executors",
             "recentProgress.json": "progresses"} | ({"app_sql_details.json": "sql"} if sql else {})
    folder.mkdir()
    for name, key in files.items():
        (folder / name).write_text(json.dumps(capture[key]))
    return folder


def _snapshot(folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sparkclient", "snapshot", "--captures", str(folder)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)


def test_the_cli_refuses_a_not_ready_sample_with_its_exit_status_and_one_line(tmp_path):
    refused = _snapshot(_join_folder(tmp_path / "no-sql", sql=False))
    assert refused.returncode == NOT_READY == 3 and refused.stdout == ""
    (line,) = refused.stderr.splitlines()
    assert line.startswith("refused: the sample of run ") and "sql-plan-unusable" in line
    made = _snapshot(_join_folder(tmp_path / "with-sql", sql=True))
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["mode"] == "micro-batch"
