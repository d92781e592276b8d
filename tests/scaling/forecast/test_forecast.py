"""The prediction and verification formulas (scaling.forecast.prediction) and the per-stage metric formulas."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scaling.forecast import prediction as forecast
from scaling.forecast.prediction import Verdict, VerdictReason
from scaling.policy.policy import Policy, utilization_band
from scaling.values.metrics import busy_time_ms_per_s, job_utilization, stage_utilization, true_processing_rate
from scaling.values.readiness import NotReady, SampleIssue


def test_busy_time_is_per_task_and_capped_at_1000_ms_per_s():
    assert busy_time_ms_per_s(busy_s=6.0, span_s=3.0, tasks=4) == pytest.approx(500.0)
    assert busy_time_ms_per_s(busy_s=30.0, span_s=3.0, tasks=4) == 1000.0  # a batch longer than the window


def test_true_processing_rate_is_records_per_busy_second_and_infinite_when_idle():
    assert true_processing_rate(1200.0, 4.0) == 300.0
    assert true_processing_rate(0.0, 0.0) == math.inf


def test_stage_utilization_uses_the_slots_the_stage_can_use():
    assert stage_utilization(busy_s=15.0, window_s=15.0, tasks=2, cores=4) == pytest.approx(0.5)
    assert stage_utilization(busy_s=15.0, window_s=15.0, tasks=8, cores=2) == pytest.approx(0.5)
    assert job_utilization(1.5, 3) == pytest.approx(0.5)


def test_the_band_of_a_policy_is_the_band_function():
    assert Policy(utilization_target=0.7).band == utilization_band(0.7) == (0.4, 1.0)
    assert utilization_band(0.5, 0.45, None) == (0.45, 0.8)


def test_catch_up_drains_the_restart_backlog_with_the_spare_capacity():
    backlog = forecast.restart_backlog(1000.0, arrival_per_s=100.0, downtime_s=10.0)
    assert backlog == 2000.0
    assert forecast.catch_up_s(backlog, capacity=300.0, arrival_per_s=100.0) == pytest.approx(10.0)
    assert forecast.catch_up_s(backlog, capacity=100.0, arrival_per_s=100.0) is None
    assert forecast.catch_up_s(0.0, capacity=1.0, arrival_per_s=5.0) == 0.0


def test_capacity_from_the_cost_per_source_record():
    cost = forecast.cost_core_s_per_record([(100.0, 200.0), (100.0, 400.0)], source_rate_per_s=100.0)
    assert cost == pytest.approx(0.0075)
    assert forecast.capacity_per_s(cores=3, overhead_fraction=0.25, cost_s=cost) == pytest.approx(300.0)


def test_backlog_slope_is_the_least_squares_slope():
    assert forecast.backlog_slope_per_s([0, 15, 30], [100, 250, 400]) == pytest.approx(10.0)
    assert forecast.backlog_slope_per_s([0], [5]) == 0.0


ARGS = {"batches": 5, "arrival_before": 100.0, "arrival_after": 110.0, "slope_per_s": 0.0, "latest_backlog": 10.0,
        "realized_capacity": 950.0, "predicted_capacity": 1000.0, "tolerance": 0.1}


@pytest.mark.parametrize("kwargs, verdict, reason", [
    ({"batches": 0}, Verdict.INCONCLUSIVE, VerdictReason.NO_BATCHES),
    ({"arrival_before": 100.0, "arrival_after": 200.0}, Verdict.INCONCLUSIVE, VerdictReason.ARRIVAL_SHIFT),
    ({"load_change_after_s": 45.0}, Verdict.INCONCLUSIVE, VerdictReason.LOAD_CHANGE),
    ({"not_ready": [SampleIssue(NotReady.FIRST_BATCH, {"batch_id": 0})]}, Verdict.INCONCLUSIVE,
     VerdictReason.NOT_READY),
    ({"realized_capacity": 700.0}, Verdict.INEFFECTIVE, VerdictReason.CAPACITY_SHORT),
    ({"realized_capacity": 700.0, "batches": 2}, Verdict.INCONCLUSIVE, VerdictReason.FEW_BATCHES),
    ({"realized_capacity": 1300.0}, Verdict.INCONCLUSIVE, VerdictReason.CAPACITY_ABOVE),
    ({"slope_per_s": 50.0}, Verdict.INEFFECTIVE, VerdictReason.BACKLOG_GROWING),
    ({"slope_per_s": 50.0, "realized_capacity": None}, Verdict.INEFFECTIVE, VerdictReason.BACKLOG_GROWING),
    ({"realized_capacity": None}, Verdict.INCONCLUSIVE, VerdictReason.NO_RATES),
    ({"predicted_capacity": None}, Verdict.INCONCLUSIVE, VerdictReason.NO_RATES),
    ({}, Verdict.VERIFIED, VerdictReason.WITHIN_TOLERANCE),
])
def test_verify_judges_the_realized_window(kwargs, verdict, reason):
    check = forecast.verify(**{**ARGS, **kwargs})
    assert (check.verdict, check.reason) == (verdict, reason)


@pytest.mark.parametrize("batches, verdict, reason", [
    (forecast.MIN_BATCHES - 1, Verdict.INCONCLUSIVE, VerdictReason.FEW_BATCHES),
    (forecast.MIN_BATCHES, Verdict.INEFFECTIVE, VerdictReason.CAPACITY_SHORT),
])
def test_a_shortfall_on_exactly_the_fewest_batches_is_judged(batches, verdict, reason):
    check = forecast.verify(**{**ARGS, "realized_capacity": 700.0, "batches": batches})
    assert (check.verdict, check.reason) == (verdict, reason)


@pytest.mark.parametrize("latest_backlog, verdict, reason", [
    (0.0, Verdict.VERIFIED, VerdictReason.WITHIN_TOLERANCE),   # drained at the end: the slope is the catch-up
    (1.0, Verdict.INEFFECTIVE, VerdictReason.BACKLOG_GROWING),
])
def test_a_rising_slope_with_the_backlog_drained_is_not_growing(latest_backlog, verdict, reason):
    check = forecast.verify(**{**ARGS, "slope_per_s": 50.0, "latest_backlog": latest_backlog})
    assert (check.verdict, check.reason) == (verdict, reason)


@pytest.mark.parametrize("slope, verdict", [
    (11.0, Verdict.VERIFIED),      # exactly tolerance × arrival (0.1 × 110 records/s): not faster
    (11.01, Verdict.INEFFECTIVE),
])
def test_a_backlog_growing_exactly_at_the_tolerance_is_not_growing(slope, verdict):
    assert forecast.verify(**{**ARGS, "slope_per_s": slope}).verdict == verdict


@pytest.mark.parametrize("realized, verified", [
    (681.0, False),    # proposal #1: 817 predicted, 681 realized, -16.7 %
    (735.0, False),    # -10.0 % and a bit
    (736.0, True),     # -9.9 %
    (776.15, True),    # -5 %
    (817.0, True),
    (857.85, True),    # +5 %
    (898.0, True),     # +9.9 %
    (899.0, False),    # +10.0 % and a bit
    (1200.0, False),
])
def test_verified_only_within_the_tolerance_of_the_capacity_the_page_shows(realized, verified):
    check = forecast.verify(**{**ARGS, "realized_capacity": realized, "predicted_capacity": 817.0})
    assert (check.verdict == Verdict.VERIFIED) is verified, check
    assert check.data["error"] == pytest.approx(realized / 817.0 - 1)
    assert check.data["tolerance"] == 0.1


@given(realized=st.floats(0.0, 1e7), predicted=st.floats(1e-3, 1e7), tolerance=st.floats(0.0, 1.0),
       batches=st.integers(0, 100), slope=st.floats(-1e4, 1e4), arrival_after=st.floats(0.0, 1e4))
def test_a_capacity_error_outside_the_tolerance_is_never_verified(realized, predicted, tolerance, batches, slope,
                                                                 arrival_after):
    check = forecast.verify(**{**ARGS, "realized_capacity": realized, "predicted_capacity": predicted,
                               "tolerance": tolerance, "batches": batches, "slope_per_s": slope,
                               "arrival_after": arrival_after})
    if abs(realized / predicted - 1) > tolerance:
        assert check.verdict != Verdict.VERIFIED
    if check.verdict == Verdict.VERIFIED:
        assert abs(check.data["error"]) <= tolerance


def test_the_capacity_error_is_relative_to_the_prediction():
    assert forecast.capacity_error(681.0, 817.0) == pytest.approx(-0.1665, abs=1e-4)
    assert forecast.capacity_error(None, 817.0) is None
    assert forecast.capacity_error(681.0, 0.0) is None


def test_realized_utilization_takes_the_catch_up_out_of_the_measured_busy_time():
    """Right after a restart the sources take 1,200 records/s (600 arriving plus the backlog): the
    stages are busy 1.2 and 0.4 core-s per s on 2 cores. At the arrival rate that is half of it, and
    with 10 % overhead the share is (0.6 + 0.2) / 2 / 0.9."""
    from scaling.forecast.prediction import realized_utilization_at

    u = realized_utilization_at(stages=[(1.2, 2), (0.4, 4)], source_per_s=1200, rate_per_s=600, cores=2,
                                overhead_s=0.5, trigger_interval_s=5)
    assert u == pytest.approx((0.6 + 0.2) / 2 / 0.9)
    assert realized_utilization_at(stages=[(1.0, 1)], source_per_s=0, rate_per_s=600, cores=1, overhead_s=0,
                                   trigger_interval_s=1) is None
