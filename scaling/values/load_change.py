"""Load changes in a metric window: where the arrival rate's current level begins, so that an evaluation
looks at the part of the window after a change (``metrics.MetricWindow``)."""

from __future__ import annotations

from collections.abc import Sequence

CHANGE_THRESHOLD = 0.25
"""A level shift of the arrival rate larger than this share of the lower of the two levels is a load
change (the lower one, so that a rise from 1,000 to 1,300 and the fall back count alike)."""
MIN_LEVEL_SAMPLES = 2
"""A new level counts once it held for this many samples (collects): one sample is not a step."""


def change_point(series: Sequence[float], *, threshold: float = CHANGE_THRESHOLD) -> int | None:
    """The index of the first sample of the current load level in ``series`` (one arrival rate per sample,
    records/s, oldest first), or None: no shift, use the whole window.

    A split ``k`` is a level shift when at least ``MIN_LEVEL_SAMPLES`` samples follow it, ``|mean(after) −
    mean(before)|`` exceeds ``threshold`` × the lower mean, and every sample after it lies beyond the midpoint
    of the two levels (a step, not noise); the largest shift wins. A spike that ended inside the window is a
    shift back down (DS2 §4; docs/ARCHITECTURE.md, "The window after a load change").
    """
    n = len(series)
    best, best_k = 0.0, None
    for k in range(1, n - MIN_LEVEL_SAMPLES + 1):
        before, after = series[:k], series[k:]
        level = sum(before) / len(before)
        shift = sum(after) / len(after) - level
        if abs(shift) <= abs(best) or abs(shift) <= threshold * max(min(level, level + shift), 1e-12):
            continue
        middle = level + shift / 2
        if all((x > middle) if shift > 0 else (x < middle) for x in after):
            best, best_k = shift, k
    return best_k


def departure(series: Sequence[float], level: float, *, threshold: float = CHANGE_THRESHOLD) -> int | None:
    """Where ``series`` leaves ``level`` for a new load level, or None.

    The first index of a run of at least ``MIN_LEVEL_SAMPLES`` samples that all lie on one side of
    ``level``, each farther from it than ``threshold`` × the lower of the two (the shift test of
    :func:`change_point`, sample by sample, so one spike is not a change). Used to end a rescale's own
    window at the next load change (``scaling.forecast.rescale_cost``).

    Args:
        series: one arrival rate per sample, records/s, oldest first.
        level: the rate the series is compared with, records/s (≥ 0).
    """
    def away(x: float) -> int:
        if abs(x - level) <= threshold * max(min(level, x), 1e-12):
            return 0
        return 1 if x > level else -1

    run_start, side = None, 0
    for i, x in enumerate(series):
        here = away(x)
        if here == 0 or here != side:
            run_start, side = (i, here) if here else (None, 0)
        if run_start is not None and i - run_start + 1 >= MIN_LEVEL_SAMPLES:
            return run_start
    return None
