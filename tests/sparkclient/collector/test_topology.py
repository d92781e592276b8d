"""Micro-batch -> vertex mapping and window aggregation, on the Spark 4.3.0 REST captures."""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from typing import Any

import pytest

from sparkclient.collector.batchwindow import batch_end_s, progress_time_s
from sparkclient.collector.collect import collect_sample
from sparkclient.collector.metricstrings import stage_refs
from sparkclient.collector.offsets import flatten_offsets, rate_creation_s, source_backlog
from sparkclient.collector.plan import stage_operators
from sparkclient.collector.rest import SparkRestError
from sparkclient.collector.sample import JobSample
from sparkclient.collector.sources import BacklogUnknownReason
from sparkclient.collector.stages import batch_jobs, batch_stages, executors_and_cores, rest_time_s, stages_running_s
from sparkclient.collector.topology import sample_from_rest
from tests.capture_paths import DEMO_CAPTURES, FIXTURES, P1_RUN_ID, spark_json


def _p1_progress(batch_id: int) -> dict[str, Any]:
    return next(p for p in spark_json("p1_recentProgress.json") if p["batchId"] == batch_id)


def _window_for(first_batch: int, last_batch: int) -> tuple[float, float]:
    """A window whose start is batch ``first_batch``'s start and whose end is just after ``last_batch``'s."""
    return batch_end_s(_p1_progress(first_batch)), batch_end_s(_p1_progress(last_batch)) + 0.5


def _p1_sample(first: int, last: int, *, sql: Sequence[dict[str, Any]] | None = None) -> JobSample:
    start, end = _window_for(first, last)
    return sample_from_rest(
        spark_json("p1_app_jobs.json"),
        spark_json("p1_app_stages.json"),
        spark_json("p1_recentProgress.json"),
        spark_json("p1_app_executors.json"),
        run_id=P1_RUN_ID,
        trigger_interval_s=2.0,
        window_start_s=start,
        window_end_s=end,
        sql=sql,
        app_id="local-1795257202448",
    )


def _stages_by_id() -> dict[int, dict[str, Any]]:
    return {s["stageId"]: s for s in spark_json("p1_app_stages.json")}


# -- jobs and stages ----------------------------------------------------------------------------


def test_batch_jobs_groups_by_run_id_and_batch_line() -> None:
    grouped = batch_jobs(spark_json("p1_app_jobs.json"), P1_RUN_ID)
    assert sorted(grouped) == list(range(15))
    assert [job["jobId"] for job in grouped[14]] == [14]
    assert grouped[14][0]["stageIds"] == [28, 29]
    assert batch_jobs(spark_json("p1_app_jobs.json"), "another-run") == {}


def test_batch_jobs_orders_several_jobs_of_a_batch() -> None:
    job = spark_json("p1_app_jobs_14.json")
    second = dict(job, jobId=15, stageIds=[31, 30])
    grouped = batch_jobs([second, job], P1_RUN_ID)
    assert [j["jobId"] for j in grouped[14]] == [14, 15]


def test_batch_stages_orders_and_skips() -> None:
    stages = spark_json("p1_app_stages.json")
    grouped = batch_jobs(spark_json("p1_app_jobs.json"), P1_RUN_ID)
    ordered, missing = batch_stages(grouped[14], stages)
    assert [s["stageId"] for s in ordered] == [28, 29] and missing == []
    ordered, missing = batch_stages(grouped[0], stages)  # stage 0 is SKIPPED
    assert [s["stageId"] for s in ordered] == [1] and missing == []
    ordered, missing = batch_stages(grouped[14], [s for s in stages if s["stageId"] != 29])
    assert missing == [29]


# -- vertices -----------------------------------------------------------------------------------


def test_single_batch_vertices_match_the_stage_json() -> None:
    sample = _p1_sample(14, 14)
    stages = _stages_by_id()
    assert sample.batches == 1 and sample.first_batch_id == 14 == sample.last_batch_id
    assert [v.vertex_id for v in sample.vertices] == ["v0", "v1"]
    v0, v1 = sample.vertices
    assert (v0.tasks, v1.tasks) == (stages[28]["numTasks"], stages[29]["numTasks"]) == (2, 4)
    assert v0.is_source and not v1.is_source
    assert (v0.position, v1.position) == (0, 1)
    assert v0.upstream == () and v1.upstream == ("v0",)
    assert v0.records_in == stages[28]["inputRecords"] == 4000
    assert v0.records_out == stages[28]["shuffleWriteRecords"] == 10
    assert v1.records_in == stages[29]["shuffleReadRecords"] == 10
    # foreachBatch sink reports -1 rows and the stage no outputRecords: the last vertex's input
    assert v1.records_out == 10
    assert v0.busy_s == pytest.approx(stages[28]["executorRunTime"] / 1000)
    assert v1.busy_s == pytest.approx(stages[29]["executorRunTime"] / 1000)
    assert v0.spill_bytes == 0 == v1.spill_bytes
    assert (v0.name, v1.name) == ("stage 0", "stage 1")  # no SQL given


