"""scaling.rescale_cost: the added lag and catch-up time of a rescale (issue 12)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scaling.rescale_cost import (EffectSource, LagSample, catch_up_after_first_batch_s, lag_s, rescale_cost,
                                  time_to_effect)


def _series(backlogs, *, rate=500.0, step_s=5.0, t0=0.0):
    return [LagSample(t0 + i * step_s, b, rate) for i, b in enumerate(backlogs)]


def test_a_rescale_that_adds_backlog_then_drains_it():
    # steady 1,000 records (2 s of input at 500/s); the pause piles up 4,000; drained by t=40
    samples = _series([1000, 1000, 1000, 3000, 5000, 3500, 2000, 1200, 900, 1000])
    cost = rescale_cost(samples, started_at_s=10.0, finished_at_s=20.0, steady_window_s=15.0, tolerance_records=0.0)
    assert cost.steady_backlog == 1000
    assert cost.peak_backlog == 5000
    assert cost.added_lag_s == pytest.approx(5000 / 500 - 1000 / 500)
    assert cost.catch_up_s == pytest.approx(40.0 - 10.0)


def test_catch_up_is_unknown_until_the_backlog_is_back():
    samples = _series([1000, 1000, 1000, 3000, 5000, 4000])
    cost = rescale_cost(samples, started_at_s=10.0, finished_at_s=20.0, steady_window_s=15.0)
    assert cost.catch_up_s is None
    assert cost.added_lag_s == pytest.approx(8.0)


def test_the_tolerance_is_one_trigger_of_arrivals_and_a_reading_before_the_finish_does_not_count():
    # at t=15 (before the runner finished) the backlog is low but the new query has not run yet
    samples = _series([1000, 1000, 1000, 900, 2400, 1900])
    cost = rescale_cost(samples, started_at_s=10.0, finished_at_s=18.0, steady_window_s=15.0,
                        tolerance_records=1000.0)
    assert cost.catch_up_s == pytest.approx(25.0 - 10.0)


def test_no_reading_before_the_rescale_tells_nothing():
    cost = rescale_cost(_series([100, 200], t0=50.0), started_at_s=10.0, finished_at_s=20.0, steady_window_s=15.0)
    assert (cost.added_lag_s, cost.catch_up_s) == (None, None)


def test_an_in_place_change_without_a_pause_adds_no_lag():
    samples = _series([800, 900, 1000, 700, 600, 500])
    cost = rescale_cost(samples, started_at_s=10.0, finished_at_s=10.0, steady_window_s=15.0)
    assert cost.added_lag_s == 0.0
    assert cost.catch_up_s == pytest.approx(5.0)


@pytest.mark.parametrize("kwargs", [dict(started_at_s=5.0, finished_at_s=4.0, steady_window_s=1.0),
                                    dict(started_at_s=5.0, finished_at_s=6.0, steady_window_s=0.0),
                                    dict(started_at_s=5.0, finished_at_s=6.0, steady_window_s=1.0,
                                         tolerance_records=-1.0)])
def test_bad_arguments_are_refused(kwargs):
    with pytest.raises(ValueError):
        rescale_cost([], **kwargs)


def test_lag_of_a_stalled_source_still_grows():
    assert lag_s(LagSample(0.0, 300.0, 0.0)) == 300.0
    assert lag_s(LagSample(0.0, 0.0, 0.0)) == 0.0


samples_st = st.lists(st.tuples(st.floats(0, 100), st.floats(0, 1e6), st.floats(0, 1e5)), max_size=30).map(
    lambda rows: [LagSample(*r) for r in rows])


@given(samples_st, st.floats(0, 100), st.floats(0, 50), st.floats(0.1, 60), st.floats(0, 1e4))
def test_properties(samples, started, duration, window, tolerance):
    cost = rescale_cost(samples, started_at_s=started, finished_at_s=started + duration,
                        steady_window_s=window, tolerance_records=tolerance)
    if cost.added_lag_s is not None:
        assert cost.added_lag_s >= 0
    if cost.catch_up_s is not None:
        assert cost.catch_up_s >= duration


def test_the_time_to_effect_is_the_median_measured_else_the_bench_and_says_which():
    measured = time_to_effect("driver-handover", [82.0, 140.0, 100.0])
    assert (measured.seconds, measured.source, measured.samples) == (100.0, EffectSource.MEASURED, 3)
    bench = time_to_effect("state-repartition", [])
    assert (bench.seconds, bench.source) == (1.74, EffectSource.BENCH)
    assert time_to_effect("driver-restart", []).source == EffectSource.UNKNOWN


def test_a_catch_up_from_the_start_counts_from_the_first_batch_without_the_execution():
    assert catch_up_after_first_batch_s(171.0, execution_s=51.0) == 120.0
    assert catch_up_after_first_batch_s(10.0, execution_s=51.0) == 0.0
    assert catch_up_after_first_batch_s(None, execution_s=51.0) is None
