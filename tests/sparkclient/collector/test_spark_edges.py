"""Spark inputs at their edges, and what the sample says for each: a retried stage attempt, a re-run
batch id, a batch that read rows and wrote none, Kafka's placeholder offsets, a batch completing
exactly on a window boundary; and the refusals at the edge of what Spark can produce (a duration
that is not an object, negative or unordered metric strings, cores beyond any cluster, a rate
source beyond its own ``rowsPerSecond``).

Built from the real captures (``tests/fixtures``) where Spark produces the case; synthetic (a
capture edited the way Spark would write it) where no capture has it, as each test says.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any

import pytest

from sparkclient.collector import metricstrings
from sparkclient.collector.batchwindow import batch_end_s, window_batches
from sparkclient.collector.progress import parse_progress, ran_a_batch
from sparkclient.collector.sample import JobSample
from sparkclient.collector.snapshot import ScenarioRefusedError, sample_to_scenario
from sparkclient.collector.sources import measure_sources
from sparkclient.collector.sparkjson import MAX_CORES, Problem, SparkDataError
from sparkclient.collector.stages import executors_and_cores, slowest_task_run_ms
from sparkclient.collector.topology import sample_from_rest
from tests.capture_paths import FIXTURES, P1_RUN_ID
from tests.sparkclient.collector.test_fuzz_parsers import CAPTURE, WINDOW_END_S

Json = dict[str, Any]


def _last_four_batches(capture: Json) -> JobSample:
    """The p1 capture's last four batches (11 to 14, 4,000 rows each, 2 s apart) in a 7 s window."""
    return sample_from_rest(capture["jobs"], capture["stages"], capture["progress"], capture["executors"],
                            run_id=P1_RUN_ID, trigger_interval_s=2.0, window_start_s=WINDOW_END_S - 7.0,
                            window_end_s=WINDOW_END_S, sql=capture["sql"], collected_at=WINDOW_END_S + 1.0)


BASE = _last_four_batches(CAPTURE)


def test_the_base_sample() -> None:
    assert (BASE.batches, BASE.first_batch_id, BASE.last_batch_id, BASE.window_s) == (4, 11, 14, 8.0)
    assert [(v.records_in, v.records_out, v.tasks) for v in BASE.vertices] == [(16000, 50, 2), (50, 50, 4)]
    assert BASE.input_rate_per_s == 2000.0


# -- a retried stage attempt (synthetic: no capture has a failed stage) -----------------------


@pytest.mark.parametrize("failed_first", [True, False], ids=["failed-listed-first", "failed-listed-last"])
def test_a_retried_stage_attempt_counts_the_attempt_that_completed(failed_first: bool) -> None:
    """Stage 28 (batch 14's source scan) failed at attempt 0 after reading 1,500 rows in 900 ms and
    completed at attempt 1 (same stage id): the sample counts attempt 1 only, whatever the order
    ``/stages`` lists them in; the failed attempt's rows are not read twice."""
    capture = copy.deepcopy(CAPTURE)
    retried = next(s for s in capture["stages"] if s["stageId"] == 28)
    failed = {**copy.deepcopy(retried), "attemptId": 0, "status": "FAILED", "inputRecords": 1500,
              "executorRunTime": 900}
    retried["attemptId"] = 1
    capture["stages"] = [failed, *capture["stages"]] if failed_first else [*capture["stages"], failed]
    sample = _last_four_batches(capture)
    assert [v.records_in for v in sample.vertices] == [16000, 50]
    assert sample.vertices[0].busy_s == BASE.vertices[0].busy_s
    assert sample.input_rate_per_s == 2000.0


# -- a re-run batch id (synthetic: the restart capture's new run starts at a new batch id) -------


