"""When the supervisor restarts a crashed driver, and when it calls the crashes a loop.

A **crash loop** is :attr:`CrashLoopRule.crashes` crashes within the last :attr:`CrashLoopRule.window_s`
seconds, however long each driver lived: a driver that runs five minutes and dies, again and again, is
as broken as one that dies at start. The back-off before the next restart doubles with every crash in
the window, from :attr:`CrashLoopRule.backoff_s` up to :attr:`CrashLoopRule.backoff_cap_s`; a crash
older than the window no longer counts, so a job that crashes once a day restarts at once. The cap is
short because a Spark query restarts in seconds and every second down is a second more of catch-up batch
(its source's backlog) for the next driver to read, which an out-of-memory loop makes worse.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["CrashLoopRule", "CrashRuleError", "CrashVerdict", "crash_verdict"]


class CrashRuleError(ValueError):
    """A crash-loop rule that makes no sense (what was given is in the message)."""


@dataclass(frozen=True)
class CrashLoopRule:
    """The supervisor's crash-loop rule (``run --crash-loop-crashes/--crash-loop-window-s/--crash-backoff-s/
    --crash-backoff-cap-s``).

    Raises:
        CrashRuleError: ``crashes`` below 1, or a duration not above 0, or a cap below the first back-off.
    """

    crashes: int = 3
    window_s: float = 1800.0
    backoff_s: float = 2.0
    backoff_cap_s: float = 30.0

    def __post_init__(self) -> None:
        if self.crashes < 1 or min(self.window_s, self.backoff_s) <= 0 or self.backoff_cap_s < self.backoff_s:
            raise CrashRuleError(f"a crash-loop rule takes crashes >= 1, window and back-off > 0 s and a cap at "
                             f"least the back-off, got {self}")


@dataclass(frozen=True)
class CrashVerdict:
    """After a crash: how many crashes the window holds (this one included), whether that is a loop,
    and the seconds to wait before the next driver starts."""

    crashes: int
    looping: bool
    backoff_s: float


def crash_verdict(crash_times: Sequence[float], now: float, rule: CrashLoopRule) -> CrashVerdict:
    """The verdict of the crash at ``now`` given the earlier crashes at ``crash_times`` (monotonic
    seconds, any order; ``now`` itself need not be among them). A crash exactly ``window_s`` ago
    still counts."""
    crashes = 1 + sum(1 for t in crash_times if now - rule.window_s <= t < now)
    return CrashVerdict(crashes=crashes, looping=crashes >= rule.crashes,
                        backoff_s=min(rule.backoff_cap_s, rule.backoff_s * 2.0 ** (crashes - 1)))