def test_window_sums_over_batches() -> None:
    sample = _p1_sample(1, 14)
    stages = _stages_by_id()
    grouped = batch_jobs(spark_json("p1_app_jobs.json"), P1_RUN_ID)
    first = [grouped[b][0]["stageIds"][0] for b in range(1, 15)]
    second = [grouped[b][0]["stageIds"][1] for b in range(1, 15)]
    v0, v1 = sample.vertices
    assert sample.batches == 14
    assert v0.records_in == sum(stages[s]["inputRecords"] for s in first)
    assert v0.records_out == sum(stages[s]["shuffleWriteRecords"] for s in first)
    assert v1.records_in == sum(stages[s]["shuffleReadRecords"] for s in second)
    assert v0.busy_s == pytest.approx(sum(stages[s]["executorRunTime"] for s in first) / 1000)
    assert v1.busy_s == pytest.approx(sum(stages[s]["executorRunTime"] for s in second) / 1000)
    assert sample.errors == ()


def test_missing_job_and_odd_first_batch_are_reported_not_fatal() -> None:
    sample = _p1_sample(0, 15)
    assert sample.batches == 16 and sample.last_batch_id == 15
    assert len(sample.vertices) == 2
    assert any("batch 15" in e and "/jobs" in e for e in sample.errors)
    assert any("batch 0" in e and "1 stage(s)" in e for e in sample.errors)
    stages = _stages_by_id()
    assert sample.vertices[0].records_in == sum(stages[s]["inputRecords"] for s in range(2, 30, 2))


def test_vertex_names_from_sql_plan() -> None:
    sample = _p1_sample(14, 14, sql=[spark_json("p1_app_sql_29__details.json")])
    v0, v1 = sample.vertices
    assert v0.name == "MicroBatchScan → Filter → Project → EventTimeWatermark → Filter → Project → HashAggregate"
    assert v1.name == (
        "HashAggregate → StateStoreRestore → HashAggregate → StateStoreSave → HashAggregate → Scan ExistingRDD"
    )
    # the full /sql list gives the same names and the same ids for every batch
    full = _p1_sample(1, 14, sql=spark_json("p1_app_sql__details-true.json"))
    assert [v.name for v in full.vertices] == [v0.name, v1.name]
    assert [v.vertex_id for v in full.vertices] == ["v0", "v1"]


def test_stage_operators_of_an_execution() -> None:
    operators = stage_operators([spark_json("p1_app_sql_29__details.json")])
    assert operators[28][:3] == ["MicroBatchScan", "Filter", "Project"]
    assert "Exchange" not in operators[28] + operators[29]
    assert not any(name.startswith("WholeStageCodegen") for name in operators[28] + operators[29])
    assert stage_operators(spark_json("listener_sql_nodetails.json")) == {}  # details=false: no metrics
    counter = stage_operators([spark_json("pyds_counter_sql_exec.json")])
    assert counter[10] == ["MicroBatchScan", "Project", "HashAggregate"]


def test_edges_from_parent_ids_when_present() -> None:
    stages = spark_json("p1_app_stages.json")
    for stage in stages:
        stage["parentIds"] = [stage["stageId"] - 1] if stage["stageId"] % 2 else []
    start, end = _window_for(14, 14)
    sample = sample_from_rest(
        spark_json("p1_app_jobs.json"), stages, spark_json("p1_recentProgress.json"), [],
        run_id=P1_RUN_ID, trigger_interval_s=2.0, window_start_s=start, window_end_s=end,
    )
    assert [v.upstream for v in sample.vertices] == [(), ("v0",)]


# -- progress-derived values --------------------------------------------------------------------