def test_a_batch_id_re_run_after_a_restart_counts_once_in_the_run_that_re_ran_it() -> None:
    """Run c53c39 ran batch 9; the restarted run 1a5eaa re-ran batch 9 (its offsets were planned,
    not committed) before batch 10. The newest attempt counts: batch 9 belongs to the new run's
    window and no longer to the old run's."""
    progresses = json.loads((FIXTURES / "spark-4.3.0-restart" / "r1_recentProgress.json").read_text())
    old_run, new_run = progresses[0]["runId"], progresses[-1]["runId"]
    first_attempt = next(p for p in progresses if p["batchId"] == 9)
    re_run = {**copy.deepcopy(first_attempt), "runId": new_run, "timestamp": "2026-11-22T23:19:26.000Z"}
    progresses.append(re_run)
    end = max(batch_end_s(p) for p in progresses) + 0.001
    new = window_batches(progresses, run_id=new_run, window_start_s=None, window_end_s=end)
    old = window_batches(progresses, run_id=old_run, window_start_s=None, window_end_s=end)
    assert [p["batchId"] for p in new.batches] == list(range(9, 24))
    assert [p["batchId"] for p in old.batches] == list(range(0, 9))
    assert new.batches[0]["timestamp"] == "2026-11-22T23:19:26.000Z"


# -- a batch that read rows and wrote none (synthetic sink count; the p1 sink reports -1) ------


def test_a_batch_that_read_rows_and_wrote_none_has_no_output_and_full_input() -> None:
    capture = copy.deepcopy(CAPTURE)
    for progress in capture["progress"]:
        progress["sink"]["numOutputRows"] = 0  # every row filtered out before the sink
    sample = _last_four_batches(capture)
    assert [(v.records_in, v.records_out) for v in sample.vertices] == [(16000, 50), (50, 0)]
    assert sample.input_rate_per_s == 2000.0
    metrics = sample_to_scenario(sample)["steps"][0]["metrics"]
    assert metrics["v1"]["records_out_per_s"] == 0.0 and metrics["v1"]["records_in_per_s"] == 6.25


# -- Kafka's placeholder offsets (synthetic: edited Kafka capture) -----------------------------


KAFKA = json.loads((FIXTURES / "kafka" / "kafka_recentProgress.json").read_text())


def _kafka_with(edit: Any) -> list[Json]:
    progresses = copy.deepcopy(KAFKA)
    edit(progresses)
    return progresses


def _set(progress: Json, key: str, offset: int) -> None:
    progress["sources"][0][key]["events"]["0"] = offset


@pytest.mark.parametrize(("case", "edit"), [
    ("latest -1 in the newest batch", lambda ps: _set(ps[-1], "latestOffset", -1)),
    ("earliest -2 before the window", lambda ps: (_set(ps[-4], "latestOffset", -2), _set(ps[-3], "startOffset", -2))),
])
def test_kafka_placeholder_offsets_are_not_positions(case: str, edit: Any) -> None:
    """-1 (latest) and -2 (earliest) read as unknown positions, not as offsets 1 or 2 below 0:
    the backlog comes from the source's ``avgOffsetsBehindLatest`` (120 × 3 partitions) and the
    arrival rate (300 records/s) from the progresses whose offsets are positions."""
    assert measure_sources(KAFKA, KAFKA[-3:], now_s=0).backlog == 360
    report = measure_sources(progresses := _kafka_with(edit), progresses[-3:], now_s=0)
    assert (report.backlog, report.arrival_per_s, report.unknown) == (360, 300.0, ()), case


def test_a_kafka_end_offset_of_minus_1_leaves_the_backlog_unknown() -> None:
    progresses = _kafka_with(lambda ps: _set(ps[-1], "endOffset", -1))
    report = measure_sources(progresses, progresses[-3:], now_s=0)
    assert report.backlog == 0 and [u.reason.value for u in report.unknown] == ["not-numeric"]
    assert report.arrival_per_s == 300.0


# -- a batch completing exactly on a window boundary (the p1 capture) --------------------------


