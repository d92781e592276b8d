"""Arrival-rate traces: a step up and down, a diurnal cycle, short spikes and a random walk.

A trace is the total arrival rate (records/s) of a job, one value per simulation step; it is drawn
once per seed, so every policy sees exactly the same load.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

KINDS = ("step", "diurnal", "spikes", "random-walk")
DAY_S = 86400.0


@dataclass(frozen=True)
class Trace:
    """Arrival rates, records/s, one per ``step_s`` seconds, and the times of the load changes the
    convergence metrics measure (step changes only)."""

    kind: str
    step_s: float
    rates_per_s: tuple[float, ...]
    change_points_s: tuple[float, ...] = ()

    @property
    def duration_s(self) -> float:
        return len(self.rates_per_s) * self.step_s

    def rate_at(self, t_s: float) -> float:
        """The arrival rate at ``t_s`` (the step holding it; the last one beyond the end)."""
        return self.rates_per_s[min(len(self.rates_per_s) - 1, max(0, int(t_s // self.step_s)))]

    def mean_rate(self, start_s: float, end_s: float) -> float:
        """Mean arrival rate over [start_s, end_s)."""
        first = max(0, int(start_s // self.step_s))
        last = max(first + 1, min(len(self.rates_per_s), int(math.ceil(end_s / self.step_s))))
        window = self.rates_per_s[first:last] or self.rates_per_s[-1:]
        return sum(window) / len(window)


def step(*, base_per_s: float, factor: float = 3.0, duration_s: float = 4 * 3600.0, up_at_s: float = 3600.0,
         down_at_s: float = 2 * 3600.0, step_s: float = 5.0, noise: float = 0.0, seed: int = 0) -> Trace:
    """``base_per_s``, ``factor × base`` from ``up_at_s``, back to ``base`` from ``down_at_s``."""
    rng = random.Random(seed)
    rates = []
    for i in range(int(duration_s / step_s)):
        t = i * step_s
        level = base_per_s * (factor if up_at_s <= t < down_at_s else 1.0)
        rates.append(_noisy(level, noise, rng))
    return Trace("step", step_s, tuple(rates), (up_at_s, down_at_s))


def diurnal(*, mean_per_s: float, amplitude: float = 0.6, duration_s: float = DAY_S, step_s: float = 5.0,
            noise: float = 0.05, seed: int = 0) -> Trace:
    """A sine over a day, lowest at midnight: ``mean × (1 − amplitude × cos(2πt / day))``, times
    ``1 + N(0, noise)``."""
    rng = random.Random(seed)
    rates = [_noisy(mean_per_s * (1.0 - amplitude * math.cos(2 * math.pi * i * step_s / DAY_S)), noise, rng)
             for i in range(int(duration_s / step_s))]
    return Trace("diurnal", step_s, tuple(rates))


def spikes(*, base_per_s: float, factor: float = 3.0, spike_s: float = 30.0, every_s: float = 600.0,
           duration_s: float = 4 * 3600.0, step_s: float = 5.0, noise: float = 0.02, seed: int = 0) -> Trace:
    """``base_per_s`` with spikes of ``factor × base`` lasting ``spike_s`` (shorter than the policy
    interval), one at a random offset in every ``every_s`` seconds."""
    rng = random.Random(seed)
    n = int(duration_s / step_s)
    levels = [base_per_s] * n
    start = 0.0
    while start + every_s <= duration_s:
        at = start + rng.uniform(0.1, 0.9) * (every_s - spike_s)
        for i in range(int(at / step_s), min(n, int((at + spike_s) / step_s))):
            levels[i] = base_per_s * factor
        start += every_s
    return Trace("spikes", step_s, tuple(_noisy(level, noise, rng) for level in levels))


def random_walk(*, base_per_s: float, volatility_per_sqrt_h: float = 0.35, low: float = 0.4, high: float = 2.5,
                duration_s: float = 6 * 3600.0, step_s: float = 5.0, seed: int = 0) -> Trace:
    """A geometric random walk from ``base_per_s``, ``log L`` moving by ``N(0, volatility × √(dt/1h))``
    per step, reflected within ``[low, high] × base``."""
    rng = random.Random(seed)
    sigma = volatility_per_sqrt_h * math.sqrt(step_s / 3600.0)
    lo, hi = math.log(low), math.log(high)
    x, rates = 0.0, []
    for _ in range(int(duration_s / step_s)):
        rates.append(base_per_s * math.exp(x))
        x += rng.gauss(0.0, sigma)
        if x > hi:
            x = 2 * hi - x
        elif x < lo:
            x = 2 * lo - x
    return Trace("random-walk", step_s, tuple(rates))


def _noisy(level: float, noise: float, rng: random.Random) -> float:
    return level * max(0.0, 1.0 + rng.gauss(0.0, noise)) if noise > 0 else level