def test_rates_overhead_and_ratio() -> None:
    """Overhead per batch = triggerExecution − the wall time when at least one of the batch's
    stages ran (union of [submissionTime, completionTime] from /stages). In ms, stage times 10:33:ss.mmm:

    - batch 10: trigger 597; stage 20 48.237→48.269 (32), stage 21 48.271→48.537 (266); union 298; overhead 299
    - batch 11: trigger 570; stage 22 50.218→50.260 (42), stage 23 50.264→50.487 (223); union 265; overhead 305
    - batch 12: trigger 533; stage 24 52.239→52.279 (40), stage 25 52.281→52.481 (200); union 240; overhead 293
    - batch 13: trigger 505; stage 26 54.171→54.207 (36), stage 27 54.209→54.443 (234); union 270; overhead 235
    - batch 14: trigger 890; stage 28 56.349→56.412 (63), stage 29 56.417→56.784 (367); union 430; overhead 460
    - batch 15: trigger 1090; its job is not in /jobs, so no stage data: left out of the mean

    Mean (299 + 305 + 293 + 235 + 460) / 5 = 1592 / 5 = 318.4 ms. The old triggerExecution −
    addBatch gave (151 + 158 + 155 + 142 + 239 + 244) / 6 = 181.5 ms: it missed the scheduling,
    the foreachBatch collect and the state commits between and after the stages.
    """
    sample = _p1_sample(10, 15)
    progresses = [_p1_progress(b) for b in range(10, 16)]
    start, end = _window_for(10, 15)
    # the window rule: 6 batches span 6 cuts of the rate source (endOffset 18 -> 30, seconds)
    assert sample.window_s == pytest.approx(12.0)
    assert sample.input_rate_per_s == pytest.approx(sum(p["numInputRows"] for p in progresses) / 12.0)
    mean_duration = sum(p["batchDuration"] for p in progresses) / 6 / 1000
    assert sample.batch_duration_s == pytest.approx(mean_duration)
    assert sample.batch_ratio == pytest.approx(mean_duration / 2.0)
    assert sample.batch_overhead_s == pytest.approx(0.3184, abs=1e-6)
    old_overhead = sum(p["durationMs"]["triggerExecution"] - p["durationMs"]["addBatch"] for p in progresses) / 6
    assert old_overhead == pytest.approx(181.5)
    assert not any("batch overhead" in e for e in sample.errors)
    assert sample.processed_rate_per_s == pytest.approx(
        sum(p["numInputRows"] for p in progresses) / (sum(p["batchDuration"] for p in progresses) / 1000)
    )
    # rate source: offsets are seconds; 2 units per batch of 4000 rows -> 2000 records/s
    assert sample.arrival_rate_per_s == pytest.approx(2000.0)
    # the rows generated after batch 15 fixed its end offset (30 s after the source's creation) are
    # about one trigger's, which the next batch, not yet due, takes: no backlog (it read 3,994 before)
    creation = rate_creation_s([_p1_progress(b) for b in range(16)])
    assert 3000 < round(2000 * (end - (creation + 30))) < 2000 * 2.5
    assert sample.backlog == 0 and not sample.backlog_unknown
    assert sample.trigger_interval_s == 2.0
    assert sample.collected_at == pytest.approx(end)


def test_overhead_falls_back_without_stage_times() -> None:
    """Without jobs and stages (batch 15 of p1 is not in /jobs), the overhead is the old
    triggerExecution − addBatch = 1090 − 846 = 244 ms, with a note."""
    last = spark_json("p1_lastProgress.json")
    start = batch_end_s(last)
    sample = sample_from_rest(
        [], [], [last], [], run_id=last["runId"], trigger_interval_s=2.0,
        window_start_s=start, window_end_s=start + 2.0,
    )
    assert sample.batch_overhead_s == pytest.approx((1090 - 846) / 1000)
    assert any("batch overhead" in e and "triggerExecution − addBatch" in e for e in sample.errors)
    assert sample.batch_duration_s == pytest.approx(1.091)
    assert sample.state_rows == 20 and sample.state_bytes == 8864
    assert sample.query_name == "ds2q"


def test_backlog_of_the_python_counter_source() -> None:
    progress = spark_json("pyds_counter_lastProgress.json")
    source = progress["sources"][0]
    assert {k: source["latestOffset"][k] - source["endOffset"][k] for k in source["endOffset"]} == {
        "p0": 5893, "p1": 5893, "p2": 5893,
    }
    assert source_backlog(source) == 17_679
    start = batch_end_s(progress)
    sample = sample_from_rest(
        [], [], [progress], spark_json("p1_app_executors.json"), run_id=progress["runId"],
        trigger_interval_s=2.0, window_start_s=start - 8.0, window_end_s=start + 2.0,
    )
    assert sample.backlog == 17_679
    assert sample.state_rows == 10