def test_a_batch_completing_on_a_boundary_belongs_to_the_window_that_starts_there() -> None:
    """Windows are ``[start, end)`` by completion time: batch 13 completing at ``b`` is in
    ``[b, …)`` and not in ``[…, b)``, so two windows sharing ``b`` count every batch once."""
    progresses = CAPTURE["progress"]
    boundary = batch_end_s(next(p for p in progresses if p["batchId"] == 13))
    before = window_batches(progresses, run_id=P1_RUN_ID, window_start_s=boundary - 4.0, window_end_s=boundary)
    after = window_batches(progresses, run_id=P1_RUN_ID, window_start_s=boundary, window_end_s=boundary + 4.0)
    assert [p["batchId"] for p in before.batches] == [11, 12]
    assert [p["batchId"] for p in after.batches] == [13, 14]
    assert before.end_s <= after.start_s


# -- refusals at the edge ----------------------------------------------------------------------


@pytest.mark.parametrize("durations", [7, "x", [1], True])
def test_a_duration_that_is_not_an_object_is_refused_naming_the_field(durations: Any) -> None:
    progress = {**copy.deepcopy(CAPTURE["progress"][-1]), "durationMs": durations}
    with pytest.raises(SparkDataError) as refused:
        parse_progress(json.dumps(progress))
    assert refused.value.field == "progress[batch 14].durationMs"
    with pytest.raises(SparkDataError):
        ran_a_batch(progress)


def test_a_duration_value_below_zero_is_refused_and_zero_is_read() -> None:
    progress = copy.deepcopy(CAPTURE["progress"][-1])
    progress["durationMs"]["addBatch"] = 0
    assert parse_progress(json.dumps(progress))["durationMs"]["addBatch"] == 0
    progress["durationMs"]["addBatch"] = -1
    with pytest.raises(SparkDataError) as refused:
        parse_progress(json.dumps(progress))
    assert (refused.value.field, refused.value.problem) == ("progress[batch 14].durationMs.addBatch", Problem.NEGATIVE)


_COUNT, _SIZE, _DURATION = metricstrings.parse_count, metricstrings.parse_size_stats, metricstrings.parse_duration_ms


@pytest.mark.parametrize(("parse", "text", "problem"), [
    (_COUNT, "-1", Problem.NEGATIVE), (_COUNT, "-4,000", Problem.NEGATIVE), (_DURATION, "-1 ms", Problem.NEGATIVE),
    (_SIZE, "-8.8 KiB", Problem.NEGATIVE), (metricstrings.parse_bytes, "-8.8 KiB", Problem.NEGATIVE),
    (_DURATION, "31 ms (-1 ms, 17 ms, 17 ms (stage 28.0: task 82))", Problem.NEGATIVE),
    (_DURATION, "31 ms (18 ms, 17 ms, 17 ms (stage 28.0: task 82))", Problem.UNORDERED),
    (_DURATION, "31 ms (14 ms, 17 ms, 16 ms (stage 28.0: task 82))", Problem.UNORDERED),
    (_SIZE, "(2.0 KiB, 1.0 KiB, 3.0 KiB (driver))", Problem.UNORDERED),
])
def test_negative_and_unordered_metric_strings_are_refused(parse: Any, text: str, problem: Problem) -> None:
    with pytest.raises(metricstrings.MetricStringError) as refused:
        parse(text)
    assert refused.value.problem is problem


@pytest.mark.parametrize("text", ["0", "0 ms", "0 ms (0 ms, 0 ms, 0 ms (stage 28.0: task 82))",
                                  "51 ms (17 ms, 17 ms, 17 ms (stage 28.0: task 82))"])
def test_zero_and_equal_statistics_are_read(text: str) -> None:
    """The edge of the order: ``min = med = max`` (one task, or all alike) and zeros are valid."""
    stats = metricstrings.parse_count(text) if text == "0" else metricstrings.parse_duration_ms(text)
    assert stats == 0 or stats.min == stats.med == stats.max or stats.min is None


