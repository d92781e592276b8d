"""Issue 14's acceptance 2 for the benchmark: the targets ds2 must meet in micro-batch mode, each
measured on the bench rows with its number."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING

from scaling.policy import Policy

if TYPE_CHECKING:
    from scaling.bench.run import Row


BASELINES = ("batch-ratio", "dhalion", "uniform")
"""The autoscaling baselines ds2 must rescale less often than (static-peak and the oracle are
references, not policies)."""


@dataclass(frozen=True)
class Target:
    """One acceptance target of issue 14 (acceptance 2), measured on ds2's micro-batch rows."""

    key: str
    label: str
    met: bool
    measured: str


def acceptance(rows: list[Row]) -> list[Target]:
    """Issue 14, acceptance 2, on ds2 in micro-batch mode over ``rows``:
    core-hours median ≤ 1.10× and max ≤ 1.20× the oracle; ≥ 80 % of step-ups converged in one step and
    all in ≤ 2; 0 records lost; 0 s of SLO violation (lag above the catch-up duration); fewer rescales
    than every baseline (``BASELINES``) that has no SLO violation, on every workload."""
    ds2 = [r for r in rows if r.policy == "ds2" and r.workload.endswith("/micro-batch")]
    by_key = {(r.workload, r.policy): r for r in rows}
    ratios = [r.core_hours_vs_oracle for r in ds2]
    median = statistics.median(ratios) if ratios else 0.0
    worst = max(ds2, key=lambda r: r.core_hours_vs_oracle, default=None)
    ups = [s for r in ds2 for s in r.extra["step_ups"]]
    one = sum(1 for s in ups if s == 1)
    over_two = [r.workload for r in ds2 for s in r.extra["step_ups"] if s is None or s > 2]
    lost = [(r.workload, r.records_lost) for r in ds2 if r.records_lost > 0]
    slo = [(r.workload, r.slo_violation_s) for r in ds2 if r.slo_violation_s > 0]
    rescales = []
    for r in ds2:
        for name in BASELINES:
            other = by_key.get((r.workload, name))
            if other is not None and other.slo_violation_s == 0 and not r.rescales < other.rescales:
                rescales.append(f"{r.workload}: ds2 {r.rescales} vs {name} {other.rescales}")
    share = one / len(ups) if ups else 1.0
    return [
        Target("core_hours_median", "core-hours median <= 1.10x the oracle", median <= 1.10, f"median {median:.3f}"),
        Target("core_hours_max", "core-hours max <= 1.20x the oracle", worst is None or worst.core_hours_vs_oracle <= 1.2,
               f"max {worst.core_hours_vs_oracle:.3f} ({worst.workload})" if worst else "no rows"),
        Target("one_step", ">= 80% of step-ups converge in one step", share >= 0.8,
               f"{one} of {len(ups)} ({share:.0%})"),
        Target("two_steps", "every step-up converges in <= 2 steps", not over_two,
               f"{len(over_two)} did not: {', '.join(over_two)}" if over_two else "all"),
        Target("lost", "0 records lost", not lost, ", ".join(f"{w} {v:g}" for w, v in lost) or "0"),
        Target("slo", "0 s of SLO violation", not slo, ", ".join(f"{w} {v:g} s" for w, v in slo) or "0"),
        Target("rescales", "fewer rescales than every baseline with no SLO violation", not rescales,
               "; ".join(rescales) or "all"),
    ]


def acceptance_notes(rows: list[Row], policy: Policy | None = None) -> list[str]:
    """One line per missed target (``acceptance``), with its measured number."""
    return [f"MISSED {t.label}: {t.measured}" for t in acceptance(rows) if not t.met]
