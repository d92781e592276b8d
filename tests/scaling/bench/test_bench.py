"""``python -m scaling bench``: the quick run writes the listed JSON rows for both settings and is
deterministic; the oracle is never beaten by a policy that keeps the lag under 60 s; and ds2 meets the
bench targets (``scaling.bench.acceptance``) on the FULL bench at both settings, or each miss is a
strict xfail with its measured number (never a loosened target). The whole module is ``slow``
(tests/conftest.py). No wall-clock assertion."""

import json
import sys
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

import pytest

from scaling.bench.acceptance import acceptance
from scaling.bench.convergence import convergence_rows, format_convergence
from scaling.bench.memory import MEMORY_WORKLOADS, memory_target, run_memory_bench
from scaling.bench.run import QUICK, ROW_KEYS, SETTINGS, Row, full_workloads, run_bench
from scaling.sim.baselines import held_core_s
from scaling.sim.engine import Config
from tests.repo import ROOT
from tests.waiting import run_while_progressing

TARGETS = ("core_hours_median", "core_hours_max", "one_step", "two_steps", "lost", "slo", "slo_60", "rescales",
           "dominance")


def run_cli(tmp: Path, seed: int, name: str, *settings: str) -> tuple[list[dict], str]:
    out = tmp / f"{name}.json"
    args = [arg for s in settings for arg in ("--setting", s)]
    # Bounded by progress (a line per workload on stderr), not by a budget a busy host misses.
    done = run_while_progressing([sys.executable, "-m", "scaling", "bench", "--quick", "--seed", str(seed), "--json",
                                  str(out), "--report", str(tmp / f"{name}.html"), *args], cwd=ROOT, stall_s=600,
                                 what=f"the quick bench ({name})")
    assert done.returncode == 0, done.stderr
    table = "\n".join(line for line in done.stdout.splitlines() if " runs in " not in line and "report:" not in line)
    return json.loads(out.read_text()), table


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """The quick bench at both settings, and the two runs the determinism test compares with it (seed 7
    again and seed 8, tuned only): three processes that share nothing, at once, so that the 2 cores
    stay busy while the longer first run goes on."""
    tmp = tmp_path_factory.mktemp("bench")
    with ThreadPoolExecutor(max_workers=3) as pool:
        (rows, table), second, other = pool.map(lambda run: run_cli(tmp, *run), [(7, "first"), (7, "second", "tuned"),
                                                                                 (8, "other", "tuned")])
    return {"rows": rows, "table": table, "tmp": tmp, "second": second[0], "other": other[0]}


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


def test_both_settings_and_both_slo_lags_are_printed(quick):
    table = quick["table"]
    assert "== setting flink-defaults: utilization target 0.7, band [0.4, 1.0], scale-down interval 3600 s" in table
    assert "== setting tuned: utilization target 0.7, band [0.55, 0.85], scale-down interval 900 s" in table
    header = next(line for line in quick["table"].splitlines() if line.startswith("workload"))
    assert {"slo300_s", "slo60_s", "vs_oracle", "vs_held"} <= set(header.split())


def test_same_seed_gives_the_same_table_twice_and_another_seed_does_not(quick):
    """Reproducible (in fresh processes, so nothing depends on str hash randomization); the
    runs are the ``quick`` fixture's."""
    rows, other = quick["second"], quick["other"]
    assert rows == [r for r in quick["rows"] if r["setting"] == "tuned"]
    assert other != rows


def test_no_policy_that_keeps_the_lag_under_60_s_is_cheaper_than_the_oracle(quick):
    """The oracle is the cheapest configuration that keeps the lag under the SLO: no policy whose lag
    stays under 60 s without losing records uses fewer core-hours. The oracle itself loses nothing
    and never lags 300 s (it plans on each minute's mean rate, so a 30 s spike can still push its lag
    past 60 s for a collect or two); holding each scale-down costs it more, never less."""
    for r in quick["rows"]:
        if r["policy"] == "oracle":
            assert r["slo_violation_s"] == 0 and r["records_lost"] == 0, r["workload"]
            assert r["core_hours_vs_held"] <= 1.0, r["workload"]
        elif r["slo_violation_60_s"] == 0 and r["records_lost"] == 0:
            assert r["core_hours_vs_oracle"] >= 1.0, (r["setting"], r["workload"], r["policy"])


