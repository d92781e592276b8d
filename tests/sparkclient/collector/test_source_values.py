"""The numbers the model is fed, per source: its backlog growth (records/s: the arrival rate from the
offsets − the rows the source read per second) and its target rate (FLIP-271 ``TARGET_DATA_RATE`` =
input rate + backlog growth, which is the arrival rate), asserted as values on captures and on
synthetic samples. A sign error in the growth moves the target rate away from the arrival rate by
twice the growth, and fails here (sparkclient/collector/model_inputs.py, scaling/planner/ds2.py)."""

from __future__ import annotations

import pytest

from scaling.planner.ds2 import propagate_target_rates
from scaling.policy.policy import Policy
from sparkclient.collector.model_inputs import measurements, model_inputs
from sparkclient.collector.sample import JobSample, VertexSample
from sparkclient.collector.snapshot import load_captures, sample_from_captures
from tests.capture_paths import FIXTURES, SPARK_4_3_0
from tests.sparkclient.collector.test_readiness import _join_sample


def _vertex(position: int, records_in: int, *, source: bool, upstream: tuple[str, ...] = (),
            span_s: float = 10.0) -> VertexSample:
    return VertexSample(vertex_id=f"v{position}", name=f"op{position}", position=position, is_source=source,
                        tasks=2, busy_s=1.0, records_in=records_in, records_out=records_in, spill_bytes=0,
                        upstream=upstream, span_s=span_s)


def _synthetic_sample(vertices: tuple[VertexSample, ...], *, arrival: float, backlog: int = 0, window_s: float = 10.0
            ) -> JobSample:
    read = sum(v.records_in for v in vertices if v.is_source)
    return JobSample(run_id="r", query_name="q", app_id="a", window_s=window_s, batches=5, first_batch_id=1,
                     last_batch_id=5, vertices=vertices, backlog=backlog, arrival_rate_per_s=arrival,
                     input_rate_per_s=read / window_s, processed_rate_per_s=read / window_s, batch_duration_s=1.0,
                     trigger_interval_s=2.0, batch_overhead_s=0.1, batch_ratio=0.5, executors=1, cores=2,
                     state_rows=0, state_bytes=0, collected_at=100.0)


def _targets(samples: list[JobSample]) -> tuple[dict, dict]:
    inputs = model_inputs(samples, adjustable=lambda v: True)
    rates = propagate_target_rates(inputs.topology, inputs.metrics, Policy())
    return inputs.metrics, {k: r.target_data_rate for k, r in rates.items()}


@pytest.mark.parametrize(("arrival", "growth"), [(1000.0, 200.0), (600.0, -200.0), (800.0, 0.0)],
                         ids=["falling-behind", "draining", "keeping-up"])
def test_one_source_growth_is_arrival_minus_read_and_its_target_is_the_arrival(arrival, growth):
    """The source read 8,000 rows over 10 s (800/s)."""
    sample = _synthetic_sample((_vertex(0, 8000, source=True), _vertex(1, 8000, source=False, upstream=("v0",))),
                     arrival=arrival, backlog=5000)
    measured = measurements(sample, ["v0", "v1"])
    assert measured["v0"].backlog_growth_per_s == pytest.approx(growth)
    assert measured["v0"].backlog == 5000 and measured["v1"].backlog == 0.0
    metrics, targets = _targets([sample])
    assert metrics["v0"].backlog_growth_per_s == pytest.approx(growth)
    assert metrics["v0"].records_in_per_s == pytest.approx(800.0)
    assert targets["v0"] == pytest.approx(arrival)
    assert targets["v1"] == pytest.approx(arrival)  # one record out per record in