def test_non_numeric_offsets_are_noted_not_fatal() -> None:
    progress = spark_json("pyds_redis_lastProgress.json")
    start = batch_end_s(progress)
    sample = sample_from_rest(
        [], [], [progress], [], run_id=progress["runId"],
        trigger_interval_s=2.0, window_start_s=start, window_end_s=start + 2.0,
    )
    assert sample.backlog == 0
    [unknown] = sample.backlog_unknown
    assert (unknown.index, unknown.reason) == (0, BacklogUnknownReason.NOT_NUMERIC)
    assert unknown.message in sample.errors and "backlog unknown for source 0" in unknown.message


@pytest.mark.parametrize(
    ("offset", "expected"),
    [
        ({"p0": 123, "p1": 45}, {"p0": 123.0, "p1": 45.0}),
        ({"topic": {"0": 123, "1": 7}}, {"topic/0": 123.0, "topic/1": 7.0}),
        ('{"topic": {"0": 5}}', {"topic/0": 5.0}),
        (30, 30.0),
        ("42", 42.0),
        (None, None),
        ({"ev:0": "1795257858127-49"}, None),
    ],
)
def test_flatten_offsets(offset: object, expected: object) -> None:
    assert flatten_offsets(offset) == expected


def test_kafka_and_int_backlog() -> None:
    kafka = {"endOffset": {"t": {"0": 100, "1": 50}}, "latestOffset": {"t": {"0": 130, "1": 50}}}
    assert source_backlog(kafka) == 30
    assert source_backlog({"endOffset": 28, "latestOffset": 30}) == 2
    assert source_backlog({"endOffset": None, "latestOffset": 30}) is None


def test_executors_and_cores() -> None:
    assert executors_and_cores(spark_json("p1_app_executors.json")) == (1, 2)
    assert executors_and_cores(spark_json("sa_da_allexecutors.json")) == (4, 4)
    assert executors_and_cores(spark_json("sa_noda_allexecutors.json")) == (2, 2)
    assert executors_and_cores([]) == (0, 0)
    sample = _p1_sample(14, 14)
    assert (sample.executors, sample.cores) == (1, 2)


def test_invalid_window_raises() -> None:
    with pytest.raises(ValueError, match="window_end_s"):
        sample_from_rest([], [], [], [], run_id=P1_RUN_ID, trigger_interval_s=2.0, window_start_s=5, window_end_s=5)
    with pytest.raises(ValueError, match="trigger_interval_s"):
        sample_from_rest([], [], [], [], run_id=P1_RUN_ID, trigger_interval_s=-1, window_start_s=0, window_end_s=5)


# -- collect_sample with a fake client ------------------------------------------------------------


class FixtureClient:
    """Serves the p1 captures like SparkRestClient would; records the calls."""

    def __init__(self, *, sql_fails: bool = False) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.sql_fails = sql_fails

    def jobs(self, app_id: str, status: object = None) -> list[dict[str, Any]]:
        self.calls.append(("jobs", app_id, status))
        return spark_json("p1_app_jobs.json")

    def stages(self, app_id: str, status: object = None) -> list[dict[str, Any]]:
        self.calls.append(("stages", app_id, status))
        return [s for s in spark_json("p1_app_stages.json") if status is None or s["status"].lower() in status]

    def executors(self, app_id: str) -> list[dict[str, Any]]:
        self.calls.append(("executors", app_id))
        return spark_json("p1_app_executors.json")

    def sql_execution(self, app_id: str, execution_id: int, details: bool = True) -> dict[str, Any]:
        self.calls.append(("sql", app_id, execution_id))
        if self.sql_fails:
            raise SparkRestError("GET .../sql failed with HTTP 404", url="u", status=404, attempts=1)
        return next(e for e in spark_json("p1_app_sql__details-true.json") if e["id"] == execution_id)

    def task_summary(self, app_id: str, stage_id: int, attempt: int, quantiles: object = (1.0,)) -> dict[str, Any]:
        self.calls.append(("taskSummary", app_id, stage_id))
        raise SparkRestError("GET .../taskSummary failed with HTTP 404", url="u", status=404, attempts=1)