def test_the_printed_targets_list_each_target_per_setting(quick):
    """Each setting's targets, and the memory workloads' target after their table."""
    lines = [line.strip() for line in quick["table"].splitlines() if line.strip().startswith(("met", "MISSED"))]
    assert len(lines) == len(SETTINGS) * (len(TARGETS) + 1)
    assert sum("memory GB-hours <= 1.20x the oracle at 0 records lost" in line for line in lines) == len(SETTINGS)


def test_the_memory_table_has_a_row_per_memory_workload_and_policy_with_ds2s_memory_options(quick):
    table = quick["table"]
    assert table.count("ds2 only: memory_apply on") == len(SETTINGS)
    for workload in MEMORY_WORKLOADS:
        rows = [line.split() for line in table.splitlines() if line.startswith(workload.name + " ")]
        assert sorted(row[1] for row in rows) == sorted(2 * ["ds2", "batch-ratio", "dhalion", "uniform",
                                                             "static-peak", "oracle"])


# --- the memory workloads' target -----------------------------------------------------------

@pytest.fixture(scope="module")
def memory():
    """The memory workloads at both settings (about 1.5 s each)."""
    return {setting: run_memory_bench(seed=7, setting=setting) for setting in SETTINGS}


# Measured (seed 7), with production's rule: without pressure the heap changes only with a rescale
# that happens anyway. On the steady demo at 8 GB nothing rescales, so ds2 keeps 8 GB (12.8x; 1.0x the
# oracle that keeps the rule, the whole miss is the rule); on sessions the pressure doubles 1 GB to
# 2 GB (memory_pressure_growth 2.0) for a need of 1,152 MB (1.679x the rule's oracle). On the step
# the scale-up to 21 cores of a job falling behind carries no smaller heap (no right-sizing while it
# is not keeping up): 2 GB each on 21 executors until the scale-down.
MEMORY_MISSED = {
    "flink-defaults": "memory GB-hours max 12.8x the oracle (steady/demo-8g: no rescale, so no restart for the "
                      "heap alone) vs <= 1.20x; sessions steady 1.719x, step 1.923x; 0 lost",
    "tuned": "memory GB-hours max 12.8x the oracle (steady/demo-8g: no rescale, so no restart for the heap "
             "alone) vs <= 1.20x; sessions steady 1.719x, step 1.830x; 0 lost",
}


@pytest.mark.parametrize("setting", [
    pytest.param(s, marks=[pytest.mark.xfail(strict=True, reason=MEMORY_MISSED[s])] if s in MEMORY_MISSED else [],
                 id=s) for s in SETTINGS])
def test_ds2_memory_gb_hours_within_1_2x_the_oracle_at_0_records_lost(memory, setting):
    target = memory_target(memory[setting])
    assert target.met, target.measured


def test_on_a_steady_load_every_policy_keeps_the_8_gb_heap_and_pays_over_ten_times_the_oracle(memory):
    """No policy restarts the steady demo for its heap alone: the others keep the heap they started
    with (only a failure changes it), ds2 waits for a rescale that does not come (recommend-only)."""
    for setting, rows in memory.items():
        demo = {r.policy: r for r in rows if r.workload.startswith("steady/demo-8g")}
        assert all(demo[p].memory_vs_oracle > 10 for p in ("ds2", "batch-ratio", "dhalion", "static-peak")), setting
        assert demo["ds2"].rescales == 0 and demo["ds2"].records_lost == 0, setting


def test_on_the_steady_demo_the_whole_miss_is_the_rule_and_the_rule_oracle_is_never_below_the_oracle(memory):
    """With no restart to ride along, the oracle that keeps production's rule keeps the 8 GB too:
    every policy that restarts nothing is at 1.0x of it. The rule oracle is the oracle with fewer
    chances to change the heap, so no run is further from it than from the oracle."""
    for setting, rows in memory.items():
        demo = {r.policy: r for r in rows if r.workload.startswith("steady/demo-8g")}
        assert all(demo[p].memory_vs_rule == 1.0 for p in ("ds2", "batch-ratio", "dhalion")), setting
        assert demo["static-peak"].memory_vs_rule > 10, setting  # it restarted for cores and kept 8 GB
        assert all(r.memory_vs_rule <= r.memory_vs_oracle for r in rows), setting


