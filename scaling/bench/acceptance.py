"""The bench's targets for ds2, each measured on the bench rows with its number.

On ds2's micro-batch rows: core-hours median ≤ 1.10× the oracle (the cheapest configuration that
keeps up, ``scaling.bench.run``) and max ≤ 1.20× that oracle holding each scale-down for the
setting's scale-down interval (Flink's delayed scale-down), the plain ratio printed beside it; ≥ 80 %
of step-ups converged in one step and all in ≤ 2; 0 records lost; 0 s of lag above 300 s and above
60 s; in total at most half the rescales of each adaptive baseline. On every workload (both modes):
no baseline without lost records is at least as good as ds2 on SLO violation (both lags),
rescales and core-hours together, and better on one.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING

from scaling.policy.policy import Policy

if TYPE_CHECKING:
    from scaling.bench.run import Row


BASELINES = ("batch-ratio", "dhalion", "uniform")
"""The adaptive baselines ds2 must rescale at most half as often as, in total over the micro-batch
workloads (static-peak and the oracle are references, not policies)."""

DOMINANCE_BASELINES = (*BASELINES, "static-peak")
"""The baselines none of which may dominate ds2 on a workload (the oracle knows the future)."""

MAX_RESCALE_SHARE = 0.5


@dataclass(frozen=True)
class Target:
    """One bench target, measured on ds2's rows: ``key``, its ``label``, whether it is ``met`` and
    the ``measured`` number as text."""

    key: str
    label: str
    met: bool
    measured: str


def _dominates(other: Row, ds2: Row) -> bool:
    """``other`` is at least as good as ``ds2`` on SLO violation (300 s and 60 s), rescales and
    core-hours, and better on one."""
    mine = (ds2.slo_violation_s, ds2.slo_violation_60_s, ds2.rescales, ds2.core_hours)
    theirs = (other.slo_violation_s, other.slo_violation_60_s, other.rescales, other.core_hours)
    return all(t <= m for t, m in zip(theirs, mine)) and any(t < m for t, m in zip(theirs, mine))


def _core_hours(ds2: list[Row]) -> list[Target]:
    ratios = [r.core_hours_vs_oracle for r in ds2]
    median = statistics.median(ratios) if ratios else 0.0
    worst = max(ds2, key=lambda r: r.core_hours_vs_held, default=None)
    return [
        Target("core_hours_median", "core-hours median <= 1.10x the oracle", median <= 1.10, f"median {median:.3f}"),
        Target("core_hours_max", "core-hours max <= 1.20x the oracle holding scale-downs",
               worst is None or worst.core_hours_vs_held <= 1.2,
               f"max {worst.core_hours_vs_held:.3f} ({worst.workload}; plain {worst.core_hours_vs_oracle:.3f})"
               if worst else "no rows"),
    ]


def _rescales(rows: list[Row], ds2: list[Row]) -> Target:
    total = sum(r.rescales for r in ds2)
    workloads = {r.workload for r in ds2}
    theirs = {name: sum(r.rescales for r in rows if r.policy == name and r.workload in workloads)
              for name in BASELINES}
    missed = [name for name, n in theirs.items() if total > MAX_RESCALE_SHARE * n]
    return Target("rescales", "in total at most half the rescales of each adaptive baseline", not missed,
                  f"ds2 {total} vs " + ", ".join(f"{name} {n}" for name, n in theirs.items()))


def _dominance(rows: list[Row]) -> Target:
    by_key = {(r.workload, r.policy): r for r in rows}
    found = []
    for r in rows:
        if r.policy != "ds2":
            continue
        for name in DOMINANCE_BASELINES:
            other = by_key.get((r.workload, name))
            if other is not None and other.records_lost == 0 and _dominates(other, r):
                found.append(f"{r.workload}: {name} (slo {other.slo_violation_s:g}/{other.slo_violation_60_s:g} s, "
                             f"{other.rescales} rescales, {other.core_hours:g} core-h vs ds2 {r.slo_violation_s:g}/"
                             f"{r.slo_violation_60_s:g} s, {r.rescales}, {r.core_hours:g})")
    return Target("dominance", "no baseline without lost records dominates ds2 on any workload", not found,
                  f"{len(found)}: " + "; ".join(found) if found else "none")


def acceptance(rows: list[Row]) -> list[Target]:
    """The bench targets (module docstring) over ``rows``, in a fixed order."""
    ds2 = [r for r in rows if r.policy == "ds2" and r.workload.endswith("/micro-batch")]
    ups = [s for r in ds2 for s in r.extra["step_ups"]]
    one = sum(1 for s in ups if s == 1)
    over_two = [r.workload for r in ds2 for s in r.extra["step_ups"] if s is None or s > 2]
    lost = [(r.workload, r.records_lost) for r in ds2 if r.records_lost > 0]
    slo = [(r.workload, r.slo_violation_s) for r in ds2 if r.slo_violation_s > 0]
    slo_60 = [(r.workload, r.slo_violation_60_s) for r in ds2 if r.slo_violation_60_s > 0]
    share = one / len(ups) if ups else 1.0
    return [
        *_core_hours(ds2),
        Target("one_step", ">= 80% of step-ups converge in one step", share >= 0.8,
               f"{one} of {len(ups)} ({share:.0%})"),
        Target("two_steps", "every step-up converges in <= 2 steps", not over_two,
               f"{len(over_two)} did not: {', '.join(over_two)}" if over_two else "all"),
        Target("lost", "0 records lost", not lost, ", ".join(f"{w} {v:g}" for w, v in lost) or "0"),
        Target("slo", "0 s of lag above 300 s", not slo, ", ".join(f"{w} {v:g} s" for w, v in slo) or "0"),
        Target("slo_60", "0 s of lag above 60 s", not slo_60, ", ".join(f"{w} {v:g} s" for w, v in slo_60) or "0"),
        _rescales(rows, ds2),
        _dominance(rows),
    ]


def acceptance_notes(rows: list[Row], policy: Policy | None = None) -> list[str]:
    """One line per missed target (``acceptance``), with its measured number."""
    return [f"MISSED {t.label}: {t.measured}" for t in acceptance(rows) if not t.met]
