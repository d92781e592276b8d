"""Excluded periods (Flink ``job.autoscaler.excluded.periods``): while one is active the plan is
computed but not executable.

A period is either a daily window ``HH:MM-HH:MM`` (UTC; it may cross midnight, and the end is
exclusive) or a 5-field cron expression, which excludes every minute it matches (``croniter``).
Times are seconds since the Unix epoch, UTC.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone

from croniter import croniter

from scaling.policy import PolicyError

_DAILY = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*-\s*(\d{1,2}):(\d{2})\s*$")


@dataclass(frozen=True)
class Period:
    """A parsed excluded period: a daily window in minutes of the day, or a cron expression."""

    text: str
    start_minute: int | None = None
    end_minute: int | None = None
    cron: str | None = None

    def contains(self, now_s: float) -> bool:
        """Whether the instant ``now_s`` (Unix seconds, UTC) lies in the period."""
        moment = datetime.fromtimestamp(now_s, tz=timezone.utc)
        if self.cron is not None:
            return bool(croniter.match(self.cron, moment.replace(second=0, microsecond=0)))
        minute = moment.hour * 60 + moment.minute
        assert self.start_minute is not None and self.end_minute is not None
        if self.start_minute <= self.end_minute:
            return self.start_minute <= minute < self.end_minute
        return minute >= self.start_minute or minute < self.end_minute


def parse_period(text: str) -> Period:
    """Parse ``HH:MM-HH:MM`` or a cron expression. Raises PolicyError naming ``excluded_periods``."""
    match = _DAILY.match(text)
    if match:
        h1, m1, h2, m2 = (int(g) for g in match.groups())
        if h1 > 23 or h2 > 24 or m1 > 59 or m2 > 59 or (h2 == 24 and m2):
            raise PolicyError(f"excluded_periods: bad time in {text!r}")
        return Period(text, start_minute=h1 * 60 + m1, end_minute=h2 * 60 + m2)
    if len(text.split()) == 5 and croniter.is_valid(text):
        return Period(text, cron=text)
    raise PolicyError(f"excluded_periods: {text!r} is neither HH:MM-HH:MM nor a 5-field cron expression")


def active_period(periods: tuple[str, ...], now_s: float) -> str | None:
    """The first excluded period containing ``now_s``, or None."""
    for text in periods:
        if parse_period(text).contains(now_s):
            return text
    return None