# --- the full bench's targets ------------------------------------------------------------------

def _workload_rows(task: tuple[str, int]) -> list[Row]:
    setting, index = task
    return run_bench(quick=False, seed=7, setting=setting, workloads_=[full_workloads()[index]]).rows


@pytest.fixture(scope="module")
def full():
    """The full bench at both settings: one task per setting and workload in one pool of 2
    processes, the longest first (the workloads share nothing; the rows are those of ``run_bench``
    per setting, in its order). One process per setting left a core idle once one setting was done."""
    workloads = full_workloads()
    tasks = [(setting, index) for setting in SETTINGS for index in range(len(workloads))]
    longest_first = sorted(tasks, key=lambda task: -workloads[task[1]].hours)  # no long one left for last
    with ProcessPoolExecutor(max_workers=2) as pool:
        done = dict(zip(longest_first, pool.map(_workload_rows, longest_first)))
    return {setting: [row for task in tasks if task[0] == setting for row in done[task]] for setting in SETTINGS}


# Measured misses on the full bench (seed 7, 40 workloads per setting), from `python -m scaling bench --seed 7`;
# reported, not hidden. The oracle is the cheapest configuration keeping the lag under the SLO, so a
# policy that keeps the utilization target's headroom pays about 1 / 0.7 = 1.43x; the missed-skew
# workloads (a hot key the collector does not see) are where ds2 goes wrong.
MISSED = {
    ("flink-defaults", "core_hours_median"): "core-hours median 1.638x vs <= 1.10x the oracle",
    ("flink-defaults", "core_hours_max"): "core-hours max 5.751x the held oracle (plain 8.098x) on "
                                          "random-walk/missed-skew vs <= 1.20x",
    ("flink-defaults", "two_steps"): "step-ups converging in <= 2 steps: step/missed-skew never converges vs all",
    ("flink-defaults", "slo"): "lag above 300 s 3030 s (step/missed-skew) and 14070 s (diurnal/missed-skew) vs 0 s",
    ("flink-defaults", "slo_60"): "lag above 60 s on 16 of 20 workloads (each step-up 120-480 s; missed-skew up to "
                                  "20880 s) vs 0 s",
    ("flink-defaults", "dominance"): "16 baseline rows dominate ds2 (dhalion on 7 step and random-walk workloads, "
                                     "the baselines on missed-skew) vs none",
    ("tuned", "core_hours_median"): "core-hours median 1.631x vs <= 1.10x the oracle",
    ("tuned", "core_hours_max"): "core-hours max 5.538x the held oracle (plain 6.538x) on random-walk/missed-skew "
                                 "vs <= 1.20x",
    ("tuned", "two_steps"): "step-ups converging in <= 2 steps: step/missed-skew never converges vs all",
    ("tuned", "slo"): "lag above 300 s 3030 s (step/missed-skew), 30510 s (diurnal/missed-skew), 2100 s "
                      "(random-walk/missed-skew) vs 0 s",
    ("tuned", "slo_60"): "lag above 60 s on 13 of 20 workloads (each step-up 120-330 s; missed-skew up to 38520 s) "
                         "vs 0 s",
    ("tuned", "dominance"): "15 baseline rows dominate ds2 (dhalion on 6 workloads, batch-ratio on "
                            "random-walk/nexmark-q8, the baselines on missed-skew) vs none",
}


def case(setting, target):
    reason = MISSED.get((setting, target))
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(setting, target, marks=marks, id=f"{setting}-{target}")


@pytest.mark.timeout(2400)
@pytest.mark.parametrize(("setting", "target"), [case(s, t) for s in SETTINGS for t in TARGETS])
def test_ds2_meets_the_bench_targets_on_the_full_bench(full, setting, target):
    """One target per test so a miss names itself, with its number."""
    found = {t.key: t for t in acceptance(full[setting])}
    assert tuple(found) == TARGETS
    assert found[target].met, found[target].measured


# --- the acceptance helpers --------------------------------------------------------------------

def row(workload, policy, *, rescales=1, slo=0.0, slo_60=0.0, core_hours=1.0, lost=0, vs_oracle=1.0, vs_held=1.0,
        steps=(1,)):
    return Row(workload, policy, rescales, max(steps), 0, 0, slo, slo_60, lost, core_hours, vs_oracle, vs_held, 0,
               extra={"step_ups": list(steps), "has_changes": True, "converged": True})


