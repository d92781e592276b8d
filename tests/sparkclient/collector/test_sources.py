"""The window rule, arrival rate from offsets, backlog per source kind.

Captures: tests/fixtures/spark-4.3.0 (p1: a steady ``rate`` source at 2,000 rows/s),
tests/fixtures/spark-4.3.0-restart (r1: a ``rate`` source at 1,000 rows/s, stopped for 8 s and
restarted from its checkpoint), tests/fixtures/kafka (Kafka progress in Spark's documented shape).
"""

from __future__ import annotations

import copy
import json

import pytest

from sparkclient.collector.batchwindow import batch_end_s, window_batches
from sparkclient.collector.jobruns import progresses_from_jobs
from sparkclient.collector.offsets import SourceKind, progress_start_s, rate_creation_s, source_kind
from sparkclient.collector.sample import RatesUnavailable
from sparkclient.collector.snapshot import (
    RatesUnavailableError,
    load_captures,
    sample_from_captures,
    sample_to_scenario,
)
from sparkclient.collector.sources import BacklogUnknownReason, measure_sources
from sparkclient.collector.topology import sample_from_rest
from tests.capture_paths import DEMO_CAPTURES, FIXTURES, SPARK_4_3_0

RESTART = FIXTURES / "spark-4.3.0-restart"
KAFKA = FIXTURES / "kafka"


def _load(path):
    return json.loads(path.read_text())


def _source_rate_over_windows(directory, prefix: str, rows_per_s: float) -> list[tuple[float, int, float]]:
    """(window_s, batches, error) of the source vertex's records_in_per_s for the whole capture
    and every --window-s from 2 s to 60 s (0.5 s steps) that covers at least 3 batches."""
    captures = load_captures(directory, prefix)
    results = []
    for window_s in [None] + [w / 2 for w in range(4, 121)]:
        sample = sample_from_captures(captures, window_s=window_s)
        if window_s is not None and sample.batches < 3:
            continue
        rate = sample_to_scenario(sample)["steps"][0]["metrics"]["v0"]["records_in_per_s"]
        results.append((window_s or 0.0, sample.batches, rate / rows_per_s - 1))
    return results


@pytest.mark.parametrize(("directory", "prefix", "rows_per_s"), [
    (SPARK_4_3_0, "p1_", 2000.0),
    (RESTART, "r1_", 1000.0),
])
def test_source_rate_is_within_3_percent_for_the_capture_and_every_window_of_3_batches(directory, prefix,
                                                                                       rows_per_s):
    results = _source_rate_over_windows(directory, prefix, rows_per_s)
    worst = max(results, key=lambda r: abs(r[2]))
    print(f"{prefix}: {len(results)} windows, worst records_in_per_s error {worst[2]:+.4%} "
          f"(window_s={worst[0]}, {worst[1]} batches); whole capture {results[0][2]:+.4%}")
    assert len(results) > 20
    assert all(abs(error) <= 0.03 for _w, _b, error in results), worst


def test_the_old_fencepost_rule_would_have_failed():
    """N batches' rows over N − 1 intervals (window starting at the first batch's end): the
    18% error measured on a short run; the rule gives N spans."""
    captures = load_captures(RESTART, "r1_")
    run = [p for p in captures.progresses if p["runId"] == captures.progresses[-1]["runId"]][-4:]
    old_rate = sum(p["numInputRows"] for p in run) / (batch_end_s(run[-1]) - batch_end_s(run[0]))
    assert old_rate > 1000 * 1.2
    window = window_batches(captures.progresses, run_id=run[-1]["runId"],
                            window_start_s=batch_end_s(run[0]) - 0.001, window_end_s=batch_end_s(run[-1]) + 0.001)
    assert len(window.batches) == 4
    assert sum(p["numInputRows"] for p in window.batches) / window.span_s == pytest.approx(1000.0)


