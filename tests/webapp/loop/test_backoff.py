"""Restart back-off strategies (``webapp.loop.backoff``, after Flink's restart strategies)."""

from __future__ import annotations

from webapp.loop.backoff import RestartStrategy, next_retry
from webapp.proposals.attempts import RetryDecision
from webapp.proposals.codes import RetryCode


def test_fixed_delay_retries_then_gives_up():
    strategy = RestartStrategy(kind="fixed-delay", attempts=2, delay_s=3)
    assert next_retry(strategy, [0], 0).delay_s == 3
    assert next_retry(strategy, [0, 1], 1).delay_s == 3
    assert next_retry(strategy, [0, 1, 2], 2) == RetryDecision(None, RetryCode.RETRIES_SPENT,
                                                               {"strategy": "fixed-delay", "attempts": 2})


def test_exponential_delay_grows_and_is_capped():
    strategy = RestartStrategy(kind="exponential-delay", attempts=5, delay_s=1, multiplier=3, max_delay_s=5)
    delays = [next_retry(strategy, [0] * n, 0).delay_s for n in range(1, 7)]
    assert delays == [1, 3, 5, 5, 5, None]


def test_failure_rate_counts_failures_inside_the_interval():
    strategy = RestartStrategy(kind="failure-rate", max_failures_per_interval=2, interval_s=60, delay_s=1)
    assert next_retry(strategy, [0, 10], 20).retry
    assert next_retry(strategy, [0, 10, 20], 21) == RetryDecision(
        None, RetryCode.FAILURE_RATE_EXCEEDED, {"failures": 3, "interval_s": 60, "max_failures": 2})
    assert next_retry(strategy, [0, 10, 100], 101).retry  # the first two fell out of the interval
    assert next_retry(RestartStrategy(kind="none"), [0], 0) == RetryDecision(None, RetryCode.NO_RESTART)