def test_acceptance_counts_step_ups_in_one_step():
    """4 of 5 step-ups in one step is 80 % (met); one in 3 steps misses <= 2."""
    rows = [row(f"step/t{i}/micro-batch", "ds2", steps=(s,)) for i, s in enumerate((1, 1, 1, 1, 3))]
    targets = {t.key: t for t in acceptance(rows)}
    assert targets["one_step"].met and targets["one_step"].measured == "4 of 5 (80%)"
    assert not targets["two_steps"].met


def test_acceptance_median_against_the_oracle_and_max_against_the_held_oracle():
    rows = [row("a/micro-batch", "ds2", vs_oracle=1.05, vs_held=1.0), row("b/micro-batch", "ds2", vs_oracle=1.3,
                                                                          vs_held=1.19),
            row("c/micro-batch", "ds2", vs_oracle=1.08, vs_held=1.08)]
    targets = {t.key: t for t in acceptance(rows)}
    assert targets["core_hours_median"].met and targets["core_hours_median"].measured == "median 1.080"
    assert targets["core_hours_max"].met and "plain 1.300" in targets["core_hours_max"].measured
    rows.append(row("d/micro-batch", "ds2", vs_oracle=1.21, vs_held=1.21))
    assert not {t.key: t for t in acceptance(rows)}["core_hours_max"].met


def test_acceptance_rescales_in_total_at_most_half_of_each_adaptive_baseline():
    rows = [row("a/micro-batch", "ds2", rescales=3), row("b/micro-batch", "ds2", rescales=2)]
    rows += [row(w, name, rescales=5) for w in ("a/micro-batch", "b/micro-batch")
             for name in ("batch-ratio", "dhalion", "uniform")]
    assert {t.key: t for t in acceptance(rows)}["rescales"].met  # 5 <= 10 / 2
    rows[2] = row("a/micro-batch", "batch-ratio", rescales=4)
    assert not {t.key: t for t in acceptance(rows)}["rescales"].met  # 5 > 9 / 2


def test_acceptance_no_baseline_without_lost_records_dominates_ds2():
    ds2 = row("a/micro-batch", "ds2", rescales=4, core_hours=25.0)
    as_good = row("a/micro-batch", "dhalion", rescales=4, core_hours=25.0)
    cheaper = row("a/micro-batch", "uniform", rescales=4, core_hours=23.0)
    losing = row("a/micro-batch", "batch-ratio", rescales=0, core_hours=20.0, lost=10)
    slower = row("a/micro-batch", "static-peak", rescales=0, core_hours=20.0, slo_60=30.0)
    target = {t.key: t for t in acceptance([ds2, as_good, losing, slower])}["dominance"]
    assert target.met, target.measured
    target = {t.key: t for t in acceptance([ds2, cheaper])}["dominance"]
    assert not target.met and "uniform" in target.measured


def test_held_core_seconds_take_the_most_resources_of_the_scale_down_interval():
    """Flink's delayed scale-down: each interval holds the highest recommendation of the last
    ``hold_s``; scale-ups act at once."""
    configs = [Config({}, c) for c in (2, 8, 2, 2, 2, 4)]
    assert held_core_s(configs, 60.0, 0.0) == 20 * 60.0
    assert held_core_s(configs, 60.0, 120.0) == (2 + 8 + 8 + 8 + 2 + 4) * 60.0


def test_convergence_from_an_eighth_is_no_worse_measured_as_production_than_with_the_old_cap():
    """The convergence mode's tables: measured as production does, more workloads converge from
    1/8 of the needed parallelism than with each sample's busy time capped at 1000 ms/s."""
    fixed, capped = (convergence_rows(seed=7, busy_cap=cap) for cap in (False, True))
    assert [r.workload for r in fixed] == [r.workload for r in capped]
    converged = [sum(1 for r in rows if r.steps is not None) for rows in (fixed, capped)]
    assert converged[0] > converged[1]
    assert all(r.start < r.needed / 2 for r in fixed)  # an eighth per vertex, at least 1 task each
    assert format_convergence(fixed).splitlines()[-1].startswith(f"converged {converged[0]} of {len(fixed)}")
