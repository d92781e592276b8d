"""The one metric window (``scaling.MetricWindow``), as the webapp's evaluation and the snapshot CLI
use it through ``sparkclient.collector.model_inputs``: samples weighted by the time they cover, busy time above
the window's capacity kept as a true processing rate (DS2 Eq. 1), and the refusals."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scaling.values.metrics import MetricsError, MetricWindow, VertexMeasurement, true_processing_rate


def m(span_s, busy_s, records_in, *, tasks=2, **extra):
    return VertexMeasurement(span_s=span_s, tasks=tasks, busy_s=busy_s, records_in=records_in,
                             records_out=records_in, **extra)


def test_samples_weigh_by_their_span_so_the_window_gives_totals_over_total_time():
    # 10 s with 1000 records and 4 task-s busy, then 30 s with 9000 records and 36 task-s busy.
    window = MetricWindow.from_measurements([{"v0": m(10, 4, 1000)}, {"v0": m(30, 36, 9000)}])
    got = window.aggregate()["v0"]
    assert got.records_in_per_s == pytest.approx(10_000 / 40)  # not the mean of 100 and 300
    assert got.busy_time_ms_per_s == pytest.approx(40 * 1000 / 40 / 2)
    assert got.true_processing_rate is None


def test_a_collect_without_a_batch_counts_its_time_with_zero_records():
    window = MetricWindow.from_measurements([{"v0": m(15, 0, 0)}, {"v0": m(15, 6, 3000)}])
    assert window.aggregate()["v0"].records_in_per_s == pytest.approx(100.0)


def test_busy_time_above_the_windows_capacity_gives_the_true_rate_directly():
    """A 40 s batch reported in one 15 s collect: 80 task-s on 2 tasks over 30 s is 1333 ms/s,
    more than a second per second. The metric says 1000 and the rate is records per busy second."""
    window = MetricWindow.from_measurements([{"v0": m(15, 0, 0)}, {"v0": m(15, 80, 8000)}])
    got = window.aggregate()["v0"]
    assert got.busy_time_ms_per_s == 1000.0
    assert got.true_processing_rate == pytest.approx(true_processing_rate(8000, 80) * 2)


def test_batch_overhead_weighs_by_batches_and_the_backlog_is_the_newest():
    window = MetricWindow.from_measurements([
        {"v0": m(10, 1, 100, backlog=50, batch_overhead_s=0.0, batches=0)},
        {"v0": m(10, 1, 100, backlog=70, batch_overhead_s=0.3, batches=3)},
        {"v0": m(10, 1, 100, backlog=20, batch_overhead_s=0.1, batches=1)}])
    got = window.aggregate()["v0"]
    assert got.batch_overhead_s == pytest.approx((0.3 * 3 + 0.1) / 4)
    assert got.backlog == 20


def test_rows_naming_other_vertices_are_refused_with_both_lists():
    with pytest.raises(MetricsError, match=r"\['v1'\].*\['v0'\]"):
        MetricWindow.from_measurements([{"v0": m(10, 1, 1)}, {"v1": m(10, 1, 1)}])


@pytest.mark.parametrize("bad", [{"span_s": -1.0}, {"busy_s": float("nan")}, {"records_in": float("inf")},
                                 {"tasks": 0}, {"backlog_growth_per_s": float("inf")}])
def test_a_measurement_out_of_its_domain_is_refused_naming_the_field(bad):
    fields = {"span_s": 10.0, "tasks": 1, "busy_s": 1.0, "records_in": 1.0, "records_out": 1.0, **bad}
    with pytest.raises(MetricsError, match=next(iter(bad))):
        VertexMeasurement(**fields)


counts = st.floats(min_value=0, max_value=1e7, allow_nan=False)


@given(st.lists(st.tuples(st.floats(min_value=0.1, max_value=600), counts, counts, st.integers(1, 64)),
                min_size=1, max_size=20))
def test_any_window_aggregates_to_valid_metrics_equal_to_its_totals(rows):
    measurements = [{"v0": m(span, busy, rec, tasks=tasks)} for span, busy, rec, tasks in rows]
    window = MetricWindow.from_measurements(measurements)
    got = window.aggregate()["v0"]  # VertexMetrics validates its own domain
    total_s = sum(r[0] for r in rows)
    assert got.records_in_per_s == pytest.approx(sum(r[2] for r in rows) / total_s, rel=1e-9, abs=1e-9)
    assert 0 <= got.busy_time_ms_per_s <= 1000
