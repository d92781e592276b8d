"""``python -m sparkclient snapshot`` on the Spark 4.3.0 captures, piped into ``python -m scaling evaluate``."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from scaling.scenario.format import evaluate_text, parse
from sparkclient.collector.jobruns import newest_run_id, progresses_from_jobs
from sparkclient.collector.snapshot import (
    infer_trigger_interval_s,
    load_captures,
    sample_from_captures,
    sample_to_scenario,
)
from sparkclient.collector.topology import sample_from_rest
from tests.capture_paths import MEMORY_CAPTURE, P1_RUN_ID, SPARK_4_3_0
from tests.repo import ROOT


def test_captures_become_a_valid_micro_batch_scenario() -> None:
    captures = load_captures(SPARK_4_3_0)
    assert "p1_app_jobs.json" in captures.files
    sample = sample_from_captures(captures)
    assert sample.run_id == P1_RUN_ID
    assert sample.trigger_interval_s == pytest.approx(2.0)
    doc = sample_to_scenario(sample)
    scenario = parse(json.dumps(doc))
    assert scenario.mode == "micro-batch"
    v0, v1 = scenario.topology.vertices
    assert (v0.id, v0.parallelism, v0.source, v0.adjustable) == ("v0", 2, True, True)
    assert (v1.id, v1.parallelism, v1.adjustable) == ("v1", 4, False)  # StateStoreSave: pinned
    assert v0.name.startswith("MicroBatchScan → Filter → Project")
    assert "StateStoreSave" in v1.name
    assert [(e.source, e.target) for e in scenario.topology.edges] == [("v0", "v1")]
    assert scenario.cluster.executors == 1 and scenario.cluster.cores_per_executor == 2
    metrics = doc["steps"][0]["metrics"]
    # 14 batches of 4,000 rows (batches 1..14; batch 0 ran one stage, batch 15's job is not in /jobs)
    assert sample.vertices[0].records_in == 56_000
    # their 14 spans are 14 trigger intervals of the rate source's offsets: 2,000 rows/s exactly
    assert sample.vertices[0].span_s == pytest.approx(28.0)
    assert metrics["v0"]["records_in_per_s"] == pytest.approx(2000.0)
    assert 0 < metrics["v1"]["busy_time_ms_per_s"] <= 1000
    result = evaluate_text(json.dumps(doc))
    step = result["steps"][0]
    assert step["decision"] in ("scale", "no-change", "blocked")
    assert set(step["vertices"]) == {"v0", "v1"}
    assert step["executors"]["current"] == 1


def test_source_partitions_and_backlog_from_dict_offsets() -> None:
    captures = load_captures(SPARK_4_3_0)
    sample = sample_from_captures(captures)
    progress = json.loads((SPARK_4_3_0 / "pyds_counter_lastProgress.json").read_text())
    doc = sample_to_scenario(sample, source_progress=progress)
    assert doc["vertices"][0]["partitions"] == 3


def test_unknown_run_and_empty_window_are_refused_with_the_reason() -> None:
    captures = load_captures(SPARK_4_3_0)
    with pytest.raises(ValueError, match="no progress of run"):
        sample_from_captures(captures, run_id="no-such-run")
    only_batch_15 = sample_from_captures(captures, window_s=0.5)  # its job is not in /jobs
    with pytest.raises(ValueError, match="no vertex"):
        sample_to_scenario(only_batch_15)


def test_live_helpers_on_captured_jobs() -> None:
    jobs = json.loads((SPARK_4_3_0 / "p1_app_jobs.json").read_text())
    assert newest_run_id(jobs, "ds2q") == P1_RUN_ID
    assert newest_run_id(jobs, "other") is None
    rebuilt = progresses_from_jobs(jobs, P1_RUN_ID)
    assert [p["batchId"] for p in rebuilt] == list(range(0, 15))
    assert infer_trigger_interval_s(rebuilt) == pytest.approx(2.0, abs=0.2)


def test_cli_pipes_into_scaling_evaluate() -> None:
    """The README's pipe, literally: snapshot --captures DIR | python -m scaling evaluate -."""
    snap = subprocess.run([sys.executable, "-m", "sparkclient", "snapshot", "--captures", str(SPARK_4_3_0)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert snap.returncode == 0, snap.stderr
    assert "collected run" in snap.stderr
    evaluated = subprocess.run([sys.executable, "-m", "scaling", "evaluate", "-"], input=snap.stdout, cwd=ROOT,
                               capture_output=True, text=True, timeout=120, check=False)
    assert evaluated.returncode == 0, evaluated.stderr
    result = json.loads(evaluated.stdout)
    assert result["format"] == 1 and result["steps"][0]["decision"] in ("scale", "no-change", "blocked")


def test_cli_reports_missing_captures(tmp_path: Path) -> None:
    snap = subprocess.run([sys.executable, "-m", "sparkclient", "snapshot", "--captures", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert snap.returncode == 1
    assert "app_jobs.json" in snap.stderr and snap.stdout == ""


def test_a_sample_under_memory_pressure_carries_its_memory_into_the_scenario() -> None:
    """The memory capture (512 MB driver, GC 35 % of task time in its newest batch): the scenario step
    gives the heap and GC share, and its output flags the pressure and grows the heap (× 2 from 512)."""
    capture = json.loads(MEMORY_CAPTURE.read_text())
    sample = sample_from_rest(capture["jobs"], capture["stages"], capture["progresses"], capture["executors"],
                              run_id=capture["run_id"], trigger_interval_s=capture["trigger_interval_s"],
                              window_start_s=capture["now_s"] - 40, window_end_s=capture["now_s"], sql=capture["sql"])
    doc = sample_to_scenario(sample)
    memory = doc["steps"][0]["memory"]
    assert memory["heap_max_mb"] == 512 and 0 < memory["heap_peak_mb"] <= 512 and memory["gc_share"] > 0.3
    out = evaluate_text(json.dumps(doc))["steps"][0]["memory"]
    assert out["pressure"]["code"] == "memory-pressure"
    assert out["recommendation"]["recommended_mb"] == 1024


def test_a_sample_without_memory_signals_gives_no_memory_step() -> None:
    sample = sample_from_captures(load_captures(SPARK_4_3_0))
    assert "memory" not in sample_to_scenario(dataclasses.replace(sample, memory=None))["steps"][0]
