"""``python -m scaling bench --quick``: runs in time, writes the listed JSON rows, is deterministic
(acceptance 3), and ``ds2`` in micro-batch mode meets acceptance 2's targets on every quick workload,
or the miss is recorded here with its measured number (never a loosened target)."""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scaling.bench.run import QUICK, ROW_KEYS, bench_policy

REPO = Path(__file__).resolve().parents[2]
QUICK_LIMIT_S = 120.0


def run_cli(tmp: Path, seed: int, name: str) -> tuple[list[dict], str, float]:
    out = tmp / f"{name}.json"
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "scaling", "bench", "--quick", "--seed", str(seed), "--json", str(out),
                           "--report", str(tmp / f"{name}.html")], cwd=REPO, capture_output=True, text=True,
                          timeout=2 * QUICK_LIMIT_S)
    elapsed = time.perf_counter() - started
    assert done.returncode == 0, done.stderr
    table = "\n".join(line for line in done.stdout.splitlines() if " runs in " not in line and "report:" not in line)
    return json.loads(out.read_text()), table, elapsed


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bench")
    rows, table, elapsed = run_cli(tmp, 7, "first")
    return {"rows": rows, "table": table, "elapsed": elapsed, "tmp": tmp}


def test_json_rows_have_exactly_the_listed_keys_one_per_workload_and_policy(quick):
    rows = quick["rows"]
    assert all(tuple(row) == ROW_KEYS for row in rows)
    pairs = [(r["workload"], r["policy"]) for r in rows]
    assert len(pairs) == len(set(pairs))
    assert {w.name for w in QUICK} == {r["workload"] for r in rows}
    for row in rows:
        if row["workload"].endswith("/micro-batch"):
            assert {"ds2", "batch-ratio", "dhalion", "uniform", "static-peak", "oracle"} <= {
                r["policy"] for r in rows if r["workload"] == row["workload"]}
    assert all(r["core_hours_vs_oracle"] == 1.0 for r in rows if r["policy"] == "oracle")


def test_same_seed_gives_the_same_table_twice_and_another_seed_does_not(quick):
    """Issue 7, acceptance 3 (in fresh processes, so nothing depends on str hash randomization)."""
    rows, table, _ = run_cli(quick["tmp"], 7, "second")
    assert rows == quick["rows"]
    assert table == quick["table"]
    other, _, _ = run_cli(quick["tmp"], 8, "other")
    assert other != quick["rows"]


def ds2_rows(quick):
    by = {(r["workload"], r["policy"]): r for r in quick["rows"]}
    return {w.name: (by[(w.name, "ds2")], by[(w.name, "batch-ratio")]) for w in QUICK if w.mode == "micro-batch"}


# Measured misses of the quick bench (seed 7), reported, not hidden; see the bench's notes.
MISSED = {
    ("spikes/nexmark-q8/micro-batch", "core_hours"):
        "ds2 uses 1.220x the oracle's core-hours: a spike in the metric window triggers one scale-up, and "
        "the next spikes restart the delayed scale-down (FLINK-36018) before it is due",
    ("random-walk/two-branch/micro-batch", "core_hours"):
        "ds2 uses 1.226x the oracle's core-hours: it holds capacity inside the utilization band while the "
        "load drifts down, and scales down only after the 15 min delay",
    ("random-walk/two-branch/micro-batch", "rescales"):
        "ds2 rescales 4 times, batch-ratio 0: the random walk keeps SPARK-12133's batch ratio inside "
        "(0.3, 0.9), so batch-ratio never acts (and uses 1.52x the oracle)",
}


def check(workload, target):
    reason = MISSED.get((workload, target))
    return pytest.param(workload, target, marks=pytest.mark.xfail(strict=True, reason=reason)) if reason else \
        pytest.param(workload, target)


MICRO_BATCH = [w.name for w in QUICK if w.mode == "micro-batch"]


@pytest.mark.parametrize(("workload", "target"), [
    check(w, t) for w in MICRO_BATCH for t in ("core_hours", "lost", "slo", "steps", "rescales")])
def test_ds2_micro_batch_meets_acceptance_2(quick, workload, target):
    """Issue 7, acceptance 2, one target per test so a miss names itself."""
    ds2, batch_ratio = ds2_rows(quick)[workload]
    if target == "core_hours":
        assert ds2["core_hours_vs_oracle"] <= 1.2
    elif target == "lost":
        assert ds2["records_lost"] == 0
    elif target == "slo":
        # The JSON total bounds the longest episode: total seconds above the catch-up duration.
        assert ds2["slo_violation_s"] <= bench_policy().catch_up_duration_s
    elif target == "steps":
        if workload.startswith("step/"):
            assert ds2["max_steps_to_converge"] is not None and ds2["max_steps_to_converge"] <= 3
        else:
            assert ds2["max_steps_to_converge"] is None  # no step change in this workload
    else:
        assert ds2["rescales"] < batch_ratio["rescales"]


def test_the_printed_table_says_which_targets_were_missed(quick):
    missed = [line for line in quick["table"].splitlines() if line.strip().startswith("MISSED")]
    assert len(missed) == len(MISSED)
    for (workload, _), _ in MISSED.items():
        assert any(workload in line for line in missed)
