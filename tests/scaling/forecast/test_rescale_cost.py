"""scaling.forecast.rescale_cost: the added lag and catch-up time of a rescale."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from scaling.forecast.rescale_cost import (
    EffectSource,
    LagSample,
    StandbyReadiness,
    WindowEnd,
    catch_up_after_first_batch_s,
    lag_s,
    measured_time_to_effect_s,
    rescale_cost,
    time_to_effect,
    warm_up_left_s,
)
from scaling.values.load_change import departure


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


def test_a_later_load_change_ends_the_window_before_its_overload():
    """A 5 s pause whose backlog stays a little above its steady level (never within the tolerance),
    then the load doubles at t=40 and the backlog runs away: the overload is not the rescale's."""
    rates = [500.0] * 8 + [1000.0] * 6
    backlogs = [1000, 1000, 1000, 3000, 2000, 1600, 1500, 1500, 20_000, 60_000, 100_000, 140_000, 180_000, 220_000]
    samples = [LagSample(i * 5.0, b, r) for i, (b, r) in enumerate(zip(backlogs, rates))]
    cost = rescale_cost(samples, started_at_s=10.0, finished_at_s=15.0, steady_window_s=15.0)
    assert cost.added_lag_s == pytest.approx(3000 / 500 - 1000 / 500)
    assert (cost.ended_by, cost.window_end_s, cost.catch_up_s) == (WindowEnd.LOAD_CHANGE, 40.0, None)
    assert cost.peak_backlog == 3000


def test_a_return_to_the_steady_level_ends_the_window_before_a_later_overload():
    samples = _series([1000, 1000, 1000, 3000, 2000, 1000, 9000, 30_000, 60_000])
    cost = rescale_cost(samples, started_at_s=10.0, finished_at_s=15.0, steady_window_s=15.0)
    assert (cost.ended_by, cost.catch_up_s, cost.added_lag_s) == (WindowEnd.CAUGHT_UP, 15.0, 4.0)


def test_the_next_rescale_ends_the_window():
    samples = _series([1000, 1000, 1000, 3000, 2000, 1500, 9000, 30_000])
    cost = rescale_cost(samples, started_at_s=10.0, finished_at_s=15.0, steady_window_s=15.0, until_s=30.0)
    assert (cost.ended_by, cost.window_end_s, cost.catch_up_s) == (WindowEnd.NEXT_RESCALE, 30.0, None)
    assert cost.added_lag_s == pytest.approx(4.0)


def test_a_load_step_inside_the_steady_window_is_not_a_change_after_the_rescale():
    """The load rose just before the rescale (what it answers): the level is the new one."""
    rates = [500.0, 1000.0, 1000.0, 1000.0, 1000.0, 1000.0, 1000.0]
    samples = [LagSample(i * 5.0, b, r) for i, (b, r) in enumerate(zip([0, 2000, 4000, 8000, 3000, 2500, 1000], rates))]
    cost = rescale_cost(samples, started_at_s=15.0, finished_at_s=20.0, steady_window_s=15.0, tolerance_records=2000)
    assert cost.ended_by == WindowEnd.CAUGHT_UP


@pytest.mark.parametrize("series, level, expected", [
    ([500, 510, 490, 520], 500, None),      # noise
    ([500, 900, 500, 500], 500, None),      # one spike is not a change
    ([500, 500, 900, 950, 920], 500, 2),    # a step up
    ([500, 300, 320, 310], 500, 1),         # a step down (300 is 40 % below, beyond 25 % of the lower)
    ([500, 900, 300, 300], 500, 2),         # a spike, then a step down: from where the new level holds
    ([], 500, None),
])
def test_departure_finds_where_a_new_load_level_begins(series, level, expected):
    assert departure(series, level) == expected


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


@pytest.mark.parametrize("standby", list(StandbyReadiness))
def test_a_handovers_expectation_without_a_measured_one_like_it_is_the_benchs_only_onto_a_ready_standby(standby):
    """Onto a ready standby the bench's handover; onto one that has to start first, the bench's pause
    would leave out the start: "not measured", no figure."""
    effect = time_to_effect("driver-handover", [], standby=standby)
    ready = standby is StandbyReadiness.READY
    assert (effect.source, effect.seconds, effect.standby) == (
        (EffectSource.BENCH_READY, 3.68, standby) if ready else (EffectSource.NOT_MEASURED, None, standby))
    assert time_to_effect("driver-handover", [18.0, 4.0], standby=standby).seconds == 11.0