def test_two_sources_each_get_their_share_of_growth_and_target():
    """A join: 6,000 and 2,000 rows read over 10 s (shares 3/4 and 1/4), 1,200 records/s arriving
    at both: growth 900 − 600 = +300 and 300 − 200 = +100; targets 900 and 300; the join sums them."""
    sample = _synthetic_sample((_vertex(0, 6000, source=True), _vertex(1, 2000, source=True),
                      _vertex(2, 8000, source=False, upstream=("v0", "v1"))), arrival=1200.0, backlog=4000)
    metrics, targets = _targets([sample])
    assert metrics["v0"].backlog_growth_per_s == pytest.approx(300.0)
    assert metrics["v1"].backlog_growth_per_s == pytest.approx(100.0)
    assert (metrics["v0"].backlog, metrics["v1"].backlog) == (pytest.approx(3000.0), pytest.approx(1000.0))
    assert (targets["v0"], targets["v1"], targets["v2"]) == (
        pytest.approx(900.0), pytest.approx(300.0), pytest.approx(1200.0))


def test_a_window_of_samples_averages_growth_over_their_spans():
    """Two samples of 10 s: +200 then −100 records/s; the window's growth is their mean, +50, and
    the target rate the mean arrival, (1000 + 700) / 2."""
    falling = _synthetic_sample((_vertex(0, 8000, source=True),), arrival=1000.0)
    draining = _synthetic_sample((_vertex(0, 8000, source=True),), arrival=700.0)
    metrics, targets = _targets([falling, draining])
    assert metrics["v0"].backlog_growth_per_s == pytest.approx(50.0)
    assert targets["v0"] == pytest.approx(850.0)


def test_p1_capture_a_steady_rate_source_has_no_growth_and_its_target_is_its_rows_per_second():
    """p1: one ``rate`` source at 2,000 rows/s, keeping up."""
    sample = sample_from_captures(load_captures(SPARK_4_3_0, "p1_"), window_s=None)
    metrics, targets = _targets([sample])
    assert abs(metrics["v0"].backlog_growth_per_s) <= 0.03 * 2000.0
    assert targets["v0"] == pytest.approx(2000.0, rel=0.03)
    assert targets["v0"] == pytest.approx(metrics["v0"].records_in_per_s + metrics["v0"].backlog_growth_per_s)


def test_restart_capture_the_catch_up_is_not_growth():
    """r1: the restarted run's catch-up batch carries the 8 s stop's rows over a span that covers the
    stop: no growth, the target is the source's 1,000 rows/s."""
    sample = sample_from_captures(load_captures(FIXTURES / "spark-4.3.0-restart", "r1_"), window_s=None,
                                  from_start=True)
    assert sample.first_batch_id == 10  # the restarted run's first batch, its catch-up
    metrics, targets = _targets([sample])
    assert abs(metrics["v0"].backlog_growth_per_s) <= 0.03 * 1000.0
    assert targets["v0"] == pytest.approx(1000.0, rel=0.03)


def test_join_capture_each_source_has_no_growth_and_its_own_rows_per_second_as_target():
    """The join: impressions at 800 rows/s, clicks at 200, both keeping up; the join's target is
    what both send it."""
    metrics, targets = _targets([_join_sample()])
    assert metrics["v0"].backlog_growth_per_s == pytest.approx(0.0, abs=8.0)
    assert metrics["v1"].backlog_growth_per_s == pytest.approx(0.0, abs=2.0)
    assert (targets["v0"], targets["v1"]) == (pytest.approx(800.0, rel=0.01), pytest.approx(200.0, rel=0.01))
    assert targets["v2"] == pytest.approx(1000.0, rel=0.01)


def test_join_capture_a_source_falling_behind_grows_by_the_rows_it_did_not_read():
    """The join with 300 records/s more arriving than read (the sample's arrival raised): the two
    sources' growth sums to +300 records/s, each positive, and their targets sum to the arrival."""
    sample = _join_sample()
    behind = sample.__class__(**{**sample.__dict__, "arrival_rate_per_s": sample.arrival_rate_per_s + 300.0})
    metrics, targets = _targets([behind])
    growth = (metrics["v0"].backlog_growth_per_s, metrics["v1"].backlog_growth_per_s)
    assert growth == (pytest.approx(240.0, abs=1.0), pytest.approx(60.0, abs=1.0))
    assert targets["v0"] + targets["v1"] == pytest.approx(behind.arrival_rate_per_s)