def test_collect_sample_fetches_and_names_vertices() -> None:
    client = FixtureClient()
    now = batch_end_s(_p1_progress(15)) + 1.0
    sample = collect_sample(
        client, "local-1795257202448", spark_json("p1_recentProgress.json"),
        run_id=P1_RUN_ID, trigger_interval_s=2.0, window_s=10.0, now_s=now,
    )
    assert ("stages", "local-1795257202448", ("complete", "skipped")) in client.calls
    # job 14 is tagged execution-root-id-28; its jobs ran in execution 29
    assert [c[2] for c in client.calls if c[0] == "sql"] == [28, 29]
    assert sample.app_id == "local-1795257202448"
    assert sample.batches == 5 and sample.last_batch_id == 15
    assert [v.tasks for v in sample.vertices] == [2, 4]
    assert sample.vertices[0].name.startswith("MicroBatchScan → Filter → Project")
    assert any("batch 15" in e for e in sample.errors)
    assert sample.collected_at == now


def test_collect_sample_survives_missing_sql() -> None:
    sample = collect_sample(
        FixtureClient(sql_fails=True), "app", spark_json("p1_recentProgress.json"),
        run_id=P1_RUN_ID, trigger_interval_s=2.0, window_s=10.0, now_s=batch_end_s(_p1_progress(15)) + 1.0,
    )
    assert [v.name for v in sample.vertices] == ["stage 0", "stage 1"]
    assert any("vertex names fall back" in e for e in sample.errors)


def test_a_batch_belongs_to_the_window_holding_its_completion():
    """Consecutive windows count every batch exactly once, even one that started in the previous
    window (its progress is published only when it completes)."""
    progress = _p1_progress(14)
    boundary = progress_time_s(progress) + 0.001  # started just before, completed just after
    assert batch_end_s(progress) > boundary
    kwargs = dict(run_id=P1_RUN_ID, trigger_interval_s=2.0)
    args = (spark_json("p1_app_jobs.json"), spark_json("p1_app_stages.json"), [progress],
            spark_json("p1_app_executors.json"))
    before = sample_from_rest(*args, window_start_s=boundary - 10, window_end_s=boundary, **kwargs)
    after = sample_from_rest(*args, window_start_s=boundary, window_end_s=boundary + 10, **kwargs)
    assert (before.batches, after.batches) == (0, 1)


# -- overhead from the stage timings ------------------------------------------------------------


def test_stages_running_s_is_the_union_of_the_stage_intervals() -> None:
    def stage(start: str, end: str | None) -> dict[str, Any]:
        day = "2026-11-21T10:00:"
        return {"submissionTime": f"{day}{start}GMT", "completionTime": end and f"{day}{end}GMT"}

    stamp = progress_time_s({"timestamp": "2026-11-21T10:33:56.417Z"})
    assert rest_time_s("2026-11-21T10:33:56.417GMT") == pytest.approx(stamp)
    assert rest_time_s(None) is None and rest_time_s("soon") is None
    assert stages_running_s([]) == 0.0
    # [0, 2] ∪ [1, 3] ∪ [5, 6] = 3 + 1 = 4 s (overlapping stages count once; the gap is not counted)
    overlapping = [stage("05.000", "06.000"), stage("00.000", "02.000"), stage("01.000", "03.000")]
    assert stages_running_s(overlapping) == pytest.approx(4.0)
    assert stages_running_s([stage("00.000", "02.000"), stage("01.000", None)]) is None  # still running


def test_batches_without_stage_times_are_left_out_of_the_overhead() -> None:
    """Batches 13 and 14 of p1 (see test_rates_overhead_and_ratio): 235 and 460 ms. With stage 28
    still running (no completionTime), batch 14 is left out: 235 ms. With stage 26 running too,
    no batch has stage data and the old formula is used: (142 + 239) / 2 = 190.5 ms, noted."""
    assert _p1_sample(13, 14).batch_overhead_s == pytest.approx(0.3475, abs=1e-6)
    start, end = _window_for(13, 14)
    stages = spark_json("p1_app_stages.json")
    for entry in stages:
        if entry["stageId"] == 28:
            del entry["completionTime"]
    kwargs: dict[str, Any] = dict(run_id=P1_RUN_ID, trigger_interval_s=2.0, window_start_s=start, window_end_s=end)
    args = (spark_json("p1_app_jobs.json"), stages, spark_json("p1_recentProgress.json"), [])
    sample = sample_from_rest(*args, **kwargs)
    assert sample.batch_overhead_s == pytest.approx(0.235, abs=1e-6)
    assert not any("batch overhead" in e for e in sample.errors)
    for entry in stages:
        if entry["stageId"] == 26:
            entry["completionTime"] = None
    sample = sample_from_rest(*args, **kwargs)
    assert sample.batch_overhead_s == pytest.approx(0.1905, abs=1e-6)
    assert any("batch overhead" in e for e in sample.errors)


