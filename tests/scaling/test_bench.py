"""``python -m scaling bench --quick``: writes the listed JSON rows for both settings, is
deterministic (issue 7 acceptance 3), and ds2 in micro-batch mode meets issue 14's acceptance 2 on
the quick workloads at both settings, or the miss is a strict xfail with its measured number (never
a loosened target). The full bench's numbers are printed by ``python -m scaling bench``; the test
keeps to the quick subset so the suite stays short. No wall-clock assertion (issue 17 finding 8)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scaling.bench.run import QUICK, ROW_KEYS, SETTINGS, Row, acceptance

REPO = Path(__file__).resolve().parents[2]


def run_cli(tmp: Path, seed: int, name: str, *settings: str) -> tuple[list[dict], str]:
    out = tmp / f"{name}.json"
    args = [arg for s in settings for arg in ("--setting", s)]
    done = subprocess.run([sys.executable, "-m", "scaling", "bench", "--quick", "--seed", str(seed), "--json", str(out),
                           "--report", str(tmp / f"{name}.html"), *args], cwd=REPO, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr
    table = "\n".join(line for line in done.stdout.splitlines() if " runs in " not in line and "report:" not in line)
    return json.loads(out.read_text()), table


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bench")
    rows, table = run_cli(tmp, 7, "first")
    return {"rows": rows, "table": table, "tmp": tmp}


def test_json_rows_have_exactly_the_listed_keys_one_per_setting_workload_and_policy(quick):
    rows = quick["rows"]
    assert all(tuple(row) == ("setting", *ROW_KEYS, "step_up_steps") for row in rows)
    triples = [(r["setting"], r["workload"], r["policy"]) for r in rows]
    assert len(triples) == len(set(triples))
    assert {r["setting"] for r in rows} == set(SETTINGS)
    assert {w.name for w in QUICK} == {r["workload"] for r in rows}
    for row in rows:
        if row["workload"].endswith("/micro-batch"):
            assert {"ds2", "batch-ratio", "dhalion", "uniform", "static-peak", "oracle"} <= {
                r["policy"] for r in rows if r["workload"] == row["workload"]}
    assert all(r["core_hours_vs_oracle"] == 1.0 for r in rows if r["policy"] == "oracle")


def test_both_settings_are_printed_with_their_options(quick):
    assert "== setting flink-defaults: utilization target 0.7, band [0.4, 1.0], scale-down interval 3600 s" in quick["table"]
    assert "== setting tuned: utilization target 0.7, band [0.55, 0.85], scale-down interval 900 s" in quick["table"]


def test_same_seed_gives_the_same_table_twice_and_another_seed_does_not(quick):
    """Issue 7, acceptance 3 (in fresh processes, so nothing depends on str hash randomization)."""
    rows, _ = run_cli(quick["tmp"], 7, "second", "tuned")
    assert rows == [r for r in quick["rows"] if r["setting"] == "tuned"]
    other, _ = run_cli(quick["tmp"], 8, "other", "tuned")
    assert other != rows


def rows_at(quick, setting):
    return [Row(**{k: v for k, v in r.items() if k not in ("setting", "step_up_steps")}, extra={})
            for r in quick["rows"] if r["setting"] == setting]


# Measured misses on the quick workloads (seed 7; ds2 with DS2's activation time 2, printed in each
# table's header), reported, not hidden. The full bench prints the same targets over all 32
# micro-batch workloads (see the lead's note for those numbers: there, only flink-defaults' max and
# both settings' rescales miss).
MISSED = {
    ("flink-defaults", "core_hours_median"): "ds2 median 1.132x the oracle over the quick four (step/demo 1.479, "
                                             "random-walk/two-branch 1.327; the full bench's median is 0.993): "
                                             "Flink's 1 h scale-down interval and band [0.4, 1.0] keep capacity "
                                             "the oracle gives back each minute",
    ("flink-defaults", "core_hours_max"): "ds2 1.479x the oracle on step/demo: the step-up takes the oracle's 21 "
                                          "cores, and Flink's 1 h scale-down interval holds them from the first "
                                          "scale-down recommendation after the step down (t = 5,520 s) to "
                                          "t = 9,120 s: 14 cores for 1 h, 14 of the oracle's 31.4 core-hours, so "
                                          "any policy that keeps the interval is >= 1.44x",
    ("flink-defaults", "rescales"): "ds2 2 vs dhalion 2 on step/demo (one up, one down: the fewest a step allows) "
                                    "and 2 vs batch-ratio 0 / dhalion 1 on random-walk/two-branch (the baselines "
                                    "never or once leave their start; fewer than 0 is impossible)",
    ("tuned", "rescales"): "ds2 2 vs batch-ratio 0 on random-walk/two-branch: batch-ratio never leaves its start "
                           "(1.520x the oracle's core-hours where ds2 uses 1.096x), which no policy that "
                           "rescales at all can beat",
}
TARGETS = ("core_hours_median", "core_hours_max", "one_step", "two_steps", "lost", "slo", "rescales")


def case(setting, target):
    reason = MISSED.get((setting, target))
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(setting, target, marks=marks, id=f"{setting}-{target}")


@pytest.mark.parametrize(("setting", "target"), [case(s, t) for s in SETTINGS for t in TARGETS])
def test_ds2_micro_batch_meets_issue_14_acceptance_2(quick, setting, target):
    """One target per test so a miss names itself. Step-ups: the JSON's ``step_up_steps`` (rescales
    after each load increase until the next change; None when it did not converge)."""
    rows = quick["rows"]
    ds2 = [r for r in rows if r["setting"] == setting and r["policy"] == "ds2" and r["workload"].endswith("/micro-batch")]
    by = {(r["workload"], r["policy"]): r for r in rows if r["setting"] == setting}
    ratios = sorted(r["core_hours_vs_oracle"] for r in ds2)
    if target == "core_hours_median":
        import statistics

        assert statistics.median(ratios) <= 1.10
    elif target == "core_hours_max":
        assert max(ratios) <= 1.20
    elif target in ("one_step", "two_steps"):
        steps = [s for r in ds2 for s in r["step_up_steps"]]
        assert steps
        if target == "one_step":
            assert sum(1 for s in steps if s == 1) >= 0.8 * len(steps)
        else:
            assert all(s is not None and s <= 2 for s in steps)
    elif target == "lost":
        assert all(r["records_lost"] == 0 for r in ds2)
    elif target == "slo":
        assert all(r["slo_violation_s"] == 0 for r in ds2)
    else:
        for r in ds2:
            for name in ("batch-ratio", "dhalion", "uniform"):
                other = by[(r["workload"], name)]
                if other["slo_violation_s"] == 0:
                    assert r["rescales"] < other["rescales"], (r["workload"], name)


def test_the_printed_acceptance_lists_each_target_per_setting(quick):
    lines = [line.strip() for line in quick["table"].splitlines() if line.strip().startswith(("met", "MISSED"))]
    assert len(lines) == len(SETTINGS) * len(TARGETS)
    missed = sum(1 for line in lines if line.startswith("MISSED"))
    assert missed == len(MISSED)


def test_acceptance_counts_step_ups_in_one_step():
    """The acceptance helper: 4 of 5 step-ups in one step is 80 % (met); one in 3 steps misses <= 2."""
    def row(workload, steps):
        return Row(workload, "ds2", 1, max(steps), 0, 0, 0, 0, 1, 1.0, 0,
                   extra={"step_ups": steps, "has_changes": True, "converged": True})
    rows = [row(f"step/t{i}/micro-batch", [s]) for i, s in enumerate((1, 1, 1, 1, 3))]
    targets = {t.key: t for t in acceptance(rows)}
    assert targets["one_step"].met and targets["one_step"].measured == "4 of 5 (80%)"
    assert not targets["two_steps"].met