def test_the_catch_up_batch_after_a_restart_is_not_arrival():
    """r1's batch 10 is the first of the restarted run: 10,000 rows that accumulated during the
    8 s stop. A window holding only it still measures 1,000 rows/s, by offsets and by span."""
    captures = load_captures(RESTART, "r1_")
    catch_up = next(p for p in captures.progresses if p["batchId"] == 10)
    assert catch_up["numInputRows"] == 10_000
    end = batch_end_s(catch_up)
    sample = sample_from_rest(captures.jobs, captures.stages, captures.progresses, captures.executors,
                              run_id=catch_up["runId"], trigger_interval_s=2.0,
                              window_start_s=end - 0.5, window_end_s=end + 0.001)
    assert sample.batches == 1
    assert sample.arrival_rate_per_s == pytest.approx(1000.0, rel=0.01)
    assert sample.input_rate_per_s == pytest.approx(1000.0, rel=0.01)  # its span covers the downtime
    assert sample.window_s == pytest.approx(10.0)


def test_rate_source_creation_time_survives_the_restart():
    progresses = _load(RESTART / "r1_recentProgress.json")
    first_run = [p for p in progresses if p["runId"] == progresses[0]["runId"]]
    both = rate_creation_s(progresses)
    assert both is not None and rate_creation_s(first_run) == pytest.approx(both, abs=1.0)


def test_rate_source_backlog_is_zero_while_it_keeps_up_and_grows_while_a_batch_runs_late():
    """Backlog = R × (now − due), the next batch due a trigger (2 s) after the newest started: 0.5 s
    after the newest batch the rows generated since it (about a trigger's) wait for a batch not yet
    due, so there is no backlog, at any moment of the trigger; 85 s later (a batch running late)
    it is R × the time past due."""
    captures = load_captures(SPARK_4_3_0, "p1_")
    history = sorted(captures.progresses, key=lambda p: p["timestamp"])
    newest = history[-1]
    due = max(progress_start_s(newest) + 2.0, batch_end_s(newest))
    assert batch_end_s(newest) < due  # the batch ran shorter than its trigger
    for now in (batch_end_s(newest) + 0.01, batch_end_s(newest) + 0.5, due):
        assert measure_sources(history, history[-3:], now_s=now, trigger_interval_s=2.0).backlog == 0
    late = measure_sources(history, history[-3:], now_s=due + 85.0, trigger_interval_s=2.0)
    assert late.backlog == pytest.approx(2000 * 85.0, abs=1)
    assert not late.unknown and late.arrival_per_s == pytest.approx(2000.0)
    # without a trigger the next batch is due when the newest ended
    assert measure_sources(history, history[-3:], now_s=batch_end_s(newest) + 0.5).backlog == pytest.approx(1000, abs=1)


def test_kafka_backlog_is_latest_minus_end_over_partitions_and_arrival_is_offset_growth():
    progresses = _load(KAFKA / "kafka_recentProgress.json")
    source = progresses[-1]["sources"][0]
    assert source_kind(source) is SourceKind.KAFKA
    report = measure_sources(progresses, progresses, now_s=batch_end_s(progresses[-1]))
    assert report.backlog == 360  # 3 partitions × (1600 − 1480)
    assert report.max_behind == 120
    assert report.arrival_per_s == pytest.approx(300.0)  # Σ latest grows 1,500 in 5 s
    assert not report.unknown


def test_kafka_without_latest_offsets_uses_its_lag_metrics():
    progresses = _load(KAFKA / "kafka_nolatest_recentProgress.json")
    report = measure_sources(progresses, progresses, now_s=batch_end_s(progresses[-1]))
    assert report.backlog == 360  # avgOffsetsBehindLatest 120 × 3 partitions
    assert report.arrival_per_s == pytest.approx(300.0)
    stripped = copy.deepcopy(progresses)
    for p in stripped:
        del p["sources"][0]["metrics"]
    bare = measure_sources(stripped, stripped, now_s=batch_end_s(stripped[-1]))
    [unknown] = bare.unknown
    assert (unknown.reason, unknown.kind) == (BacklogUnknownReason.NO_LATEST_OFFSET, SourceKind.KAFKA)
    assert bare.arrival_per_s is None and "KafkaV2[Subscribe[events]]" in unknown.message


def test_kafka_sample_feeds_the_scaler_the_backlog():
    progresses = _load(KAFKA / "kafka_recentProgress.json")
    sample = sample_from_rest([], [], progresses, [], run_id=progresses[0]["runId"], trigger_interval_s=1.0,
                              window_start_s=None, window_end_s=batch_end_s(progresses[-1]) + 0.001)
    assert sample.backlog == 360 and sample.arrival_rate_per_s == pytest.approx(300.0)
    assert sample.input_rate_per_s == pytest.approx(240.0, rel=0.25)