# -- the demo pipeline, captured live (tests/sparkclient/captures) -------------------------------

CAPTURES = DEMO_CAPTURES
DEMO_NAMES = [
    "MicroBatchScan → Filter → Project → Project",
    "MapInPandas → Project → EventTimeWatermark → Filter → Project → HashAggregate",
    "HashAggregate → StateStoreRestore → HashAggregate → StateStoreSave → HashAggregate → Scan ExistingRDD",
]


def _capture(name: str) -> dict[str, Any]:
    return json.loads((CAPTURES / name).read_text())


class DemoCaptureClient:
    """Serves one capture of the demo pipeline like SparkRestClient; records the SQL ids asked."""

    def __init__(self, capture: dict[str, Any]) -> None:
        self.capture = capture
        self.sql_ids: list[int] = []

    def jobs(self, app_id: str, status: object = None) -> list[dict[str, Any]]:
        return copy.deepcopy(self.capture["jobs"])

    def stages(self, app_id: str, status: object = None) -> list[dict[str, Any]]:
        return copy.deepcopy(self.capture["stages"])

    def executors(self, app_id: str) -> list[dict[str, Any]]:
        return copy.deepcopy(self.capture["executors"])

    def sql_execution(self, app_id: str, execution_id: int, details: bool = True) -> dict[str, Any]:
        self.sql_ids.append(execution_id)
        return copy.deepcopy(next(e for e in self.capture["sql"] if e["id"] == execution_id))

    def task_summary(self, app_id: str, stage_id: int, attempt: int, quantiles: object = (1.0,)) -> dict[str, Any]:
        """The demo captures hold no summaries: every task as long as the stage's mean task."""
        stage = next(s for s in self.capture["stages"] if (s["stageId"], s["attemptId"]) == (stage_id, attempt))
        return {"quantiles": [1.0], "executorRunTime": [stage["executorRunTime"] / max(1, stage["numTasks"])]}


def _collect_capture(capture: dict[str, Any], first: int, last: int) -> tuple[JobSample, DemoCaptureClient]:
    """collect_sample over the window holding the completions of batches ``first..last``."""
    by_id = {p["batchId"]: p for p in capture["progresses"]}
    start, end = batch_end_s(by_id[first]) - 0.001, batch_end_s(by_id[last]) + 0.001
    client = DemoCaptureClient(capture)
    sample = collect_sample(
        client, capture["app_id"], capture["progresses"], run_id=capture["run_id"],
        trigger_interval_s=capture["trigger_interval_s"], window_s=end - start, now_s=end,
    )
    return sample, client


@pytest.mark.parametrize(
    ("name", "first", "last", "probed"),
    [("demo_first_app.json", 0, 5, [10, 11]), ("demo_restarted_app.json", 25, 31, [12, 13])],
)
def test_demo_vertex_names_with_single_task_stages(name: str, first: int, last: int, probed: list[int]) -> None:
    """The demo's first two stages run one task each (source and enrich partitions 1). Spark's
    SQLMetrics.stringValue prints "(stage X.Y: task Z)" only for two or more task values, so their
    plan nodes carry no stage reference: only the stateful stage (2 tasks) is referenced. Filling
    the gaps from neighbouring nodes across the exchanges put every operator on the last stage
    (v2 'MicroBatchScan → ... → Scan ExistingRDD', v0/v1 'stage 0'/'stage 1'), in the first
    application and after a driver restart alike. The plan is now cut at its exchanges and the
    segments mapped by position to the stages of the job that ran the execution."""
    capture = _capture(name)
    assert capture["config"]["source_partitions"] == capture["config"]["enrich_partitions"] == 1
    sample, client = _collect_capture(capture, first, last)
    assert client.sql_ids == probed  # the micro-batch's execution (no job), then the foreachBatch collect's
    assert [v.vertex_id for v in sample.vertices] == ["v0", "v1", "v2"]
    assert [v.tasks for v in sample.vertices] == [1, 1, 2]
    assert [v.name for v in sample.vertices] == DEMO_NAMES
    assert sample.errors == ()

    execution = next(e for e in capture["sql"] if e["id"] == probed[-1])
    (job_id,) = execution["successJobIds"]
    job = next(j for j in capture["jobs"] if j["jobId"] == job_id)
    first_stage, second_stage, last_stage = sorted(job["stageIds"])
    # the root cause: only the 2-task stage is referenced in the plan's metric strings
    referenced = {
        stage for node in execution["nodes"] for metric in node["metrics"] for stage, _ in stage_refs(metric["value"])
    }
    assert referenced == {last_stage}
    operators = stage_operators([execution], capture["jobs"])
    assert [" → ".join(operators[s]) for s in (first_stage, second_stage, last_stage)] == DEMO_NAMES
    # without the jobs, the unreferenced stages stay unnamed instead of being misassigned
    assert stage_operators([execution]) == {last_stage: operators[last_stage]}


