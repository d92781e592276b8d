"""Excluded periods (Flink ``job.autoscaler.excluded.periods``, ``utils.CalendarUtils``): while one is active
the plan is computed but not executable. An expression is one or two sub-expressions joined by ``&&`` (both
must hold; at most one of each kind), each a daily window ``HH:mm[:ss[:SSS]]-HH:mm[:ss[:SSS]]`` (UTC, both
ends inclusive, to the millisecond; its start before its end), a Quartz cron expression of 6 or 7 fields
(``L``, ``W`` and ``#`` refused), or a 5-field Unix cron expression (``croniter``). Times are seconds since
the Unix epoch, UTC. Anything else raises ``PolicyError`` naming ``excluded_periods``. The syntax in full,
after Flink's and Quartz's: docs/ARCHITECTURE.md, "Excluded periods".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone

from croniter import croniter

from scaling.policy.option_types import PolicyError

_TIME = r"(\d{1,2}):(\d{1,2})(?::(\d{1,2})(?::(\d{1,3}))?)?"
_DAILY = re.compile(rf"^\s*{_TIME}\s*-\s*{_TIME}\s*$")
_NAMES = {"MON": 2, "TUE": 3, "WED": 4, "THU": 5, "FRI": 6, "SAT": 7, "SUN": 1,
          "JAN": 1, "FEB": 2, "MAR": 3, "APR": 4, "MAY": 5, "JUN": 6, "JUL": 7, "AUG": 8, "SEP": 9,
          "OCT": 10, "NOV": 11, "DEC": 12}
_QUARTZ_RANGES = ((0, 59), (0, 59), (0, 23), (1, 31), (1, 12), (1, 7), (1970, 2199))


def _error(text: str, why: str) -> PolicyError:
    return PolicyError(f"excluded_periods: {text!r} {why}")


def _quartz_field(part: str, low: int, high: int, text: str) -> frozenset[int] | None:
    """The values a Quartz field allows, or None for ``*`` / ``?`` (any)."""
    if part in ("*", "?"):
        return None
    if any(c in part.upper() for c in "LW#"):
        raise _error(text, "uses a Quartz L, W or # field, which is not supported; use ranges and lists")
    values: set[int] = set()
    for item in part.split(","):
        step = 1
        if "/" in item:
            item, step_text = item.split("/", 1)
            if not step_text.isdigit() or int(step_text) < 1:
                raise _error(text, f"has a bad step in {part!r}")
            step = int(step_text)
        if item in ("*", "?"):
            start, end = low, high
        elif "-" in item:
            a, b = item.split("-", 1)
            start, end = _value(a, text), _value(b, text)
        else:
            start = _value(item, text)
            end = high if step > 1 else start
        if not (low <= start <= high and low <= end <= high) or start > end:
            raise _error(text, f"has {part!r} outside {low}-{high}")
        values.update(range(start, end + 1, step))
    return frozenset(values)


def _value(token: str, text: str) -> int:
    token = token.strip().upper()
    if token in _NAMES:
        return _NAMES[token]
    if not token.isdigit():
        raise _error(text, f"has {token!r}, not a number or a day/month name")
    return int(token)


@dataclass(frozen=True)
class Quartz:
    """A parsed Quartz cron expression: allowed values per field (None: any)."""

    fields: tuple[frozenset[int] | None, ...]

    def matches(self, moment: datetime) -> bool:
        dow = moment.isoweekday() % 7 + 1  # Quartz: 1 = Sunday ... 7 = Saturday
        values = (moment.second, moment.minute, moment.hour, moment.day, moment.month, dow, moment.year)
        return all(allowed is None or value in allowed for allowed, value in zip(self.fields, values))


@dataclass(frozen=True)
class Period:
    """A parsed excluded period: a daily window (milliseconds of the day) and/or cron expressions, all of
    which must contain an instant for the period to contain it (Flink's ``&&``)."""

    text: str
    start_ms: int | None = None
    end_ms: int | None = None
    cron: str | None = None
    quartz: Quartz | None = None

    def contains(self, now_s: float) -> bool:
        """Whether the instant ``now_s`` (Unix seconds, UTC) lies in the period. A daily window holds
        from its start to its end, both inclusive, at millisecond precision (Quartz
        ``DailyCalendar.isTimeIncluded`` with ``invertTimeRange``)."""
        moment = datetime.fromtimestamp(now_s, tz=timezone.utc)
        if self.cron is not None and not croniter.match(self.cron, moment.replace(second=0, microsecond=0)):
            return False
        if self.quartz is not None and not self.quartz.matches(moment):
            return False
        if self.start_ms is not None and self.end_ms is not None:
            of_day = ((moment.hour * 60 + moment.minute) * 60 + moment.second) * 1000 + moment.microsecond // 1000
            return self.start_ms <= of_day <= self.end_ms
        return True


def _daily(text: str, part: str) -> tuple[int, int] | None:
    """A daily window's start and end in milliseconds of the day, or None when ``part`` is not
    one. Raises PolicyError for a bad time of day or a start not before the end (Quartz
    ``DailyCalendar.validate`` / ``setTimeRange``)."""
    match = _DAILY.match(part)
    if not match:
        return None
    h1, m1, s1, ms1, h2, m2, s2, ms2 = (int(g) if g is not None else 0 for g in match.groups())
    if h1 > 23 or h2 > 23 or m1 > 59 or m2 > 59 or s1 > 59 or s2 > 59:
        raise _error(text, "has a bad time of day (hours 0-23, minutes and seconds 0-59)")
    start, end = (((h * 60 + m) * 60 + sec) * 1000 + ms for h, m, sec, ms in ((h1, m1, s1, ms1), (h2, m2, s2, ms2)))
    if start >= end:
        raise _error(text, "is a daily window whose start is not before its end, which Flink's DailyCalendar "
                           "refuses; for a window across midnight give two periods, e.g. "
                           "'22:00-23:59:59:999' and '00:00-06:00'")
    return start, end


def parse_period(text: str) -> Period:
    """Parse an excluded period (see the module docstring). Raises PolicyError naming
    ``excluded_periods``."""
    if not isinstance(text, str) or not text.strip():
        raise PolicyError(f"excluded_periods: must be a non-empty string, got {text!r}")
    parts = [p.strip() for p in text.split("&&")]
    if len(parts) > 2:
        raise _error(text, "has more than two sub-expressions joined by &&")
    daily: tuple[int, int] | None = None
    cron: str | None = None
    quartz: Quartz | None = None
    for part in parts:
        window = _daily(text, part)
        if window is not None:
            if daily is not None:
                raise _error(text, "joins two daily windows with &&; join a daily window and a cron expression")
            daily = window
            continue
        count = len(part.split())
        if cron is not None or quartz is not None:
            raise _error(text, "joins two cron expressions with &&; join a daily window and a cron expression")
        if count in (6, 7):
            # Quartz ``CronExpression.buildExpression`` (Flink ``CalendarUtils.interpretAsCron``): exactly
            # one of day-of-month and day-of-week is ``?``; both given (or neither) is a ParseException.
            if (part.split()[3] == "?") == (part.split()[5] == "?"):
                raise _error(text, "must have '?' in exactly one of day-of-month and day-of-week (Quartz), "
                                   "e.g. '* * 9-17 ? * 2-6'")
            quartz = Quartz(tuple(_quartz_field(f, low, high, text)
                                  for f, (low, high) in zip(part.split(), _QUARTZ_RANGES)))
        elif count == 5 and croniter.is_valid(part):
            cron = part
        else:
            raise _error(text, "is neither HH:mm[:ss]-HH:mm[:ss] nor a cron expression (Quartz 6/7 fields or "
                               "Unix 5 fields)")
    return Period(text, start_ms=daily[0] if daily else None, end_ms=daily[1] if daily else None,
                  cron=cron, quartz=quartz)


def active_period(periods: tuple[str, ...], now_s: float) -> str | None:
    """The first excluded period containing ``now_s``, or None."""
    for text in periods:
        if parse_period(text).contains(now_s):
            return text
    return None
