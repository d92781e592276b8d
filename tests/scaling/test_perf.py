"""``python -m scaling perf``: one evaluation of a 1,000-vertex random DAG with 240 samples per
vertex in the window must take under 100 ms (median) on the 2-core reference machine."""

import os
import subprocess
import sys
from pathlib import Path

from scaling.perf import random_job, timings_ms

ROOT = Path(__file__).resolve().parents[2]


def test_random_job_has_the_promised_shape():
    topology, window = random_job(1000, 240)
    assert len(topology.vertices) == 1000
    assert all(len(s.records_in_per_s) == 240 for s in window.samples.values())


def test_timings_are_one_positive_number_per_repeat():
    _, times = timings_ms(vertices=50, samples=10, repeat=3)
    assert len(times) == 3 and all(t > 0 for t in times)


def test_perf_command_prints_the_median():
    result = subprocess.run([sys.executable, "-m", "scaling", "perf", "--repeat", "3"], capture_output=True,
                            text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120,
                            check=False)
    assert result.returncode == 0, result.stderr
    assert "1000 vertices" in result.stdout and "240 samples per vertex: median" in result.stdout