def test_demo_plan_references_to_other_stages_are_ignored() -> None:
    """A reference to a stage outside the execution's jobs (e.g. another batch's) never names a
    vertex, and a reference contradicting the stage order disables the positional mapping."""
    capture = _capture("demo_first_app.json")
    execution = next(e for e in capture["sql"] if e["id"] == 11)
    scan = next(n for n in execution["nodes"] if n["nodeName"] == "MicroBatchScan")
    scan["metrics"].append({"name": "x", "value": "1 ms (0 ms, 0 ms, 1 ms (stage 2.0: task 1))"})
    operators = stage_operators([execution], capture["jobs"])
    assert [" → ".join(operators[s]) for s in (15, 16, 17)] == DEMO_NAMES and 2 not in operators
    scan["metrics"][-1]["value"] = "1 ms (0 ms, 0 ms, 1 ms (stage 16.0: task 1))"  # the scan is not in stage 16
    operators = stage_operators([execution], capture["jobs"])
    assert sorted(operators) == [16, 17]
    assert operators[16] == ["MicroBatchScan", "Filter", "Project", "Project"]  # referenced, so taken as is
    assert " → ".join(operators[17]) == DEMO_NAMES[2]


def test_demo_overhead_counts_the_time_between_and_after_stages() -> None:
    """First application, batches 1..5 (batch 0's 24 s of start-up left out), in ms:

    - batch 1: trigger 7831, addBatch 7219; stages 3, 4, 5 run 12:19:02.385 → 03.034, 03.035 → 07.810,
      07.823 → 08.952: union 649 + 4775 + 1129 = 6553; overhead 7831 − 6553 = 1278 (old 612)
    - batch 2: trigger 4736, addBatch 3960; 09.501 → 09.778, 09.779 → 11.499, 11.505 → 13.038:
      277 + 1720 + 1533 = 3530; overhead 1206 (old 776)
    - batch 3: trigger 4514, addBatch 3934; 14.803 → 15.767, 15.775 → 17.343, 17.354 → 18.302:
      964 + 1568 + 948 = 3480; overhead 1034 (old 580)
    - batch 4: trigger 4164, addBatch 3140; 19.687 → 20.642, 20.644 → 21.776, 21.779 → 22.439:
      955 + 1132 + 660 = 2747; overhead 1417 (old 1024)
    - batch 5: trigger 2687, addBatch 2111; 23.661 → 23.875, 23.878 → 24.774, 24.782 → 25.156:
      214 + 896 + 374 = 1484; overhead 1203 (old 576)

    New mean 6138 / 5 = 1227.6 ms (25.6 % of the mean trigger of 4786.4 ms); the old mean was
    3568 / 5 = 713.6 ms (14.9 %).
    """
    sample, _client = _collect_capture(_capture("demo_first_app.json"), 1, 5)
    assert (sample.first_batch_id, sample.last_batch_id, sample.batches) == (1, 5, 5)
    assert sample.batch_overhead_s == pytest.approx(1.2276, abs=1e-6)
    restarted, _client = _collect_capture(_capture("demo_restarted_app.json"), 26, 31)
    # (881 + 907 + 880 + 1069 + 969 + 1077) / 6 ms; the old formula gave 2759 / 6 = 459.8 ms
    assert restarted.batch_overhead_s == pytest.approx(5783 / 6 / 1000, abs=1e-6)


