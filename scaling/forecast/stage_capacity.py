"""A stage's capacity in the job's units, so that the stages' and the job's capacities add up.

In a micro-batch the stages of a batch run in turn on the same cores, each on
``min(tasks, cores)`` of them, so a stage's capacity is stated as the source records per second the
job would sustain if that stage were its only cost: ``slots_v × (1 − overhead) / c_v`` with
``c_v = λ_v / TPR_v / Σ_sources λ_s`` the core-seconds the stage spends per source record
(``scaling.forecast.prediction.cost_core_s_per_record`` of that stage alone) and ``slots_v = min(tasks_v, cores)``.
The job's capacity is then ``1 / Σ_v 1 / capacity_v``: the source rate at which the batches fill the
trigger interval (``scaling.planner.sizing.busy_share`` = 1), below every stage's, and set mostly
by the stage with the least (the bottleneck, the largest share of the busy time). With every stage on
all the cores it is ``scaling.forecast.prediction.capacity_per_s``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from scaling.forecast import prediction as forecast


def stage_capacities_per_s(stages: Sequence[tuple[float, float]], *, source_rate_per_s: float,
                           slots: Sequence[float], overhead_fraction: float) -> list[float | None]:
    """Per stage ``(target rate λ_v, true processing rate TPR_v)`` in records/s, running on ``slots``
    cores (``min(tasks, cores)``, one per stage): its capacity in source records/s (see the module
    docstring); None for a stage without a cost (no input, an unknown rate or no source rate)."""
    out: list[float | None] = []
    for (target, tpr), cores in zip(stages, slots, strict=True):
        cost = forecast.cost_core_s_per_record([(target, tpr)], source_rate_per_s)
        out.append(forecast.capacity_per_s(cores, overhead_fraction, cost) if cost else None)
    return out


def combined_capacity_per_s(capacities: Iterable[float | None]) -> float | None:
    """The job's capacity from its stages', ``1 / Σ_v 1 / capacity_v`` (source records/s); stages
    without a capacity cost nothing; None when none has one."""
    inverse = sum(1.0 / c for c in capacities if c is not None and c > 0 and math.isfinite(c))
    return 1.0 / inverse if inverse > 0 else None


def busy_shares(capacities: Sequence[float | None]) -> list[float | None]:
    """Each stage's share of the job's busy time, ``(1 / capacity_v) / Σ 1 / capacity`` (0..1)."""
    job = combined_capacity_per_s(capacities)
    return [job / c if job is not None and c else None for c in capacities]