def test_what_is_left_of_a_standbys_start_is_its_measured_start_less_its_time_running():
    assert warm_up_left_s([40.0, 60.0, 50.0], running_s=10.0) == (40.0, 50.0)  # the median start
    assert warm_up_left_s([40.0, 60.0, 50.0], running_s=None) == (50.0, 50.0)  # not started: all of it
    assert warm_up_left_s([40.0], running_s=55.0) == (0.0, 40.0)  # past its measured start: nothing left
    assert warm_up_left_s([40.0], running_s=-3.0) == (40.0, 40.0)  # a clock ahead of the runner's
    assert warm_up_left_s([], running_s=10.0) == (None, None)  # never measured: no figure
    assert warm_up_left_s([-1.0], running_s=0.0) == (None, None)


@pytest.mark.parametrize("standby", [StandbyReadiness.STARTING, StandbyReadiness.ABSENT, StandbyReadiness.FAILED,
                                     StandbyReadiness.UNKNOWN])
@pytest.mark.parametrize("onto_ready_s, ready_part", [([6.0, 4.0, 18.0], (6.0, EffectSource.MEASURED, 3)),
                                                      ([], (3.68, EffectSource.BENCH_READY, 0))])
def test_a_standby_not_ready_adds_what_is_left_of_its_start_to_the_handover_onto_a_ready_one(
        standby, onto_ready_s, ready_part):
    effect = time_to_effect("driver-handover", onto_ready_s, standby=standby, warm_up_s=40.0, ready_s=50.0)
    seconds, source, samples = ready_part
    assert (effect.seconds, effect.source, effect.samples) == (pytest.approx(40.0 + seconds), source, samples)
    assert (effect.standby, effect.warm_up_s, effect.ready_s) == (standby, 40.0, 50.0)
    assert effect.seconds >= effect.warm_up_s


def test_a_ready_standby_has_no_start_left_to_add():
    effect = time_to_effect("driver-handover", [6.0], standby=StandbyReadiness.READY, warm_up_s=40.0, ready_s=50.0)
    assert (effect.seconds, effect.warm_up_s) == (6.0, None)


@given(st.lists(st.floats(0, 600), max_size=6), st.floats(-60, 900) | st.none(),
       st.lists(st.floats(0, 60), max_size=4))
def test_the_expectation_of_a_standby_not_ready_is_never_below_what_is_left_of_its_start(starts, running, onto):
    left, expected = warm_up_left_s(starts, running_s=running)
    effect = time_to_effect("driver-handover", onto, standby=StandbyReadiness.STARTING, warm_up_s=left,
                            ready_s=expected)
    if left is not None:
        assert 0 <= left <= expected and effect.seconds >= left


def test_the_measured_time_to_effect_runs_from_the_approval_to_the_first_batch_within_the_answer():
    assert measured_time_to_effect_s(approved_at_s=100.0, first_batch_at_s=182.5) == 82.5
    # the runner's clock ahead of the web app's: the batch cannot end after its answer was read
    assert measured_time_to_effect_s(approved_at_s=100.0, first_batch_at_s=190.0, answered_at_s=185.0) == 85.0
    assert measured_time_to_effect_s(approved_at_s=100.0, first_batch_at_s=99.0) == 0.0
    assert measured_time_to_effect_s(approved_at_s=100.0, first_batch_at_s=None) is None


def test_a_catch_up_from_the_start_counts_from_the_first_batch_without_the_execution():
    assert catch_up_after_first_batch_s(171.0, execution_s=51.0) == 120.0
    assert catch_up_after_first_batch_s(10.0, execution_s=51.0) == 0.0
    assert catch_up_after_first_batch_s(None, execution_s=51.0) is None


@given(samples_st, st.floats(0, 100), st.floats(0, 50), st.floats(0.1, 60), st.floats(0, 1e4),
       st.lists(st.tuples(st.floats(0, 1e6), st.floats(0, 1e5)), max_size=10))
# The reading that caught up is also the first of a new load level, confirmed by the next one.
@example([LagSample(0.0, 0.0, 0.0), LagSample(1.0, 0.0, 1.0)], 0.0, 0.0, 1.0, 0.0, [(0.0, 1.0)])
def test_what_comes_after_the_window_is_never_charged_to_the_rescale(samples, started, duration, window, tolerance,
                                                                     later):
    kwargs = dict(started_at_s=started, finished_at_s=started + duration, steady_window_s=window,
                  tolerance_records=tolerance)
    cost = rescale_cost(samples, **kwargs)
    if cost.window_end_s is None:
        return
    last = max([s.t_s for s in samples] + [cost.window_end_s])
    more = [LagSample(last + 1 + i, backlog, rate) for i, (backlog, rate) in enumerate(later)]
    again = rescale_cost(samples + more, **kwargs)
    assert (again.added_lag_s, again.catch_up_s, again.window_end_s) == (cost.added_lag_s, cost.catch_up_s,
                                                                        cost.window_end_s)
