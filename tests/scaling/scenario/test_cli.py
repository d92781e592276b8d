"""``python -m scaling`` as a user runs it: a subprocess, exit codes, one-line errors."""

import copy
import json
import os
import subprocess
import sys

import pytest

from tests.repo import ROOT
from tests.scaling.scenario.test_scenario import SCENARIO_INPUT, SCENARIO_OUTPUT


def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "scaling", *args], input=stdin, capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=60, check=False)


def test_evaluate_scenario_file(tmp_path):
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(SCENARIO_INPUT))
    result = cli("evaluate", str(path))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == SCENARIO_OUTPUT


def test_evaluate_stdin():
    result = cli("evaluate", "-", stdin=json.dumps(SCENARIO_INPUT))
    assert result.returncode == 0 and json.loads(result.stdout) == SCENARIO_OUTPUT


def bad(mutate):
    doc = copy.deepcopy(SCENARIO_INPUT)
    mutate(doc)
    return json.dumps(doc)


@pytest.mark.parametrize(("text", "field"), [
    (bad(lambda d: d["steps"][0]["metrics"]["src"].update(records_in_per_s=-1)),
     "steps[0].metrics.src.records_in_per_s"),
    (bad(lambda d: d["steps"][0]["metrics"]["agg"].update(busy_time_ms_per_s=1500)),
     "steps[0].metrics.agg.busy_time_ms_per_s"),
    (bad(lambda d: d["edges"].append({"from": "nobody", "to": "agg"})), "edges[1].from"),
    (bad(lambda d: d["edges"].append({"from": "agg", "to": "src"})), "edges: cycle"),
    (bad(lambda d: d["policy"].update(vertex_min_parallelism=500)), "policy.vertex_min_parallelism"),
    (bad(lambda d: d["policy"].update(utilization_target=2)), "policy.utilization_target"),
    ('{"format": 1, "steps": [', "json"),
])
def test_invalid_files_exit_2_with_one_line(tmp_path, text, field):
    path = tmp_path / "bad.json"
    path.write_text(text)
    result = cli("evaluate", str(path))
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"error: {field}")


def test_missing_file_exits_2(tmp_path):
    result = cli("evaluate", str(tmp_path / "absent.json"))
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
