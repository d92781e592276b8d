"""Restart back-off strategies for failed executions, after Flink's restart strategies (FLIP-160
adaptive scheduler; ``restart-strategy.type``): fixed delay, exponential delay, failure rate.

Pure functions on values: no database, no clock of their own; the decision is a code with data
(``webapp.proposals.codes.RetryCode``), put into words by ``webapp.proposals.reason_text``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from webapp.proposals.attempts import RetryDecision
from webapp.proposals.codes import RetryCode

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


def next_retry(strategy: RestartStrategy, failure_times_s: Sequence[float], now_s: float) -> RetryDecision:
    """Whether and when to retry after the latest failure.

    Args:
        failure_times_s: when each attempt of this execution failed (the latest included), seconds.
        now_s: the clock, seconds.
    """
    failures = len(failure_times_s)
    retries_done = failures - 1
    if strategy.kind == "none":
        return RetryDecision(None, RetryCode.NO_RESTART)
    if strategy.kind in ("fixed-delay", "exponential-delay"):
        if retries_done >= strategy.attempts:
            return RetryDecision(None, RetryCode.RETRIES_SPENT, {"strategy": strategy.kind,
                                                                  "attempts": strategy.attempts})
        # Flink ExponentialDelayRestartBackoffTimeStrategy: initial × multiplier^(n−1), capped.
        delay = strategy.delay_s if strategy.kind == "fixed-delay" else min(
            strategy.max_delay_s, strategy.delay_s * strategy.multiplier ** retries_done)
        return RetryDecision(delay, RetryCode.RETRY, {"strategy": strategy.kind, "retry": retries_done + 1,
                                                      "attempts": strategy.attempts, "delay_s": delay})
    # Flink FailureRateRestartBackoffTimeStrategy: give up when the failures within the interval
    # exceed max-failures-per-interval.
    recent = sum(1 for t in failure_times_s if t > now_s - strategy.interval_s)
    data = {"failures": recent, "interval_s": strategy.interval_s, "max_failures": strategy.max_failures_per_interval}
    if recent > strategy.max_failures_per_interval:
        return RetryDecision(None, RetryCode.FAILURE_RATE_EXCEEDED, data)
    return RetryDecision(strategy.delay_s, RetryCode.FAILURE_RATE_RETRY, {**data, "delay_s": strategy.delay_s})
