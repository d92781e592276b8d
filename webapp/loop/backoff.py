"""Restart back-off strategies for failed executions, after Flink's restart strategies (FLIP-160
adaptive scheduler; ``restart-strategy.type``): fixed delay, exponential delay, failure rate.

Pure functions on values: no Django, no clock of their own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

STRATEGIES = ("none", "fixed-delay", "exponential-delay", "failure-rate")


@dataclass(frozen=True)
class RestartStrategy:
    """One job's strategy. Names follow Flink's ``restart-strategy.<type>.*`` options.

    Attributes:
        kind: one of :data:`STRATEGIES`.
        attempts: fixed-delay ``attempts`` / exponential-delay ``attempts-before-reset-backoff``:
            retries after the first failure.
        delay_s: fixed-delay and failure-rate ``delay``; exponential-delay ``initial-backoff``, seconds.
        max_delay_s: exponential-delay ``max-backoff``, seconds.
        multiplier: exponential-delay ``backoff-multiplier``.
        max_failures_per_interval / interval_s: failure-rate ``max-failures-per-interval`` and
            ``failure-rate-interval`` (seconds).
    """

    kind: str = "exponential-delay"
    attempts: int = 3
    delay_s: float = 10.0
    max_delay_s: float = 120.0
    multiplier: float = 2.0
    max_failures_per_interval: int = 3
    interval_s: float = 300.0

    def __post_init__(self) -> None:
        if self.kind not in STRATEGIES:
            raise ValueError(f"restart_strategy: must be one of {', '.join(STRATEGIES)}, got {self.kind!r}")


@dataclass(frozen=True)
class RetryDecision:
    """Retry after ``delay_s`` seconds, or give up (``delay_s is None``); ``reason`` says why."""

    delay_s: float | None
    reason: str

    @property
    def retry(self) -> bool:
        return self.delay_s is not None


def next_retry(strategy: RestartStrategy, failure_times_s: Sequence[float], now_s: float) -> RetryDecision:
    """Whether and when to retry after the latest failure.

    Args:
        failure_times_s: when each attempt of this execution failed (the latest included), seconds.
        now_s: the clock, seconds.
    """
    failures = len(failure_times_s)
    retries_done = failures - 1
    if strategy.kind == "none":
        return RetryDecision(None, "restart strategy none: no retry")
    if strategy.kind == "fixed-delay":
        if retries_done >= strategy.attempts:
            return RetryDecision(None, f"fixed-delay: {strategy.attempts} retries spent")
        return RetryDecision(strategy.delay_s, f"fixed-delay: retry {retries_done + 1} of {strategy.attempts} "
                                               f"in {strategy.delay_s:g} s")
    if strategy.kind == "exponential-delay":
        if retries_done >= strategy.attempts:
            return RetryDecision(None, f"exponential-delay: {strategy.attempts} retries spent")
        # Flink ExponentialDelayRestartBackoffTimeStrategy: initial × multiplier^(n−1), capped.
        delay = min(strategy.max_delay_s, strategy.delay_s * strategy.multiplier ** retries_done)
        return RetryDecision(delay, f"exponential-delay: retry {retries_done + 1} of {strategy.attempts} "
                                    f"in {delay:g} s")
    # Flink FailureRateRestartBackoffTimeStrategy: give up when the failures within the interval
    # exceed max-failures-per-interval.
    recent = sum(1 for t in failure_times_s if t > now_s - strategy.interval_s)
    if recent > strategy.max_failures_per_interval:
        return RetryDecision(None, f"failure-rate: {recent} failures within {strategy.interval_s:g} s, more than "
                                   f"{strategy.max_failures_per_interval}")
    return RetryDecision(strategy.delay_s, f"failure-rate: {recent} of at most {strategy.max_failures_per_interval} "
                                           f"failures within {strategy.interval_s:g} s; retry in "
                                           f"{strategy.delay_s:g} s")
