"""Migration ``jobs.0012``: stored excluded periods that the Flink (Quartz ``DailyCalendar``) syntax
now refuses are rewritten to what they meant, so no stored policy stops validating and nothing is
lost: a window across midnight becomes two, and a "24:00" end becomes "23:59:59:999"."""

import importlib
from datetime import datetime, timezone

import pytest

from scaling.policy.option_types import PolicyError
from scaling.policy.periods import active_period, parse_period

migration = importlib.import_module("webapp.jobs.migrations.0012_excluded_periods_quartz_daily_windows")


@pytest.mark.parametrize(("old", "new"), [
    ("22:00-06:00", ["22:00-23:59:59:999", "00:00-06:00"]),
    ("22:00-06:00 && * * * ? * 2-6", ["22:00-23:59:59:999 && * * * ? * 2-6", "00:00-06:00 && * * * ? * 2-6"]),
    ("* * * ? * 2-6 && 23:30:10-01:00", ["23:30:10-23:59:59:999 && * * * ? * 2-6", "00:00-01:00 && * * * ? * 2-6"]),
    ("18:00-24:00", ["18:00-23:59:59:999"]),
    ("09:00-17:00", ["09:00-17:00"]),
    ("* 9-17 * * 1-5", ["* 9-17 * * 1-5"]),
    ("* * * * * *", ["* * * * * ?"]),
    ("0 0 9 * * MON", ["0 0 9 ? * MON"]),
    ("* * * ? * ?", ["* * * ? * *"]),
    ("0 0 9 * * MON && 09:00-10:00", ["0 0 9 ? * MON && 09:00-10:00"]),
])
def test_refused_daily_windows_are_rewritten_to_what_they_meant(old, new):
    assert migration._rewrite(old) == new
    with pytest.raises(PolicyError) if old != new[0] else _nothing():
        parse_period(old)
    for text in new:
        parse_period(text)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.mark.parametrize("hour", [21, 22, 23, 0, 5, 6, 7, 12])
def test_the_rewritten_windows_cover_the_same_hours(hour):
    """The old reading of "22:00-06:00" (from 22:00 to 06:00 the next day) at whole hours."""
    now_s = datetime(2026, 3, 4, hour, 30, tzinfo=timezone.utc).timestamp()
    inside = hour >= 22 or hour < 6
    assert (active_period(tuple(migration._rewrite("22:00-06:00")), now_s) is not None) is inside


@pytest.mark.django_db(transaction=True)
def test_the_migration_rewrites_stored_policies():
    """A policy stored before 0012 with the old syntax (written past the model's validation, as the
    old version allowed it) reads, after ``migrate``, as windows the parser accepts."""
    from django.core.management import call_command

    from tests.webapp.factories import make_job
    from webapp.jobs.models import JobPolicy

    job = make_job()
    call_command("migrate", "jobs", "0011", verbosity=0)
    try:
        JobPolicy.objects.filter(job=job).update(excluded_periods=["22:00-06:00", "09:00-10:00"],
                                                 guard_excluded_periods=["18:00-24:00"])
    finally:
        call_command("migrate", verbosity=0)  # every app: going back unapplied later ones of others
    policy = JobPolicy.objects.get(job=job)
    assert policy.excluded_periods == ["22:00-23:59:59:999", "00:00-06:00", "09:00-10:00"]
    assert policy.guard_excluded_periods == ["18:00-23:59:59:999"]
