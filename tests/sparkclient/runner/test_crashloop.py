"""The crash-loop rule (:func:`sparkclient.runner.crashloop.crash_verdict`): N crashes within the window
are a loop however long each driver lived, and the back-off doubles with the window's crashes up to its cap."""

from __future__ import annotations

import pytest

from sparkclient.runner.crashloop import CrashLoopRule, CrashRuleError, crash_verdict

RULE = CrashLoopRule(crashes=3, window_s=300.0, backoff_s=2.0, backoff_cap_s=10.0)
NOW = 10_000.0


@pytest.mark.parametrize(("earlier", "crashes", "looping"), [
    ([NOW - 200.0], 2, False),                 # N-1 crashes
    ([NOW - 200.0, NOW - 100.0], 3, True),     # N crashes
    ([NOW - 300.0, NOW - 100.0], 3, True),     # the oldest just inside the window (exactly M ago)
    ([NOW - 300.5, NOW - 100.0], 2, False),    # the oldest just outside it
])
def test_a_loop_is_n_crashes_within_the_window(earlier, crashes, looping):
    verdict = crash_verdict(earlier, NOW, RULE)
    assert (verdict.crashes, verdict.looping) == (crashes, looping)


def test_drivers_that_each_lived_longer_than_two_minutes_still_make_a_loop():
    # three lives of 130 s each, restarted at once: the length of a life resets nothing
    crashes = [0.0, 130.0, 260.0]
    assert crash_verdict(crashes[:2], crashes[2], RULE).looping


@pytest.mark.parametrize(("earlier", "backoff_s"), [
    ([], 2.0), ([NOW - 10], 4.0), ([NOW - 20, NOW - 10], 8.0),
    ([NOW - 30, NOW - 20, NOW - 10], 10.0),  # capped
    ([NOW - 400, NOW - 350], 2.0),  # crashes out of the window no longer count
])
def test_the_back_off_doubles_with_the_window_s_crashes_up_to_its_cap(earlier, backoff_s):
    assert crash_verdict(earlier, NOW, RULE).backoff_s == backoff_s


@pytest.mark.parametrize("kwargs", [{"crashes": 0}, {"window_s": 0}, {"backoff_s": 5, "backoff_cap_s": 4}])
def test_a_rule_that_makes_no_sense_is_refused(kwargs):
    with pytest.raises(CrashRuleError):
        CrashLoopRule(**kwargs)
