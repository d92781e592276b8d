"""``python -m scaling perf``: one evaluation of a 1,000-vertex random DAG with 240 samples per
vertex in the window must take under 100 ms (median) on the 2-core reference machine."""

import json
import os
import subprocess
import sys

from scaling.bench.perf import evaluate_cpu_s, evaluate_micro_batch_once, micro_batch_scenario, random_job, timings_ms
from scaling.scenario.format import evaluate_text
from tests.repo import ROOT


def test_random_job_has_the_promised_shape():
    topology, window = random_job(1000, 240)
    assert len(topology.vertices) == 1000
    assert all(len(s.records_in_per_s) == 240 for s in window.samples.values())


def test_timings_are_one_positive_number_per_repeat():
    _, times = timings_ms(vertices=50, samples=10, repeat=3)
    assert len(times) == 3 and all(t > 0 for t in times)


def test_micro_batch_timings_are_one_positive_number_per_repeat():
    _, times = timings_ms(vertices=50, samples=10, repeat=3, evaluate=evaluate_micro_batch_once)
    assert len(times) == 3 and all(t > 0 for t in times)


def test_the_micro_batch_scenario_is_one_the_evaluate_command_reads():
    doc = json.loads(micro_batch_scenario(40))
    assert doc["mode"] == "micro-batch" and len(doc["vertices"]) == 40
    out = evaluate_text(json.dumps(doc))
    assert len(out["steps"][0]["vertices"]) == 40 and out["steps"][0]["executors"]["current"] == 4
    assert all(t >= 0 for t in evaluate_cpu_s(10, 40, repeat=1))


def test_perf_command_prints_the_median():
    result = subprocess.run([sys.executable, "-m", "scaling", "perf", "--repeat", "3"], capture_output=True,
                            text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120,
                            check=False)
    assert result.returncode == 0, result.stderr
    assert "1000 vertices" in result.stdout and "240 samples per vertex: median" in result.stdout
    assert "micro-batch, 1000 stages" in result.stdout and "4000 stages" in result.stdout
