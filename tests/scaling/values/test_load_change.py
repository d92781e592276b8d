"""Load changes in a window (``scaling.values.load_change``) at the numbers of their docstrings: a shift of
more than ``CHANGE_THRESHOLD`` (25 %) of the lower level is a change, one of exactly 25 % is not, and the fall
back from 1,300 to 1,000 records/s counts like the rise."""

from __future__ import annotations

import pytest

from scaling.values.load_change import CHANGE_THRESHOLD, change_point, departure


@pytest.mark.parametrize("series, split", [
    ([1000, 1000, 1300, 1300], 2),      # the rise of the docstring: 30 % of 1,000
    ([1300, 1300, 1000, 1000], 2),      # and the fall back: 300 is 30 % of the lower level, 23 % of 1,300
    ([1000, 1000, 1250, 1250], None),   # exactly 25 % of the lower level: no change
    ([1250, 1250, 1000, 1000], None),
    ([1000, 1000, 1251, 1251], 2),      # just above it
    ([1251, 1251, 1000, 1000], 2),
])
def test_a_shift_is_a_change_only_beyond_the_threshold_of_the_lower_level(series, split):
    assert CHANGE_THRESHOLD == 0.25
    assert change_point(series) == split


@pytest.mark.parametrize("series, start", [
    ([1000, 1300, 1300], 1),
    ([1000, 700, 700], 1),              # 300 below 1,000 is 43 % of the lower level, 700
    ([1000, 1250, 1250], None),         # exactly 25 %: not away
    ([1000, 800, 800], None),           # 200 is exactly 25 % of 800
    ([1000, 790, 790], 1),              # 210 is 27 % of 790 (21 % of 1,000): the lower level decides
    ([1000, 1251, 1251], 1),
])
def test_a_departure_from_a_level_uses_the_same_threshold(series, start):
    assert departure(series, 1000.0) == start