def test_task_summary_quantiles_must_ascend() -> None:
    summary = {"quantiles": [0.25, 0.5, 1.0], "executorRunTime": [10.0, 20.0, 20.0]}
    assert slowest_task_run_ms(summary) == 20.0
    with pytest.raises(SparkDataError) as refused:
        slowest_task_run_ms({**summary, "executorRunTime": [10.0, 30.0, 20.0]})
    assert refused.value.problem is Problem.UNORDERED


def _executors(*cores: int) -> list[Json]:
    return [{"id": "driver", "totalCores": 0}] + [{"id": str(i), "totalCores": c} for i, c in enumerate(cores)]


def test_cores_up_to_the_bound_are_read_and_one_more_is_refused() -> None:
    assert executors_and_cores(_executors(MAX_CORES)) == (1, MAX_CORES)
    assert executors_and_cores(_executors(MAX_CORES // 2, MAX_CORES // 2)) == (2, MAX_CORES)
    for cores in ((MAX_CORES + 1,), (MAX_CORES // 2, MAX_CORES // 2 + 1)):
        with pytest.raises(SparkDataError) as refused:
            executors_and_cores(_executors(*cores))
        assert refused.value.problem is Problem.TOO_LARGE
    with pytest.raises(SparkDataError):
        executors_and_cores([{"id": "driver", "totalCores": MAX_CORES + 1}])


def test_a_rate_source_beyond_its_rows_per_second_is_reported_over_its_limit() -> None:
    """The join capture's rate sources; a batch claiming more rows per offset second than the
    source's ``rowsPerSecond`` (times 1.01) cannot have come from it: the source is reported over
    its limit (the sample is then not ready) and its rate taken at the limit."""
    capture = json.loads((FIXTURES / "spark-4.3.0-join" / "join_app.json").read_text())
    batches = [p for p in capture["progresses"] if p["runId"] == capture["run_id"]][-3:]
    assert measure_sources(capture["progresses"], batches, now_s=batch_end_s(batches[-1])).arrival_per_s
    source = batches[-1]["sources"][0]
    limit = float(source["description"].split("rowsPerSecond=")[1].split(",")[0])
    span = sum(float(p["sources"][0]["endOffset"]) - float(p["sources"][0]["startOffset"]) for p in batches)
    others = sum(p["sources"][0]["numInputRows"] for p in batches[:-1])
    edited = copy.deepcopy(batches)
    edited[-1]["sources"][0]["numInputRows"] = int(limit * 1.02 * span) - others
    report = measure_sources(capture["progresses"], edited, now_s=batch_end_s(edited[-1]))
    ((index, claimed, cap),) = report.over_limit
    assert (index, cap) == (0, limit) and claimed == pytest.approx(limit * 1.02, rel=0.01)
    # its rate is taken at the limit: the arrival is no more than the two sources' rowsPerSecond
    limits = sum(float(s["description"].split("rowsPerSecond=")[1].split(",")[0]) for s in batches[-1]["sources"])
    assert report.arrival_per_s <= limits * 1.0001


def test_a_sample_whose_scenario_the_evaluator_refuses_is_not_emitted() -> None:
    """A stage of 3,000,000 tasks (beyond the scaler's parallelism bound, 32,768): the snapshot
    raises :class:`ScenarioRefusedError` naming the evaluator's field instead of printing it."""
    huge = dataclasses.replace(BASE.vertices[1], tasks=3_000_000)
    with pytest.raises(ScenarioRefusedError) as refused:
        sample_to_scenario(dataclasses.replace(BASE, vertices=(BASE.vertices[0], huge)))
    assert str(refused.value.reason).startswith("vertices[v1].parallelism")
    assert sample_to_scenario(dataclasses.replace(BASE, vertices=(BASE.vertices[0], dataclasses.replace(
        huge, tasks=32_768))))["vertices"][1]["parallelism"] == 32_768