def test_positional_mapping_only_for_a_unique_stage_order() -> None:
    """Two single-task inputs of a join: the plan does not tell which input stage got the lower
    id, so without references only what is referenced is named (nothing is guessed)."""
    shuffle = [{"name": "shuffle records written", "value": "3"}]
    nodes = [
        {"nodeId": 6, "nodeName": "Scan a", "metrics": []},
        {"nodeId": 5, "nodeName": "Exchange", "metrics": shuffle},
        {"nodeId": 4, "nodeName": "Scan b", "metrics": []},
        {"nodeId": 3, "nodeName": "Exchange", "metrics": shuffle},
        {"nodeId": 2, "nodeName": "SortMergeJoin", "metrics": []},
        {"nodeId": 1, "nodeName": "Project", "metrics": []},
    ]
    edges = [{"fromId": f, "toId": t} for f, t in ((6, 5), (5, 2), (4, 3), (3, 2), (2, 1))]
    execution = {"id": 1, "successJobIds": [0], "nodes": nodes, "edges": edges}
    jobs = [{"jobId": 0, "stageIds": [2, 0, 1]}]
    assert stage_operators([execution], jobs) == {}
    nodes[4]["metrics"] = [{"name": "peak memory", "value": "2 MiB (1 MiB, 1 MiB, 1 MiB (stage 2.0: task 7))"}]
    assert stage_operators([execution], jobs) == {2: ["SortMergeJoin", "Project"]}
    # a chain (one input) is mapped by position: Scan a -> stage 0, the join -> stage 1
    chain = {**execution, "nodes": [n for n in nodes if n["nodeId"] not in (4, 3)], "edges": edges[:2] + edges[4:]}
    chain["nodes"][2]["metrics"] = []
    operators = stage_operators([chain], [{"jobId": 0, "stageIds": [0, 1]}])
    assert operators == {0: ["Scan a"], 1: ["SortMergeJoin", "Project"]}


def test_arrival_rate_of_a_window_with_one_batch_uses_the_progress_before_it():
    """A batch longer than the collect interval leaves one progress in the window; the log's growth
    is measured from the last progress before the window (the rate source writes 2,000 rows/s)."""
    before, inside = _p1_progress(13), _p1_progress(14)
    start, end = batch_end_s(before) + 0.001, batch_end_s(inside) + 3.0  # ~5 s holding batch 14 only
    args = (spark_json("p1_app_jobs.json"), spark_json("p1_app_stages.json"), [before, inside],
            spark_json("p1_app_executors.json"))
    sample = sample_from_rest(*args, run_id=P1_RUN_ID, trigger_interval_s=2.0, window_start_s=start, window_end_s=end)
    assert sample.batches == 1
    assert sample.arrival_rate_per_s == pytest.approx(2000.0, rel=0.01)
    alone = sample_from_rest(*args[:2], [inside], args[3], run_id=P1_RUN_ID, trigger_interval_s=2.0,
                             window_start_s=start, window_end_s=end)
    # without the baseline the rate source's offsets still measure it: they are generation seconds
    assert alone.arrival_rate_per_s == pytest.approx(2000.0)


def test_batches_left_out_for_missing_stages_get_one_note_naming_them() -> None:
    """A query without a trigger runs many short batches; a collect that finds their stages still
    running says so once, naming the batches, not once per batch."""
    start, end = _window_for(1, 14)
    sample = sample_from_rest(spark_json("p1_app_jobs.json"), [], spark_json("p1_recentProgress.json"),
                              spark_json("p1_app_executors.json"), run_id=P1_RUN_ID, trigger_interval_s=2.0,
                              window_start_s=start, window_end_s=end, app_id="local-1795257202448")
    notes = [e for e in sample.errors if "missing from /stages" in e]
    assert len(notes) == 1 and not sample.vertices
    assert notes[0].startswith(f"{sample.batches} batches [") and "more]" in notes[0]


def test_a_skipped_stage_does_not_count_in_the_positional_mapping():
    """Real capture (tests/fixtures/spark-4.3.0-aqe-single-task): adaptive execution runs the shuffle's
    map stage as a job of its own and the next job lists it again as SKIPPED. The plan has two
    segments; counted with the skipped stage the batch had three stages, so the single-task stages
    (whose metrics name no stage) were never named and the job page showed "stage 0", "stage 1"."""
    folder = FIXTURES / "spark-4.3.0-aqe-single-task"
    jobs, stages, execution = (json.loads((folder / f"{name}.json").read_text()) for name in ("jobs", "stages", "sql"))
    ran = {s["stageId"] for s in stages if s["status"] != "SKIPPED"}
    assert len(ran) == 2 and len(stages) == 3 and all(s["numTasks"] == 1 for s in stages)
    assert stage_operators([execution], jobs) == {}
    first, second = sorted(ran)
    named = stage_operators([execution], jobs, ran_stages=ran)
    assert named[first] == ["MicroBatchScan", "Project"]
    assert named[second] == ["BatchEvalPython", "Project", "WriteToDataSourceV2"]  # not the AdaptiveSparkPlan wrapper