def test_file_source_backlog_is_unknown_with_the_reason_and_the_outstanding_files_it_reports():
    progress = {
        "id": "q", "runId": "r", "batchId": 3, "timestamp": "2026-11-22T12:00:00.000Z", "numInputRows": 50,
        "durationMs": {"addBatch": 100, "triggerExecution": 200},
        "sources": [{"description": "FileStreamSource[file:/data/in]", "startOffset": {"logOffset": 2},
                     "endOffset": {"logOffset": 3}, "latestOffset": {"logOffset": 3}, "numInputRows": 50}],
    }
    report = measure_sources([progress], [progress], now_s=batch_end_s(progress))
    [unknown] = report.unknown
    assert (unknown.kind, unknown.reason) == (SourceKind.FILE, BacklogUnknownReason.NOT_RECORDS)
    assert report.backlog == 0
    with_metrics = copy.deepcopy(progress)
    with_metrics["sources"][0]["metrics"] = {"numFilesOutstanding": "7", "numBytesOutstanding": "7340032"}
    [unknown] = measure_sources([with_metrics], [with_metrics], now_s=batch_end_s(progress)).unknown
    assert (unknown.outstanding_files, unknown.outstanding_bytes) == (7, 7_340_032)
    assert unknown.to_json()["reason"] == "not-records"


def test_this_projects_redis_log_backlog_is_latest_minus_end():
    capture = _load(DEMO_CAPTURES / "demo_restarted_app.json")
    progresses = capture["progresses"]
    source = progresses[-1]["sources"][0]
    assert source_kind(source) is SourceKind.PARTITIONED_LOG
    report = measure_sources(progresses, progresses[-3:], now_s=batch_end_s(progresses[-1]))
    expected = sum(source["latestOffset"][p] - source["endOffset"][p] for p in source["endOffset"])
    assert report.backlog == expected and not report.unknown
    assert report.arrival_per_s is not None and report.arrival_per_s > 0


def test_no_published_progress_reads_input_rows_from_the_stages():
    """Batches rebuilt from /jobs take their rows from the stages' inputRecords."""
    captures = load_captures(SPARK_4_3_0, "p1_")
    run_id = captures.progresses[-1]["runId"]
    rebuilt = progresses_from_jobs(captures.jobs, run_id, captures.stages)
    assert rebuilt and all(p["numInputRows"] == 4000 for p in rebuilt if p["batchId"] >= 3)
    end = max(batch_end_s(p) for p in rebuilt) + 0.001
    sample = sample_from_rest(captures.jobs, captures.stages, rebuilt, captures.executors, run_id=run_id,
                              trigger_interval_s=2.0, window_start_s=end - 20, window_end_s=end)
    assert sample.rates_unavailable is None
    assert sample.input_rate_per_s == pytest.approx(2000.0, rel=0.1)
    assert sample.arrival_rate_per_s > 0
    doc = sample_to_scenario(sample)
    assert doc["steps"][0]["metrics"]["v0"]["records_in_per_s"] > 0


def test_no_published_progress_and_no_input_records_says_why_rates_are_unavailable():
    captures = load_captures(SPARK_4_3_0, "p1_")
    run_id = captures.progresses[-1]["runId"]
    stages = copy.deepcopy(captures.stages)
    for stage in stages:  # as a Python data source reports them
        stage["inputRecords"] = 0
    rebuilt = progresses_from_jobs(captures.jobs, run_id, stages)
    assert all(p["numInputRows"] is None for p in rebuilt)
    end = max(batch_end_s(p) for p in rebuilt) + 0.001
    sample = sample_from_rest(captures.jobs, stages, rebuilt, captures.executors, run_id=run_id,
                              trigger_interval_s=2.0, window_start_s=end - 20, window_end_s=end)
    assert sample.rates_unavailable is RatesUnavailable.NO_INPUT_RECORDS
    assert any("rates unavailable" in e for e in sample.errors)
    with pytest.raises(RatesUnavailableError, match="no-input-records"):
        sample_to_scenario(sample)
