"""Micro-batch -> vertex mapping and window aggregation, on the Spark 4.3.0 REST captures."""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from sparkclient.rest import SparkRestError
from sparkclient.topology import (
    JobSample,
    batch_jobs,
    batch_stages,
    collect_sample,
    executors_and_cores,
    flatten_offsets,
    batch_end_s,
    progress_time_s,
    sample_from_rest,
    source_backlog,
    stage_operators,
)

RUN_ID = "ae3eaf98-3470-49e6-8203-7305bb7e17be"


def _fixtures_dir() -> Path:
    """``$SPARKSCALER_FIXTURES``, else ``shared/fixtures/spark-4.3.0`` beside the repository
    (``<clone>/../shared``), else inside it (``<clone>/shared``)."""
    env = os.environ.get("SPARKSCALER_FIXTURES")
    here = Path(__file__).resolve()
    candidates = [Path(env)] if env else []
    candidates += [
        here.parents[3] / "shared" / "fixtures" / "spark-4.3.0",
        here.parents[2] / "shared" / "fixtures" / "spark-4.3.0",
    ]
    for candidate in candidates:
        if (candidate / "p1_app_jobs.json").is_file():
            return candidate
    raise FileNotFoundError(
        "Spark 4.3.0 REST fixtures not found in "
        + ", ".join(str(c) for c in candidates)
        + "; set SPARKSCALER_FIXTURES to the folder holding p1_app_jobs.json"
    )


@cache
def _load(name: str) -> Any:
    return json.loads((_fixtures_dir() / name).read_text())


def load(name: str) -> Any:
    return copy.deepcopy(_load(name))


def _progress(batch_id: int) -> dict[str, Any]:
    return next(p for p in load("p1_recentProgress.json") if p["batchId"] == batch_id)


def _window_for(first_batch: int, last_batch: int) -> tuple[float, float]:
    """A window whose start is batch ``first_batch``'s start and whose end is just after ``last_batch``'s."""
    return batch_end_s(_progress(first_batch)), batch_end_s(_progress(last_batch)) + 0.5


def _p1_sample(first: int, last: int, *, sql: Sequence[dict[str, Any]] | None = None) -> JobSample:
    start, end = _window_for(first, last)
    return sample_from_rest(
        load("p1_app_jobs.json"),
        load("p1_app_stages.json"),
        load("p1_recentProgress.json"),
        load("p1_app_executors.json"),
        run_id=RUN_ID,
        trigger_interval_s=2.0,
        window_start_s=start,
        window_end_s=end,
        sql=sql,
        app_id="local-1795257202448",
    )


def _stages_by_id() -> dict[int, dict[str, Any]]:
    return {s["stageId"]: s for s in load("p1_app_stages.json")}


# -- jobs and stages ----------------------------------------------------------------------------


def test_batch_jobs_groups_by_run_id_and_batch_line() -> None:
    grouped = batch_jobs(load("p1_app_jobs.json"), RUN_ID)
    assert sorted(grouped) == list(range(15))
    assert [job["jobId"] for job in grouped[14]] == [14]
    assert grouped[14][0]["stageIds"] == [28, 29]
    assert batch_jobs(load("p1_app_jobs.json"), "another-run") == {}


def test_batch_jobs_orders_several_jobs_of_a_batch() -> None:
    job = load("p1_app_jobs_14.json")
    second = dict(job, jobId=15, stageIds=[31, 30])
    grouped = batch_jobs([second, job], RUN_ID)
    assert [j["jobId"] for j in grouped[14]] == [14, 15]


def test_batch_stages_orders_and_skips() -> None:
    stages = load("p1_app_stages.json")
    grouped = batch_jobs(load("p1_app_jobs.json"), RUN_ID)
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
    grouped = batch_jobs(load("p1_app_jobs.json"), RUN_ID)
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
    sample = _p1_sample(14, 14, sql=[load("p1_app_sql_29__details.json")])
    v0, v1 = sample.vertices
    assert v0.name == "MicroBatchScan → Filter → Project → EventTimeWatermark → Filter → Project → HashAggregate"
    assert v1.name == (
        "HashAggregate → StateStoreRestore → HashAggregate → StateStoreSave → HashAggregate → Scan ExistingRDD"
    )
    # the full /sql list gives the same names and the same ids for every batch
    full = _p1_sample(1, 14, sql=load("p1_app_sql__details-true.json"))
    assert [v.name for v in full.vertices] == [v0.name, v1.name]
    assert [v.vertex_id for v in full.vertices] == ["v0", "v1"]


def test_stage_operators_of_an_execution() -> None:
    operators = stage_operators([load("p1_app_sql_29__details.json")])
    assert operators[28][:3] == ["MicroBatchScan", "Filter", "Project"]
    assert "Exchange" not in operators[28] + operators[29]
    assert not any(name.startswith("WholeStageCodegen") for name in operators[28] + operators[29])
    assert stage_operators(load("listener_sql_nodetails.json")) == {}  # details=false: no metrics
    counter = stage_operators([load("pyds_counter_sql_exec.json")])
    assert counter[10] == ["MicroBatchScan", "Project", "HashAggregate"]


def test_edges_from_parent_ids_when_present() -> None:
    stages = load("p1_app_stages.json")
    for stage in stages:
        stage["parentIds"] = [stage["stageId"] - 1] if stage["stageId"] % 2 else []
    start, end = _window_for(14, 14)
    sample = sample_from_rest(
        load("p1_app_jobs.json"), stages, load("p1_recentProgress.json"), [],
        run_id=RUN_ID, trigger_interval_s=2.0, window_start_s=start, window_end_s=end,
    )
    assert [v.upstream for v in sample.vertices] == [(), ("v0",)]


# -- progress-derived values --------------------------------------------------------------------


def test_rates_overhead_and_ratio() -> None:
    sample = _p1_sample(10, 15)
    progresses = [_progress(b) for b in range(10, 16)]
    start, end = _window_for(10, 15)
    assert sample.window_s == pytest.approx(end - start)
    assert sample.input_rate_per_s == pytest.approx(sum(p["numInputRows"] for p in progresses) / (end - start))
    mean_duration = sum(p["batchDuration"] for p in progresses) / 6 / 1000
    assert sample.batch_duration_s == pytest.approx(mean_duration)
    assert sample.batch_ratio == pytest.approx(mean_duration / 2.0)
    overhead = sum(p["durationMs"]["triggerExecution"] - p["durationMs"]["addBatch"] for p in progresses) / 6 / 1000
    assert sample.batch_overhead_s == pytest.approx(overhead)
    assert sample.processed_rate_per_s == pytest.approx(
        sum(p["numInputRows"] for p in progresses) / (sum(p["batchDuration"] for p in progresses) / 1000)
    )
    # rate source: offsets are seconds; 2 units per batch of 4000 rows -> 2000 records/s
    assert sample.arrival_rate_per_s == pytest.approx(2000.0)
    assert sample.backlog == 0
    assert sample.trigger_interval_s == 2.0
    assert sample.collected_at == pytest.approx(end)


def test_overhead_from_last_progress() -> None:
    last = load("p1_lastProgress.json")
    start = batch_end_s(last)
    sample = sample_from_rest(
        [], [], [last], [], run_id=last["runId"], trigger_interval_s=2.0,
        window_start_s=start, window_end_s=start + 2.0,
    )
    assert sample.batch_overhead_s == pytest.approx((1090 - 846) / 1000)
    assert sample.batch_duration_s == pytest.approx(1.091)
    assert sample.state_rows == 20 and sample.state_bytes == 8864
    assert sample.query_name == "ds2q"


def test_backlog_of_the_python_counter_source() -> None:
    progress = load("pyds_counter_lastProgress.json")
    source = progress["sources"][0]
    assert {k: source["latestOffset"][k] - source["endOffset"][k] for k in source["endOffset"]} == {
        "p0": 5893, "p1": 5893, "p2": 5893,
    }
    assert source_backlog(source) == 17_679
    start = batch_end_s(progress)
    sample = sample_from_rest(
        [], [], [progress], load("p1_app_executors.json"), run_id=progress["runId"],
        trigger_interval_s=2.0, window_start_s=start - 8.0, window_end_s=start + 2.0,
    )
    assert sample.backlog == 17_679
    assert sample.state_rows == 10


def test_non_numeric_offsets_are_noted_not_fatal() -> None:
    progress = load("pyds_redis_lastProgress.json")
    start = batch_end_s(progress)
    sample = sample_from_rest(
        [], [], [progress], [], run_id=progress["runId"],
        trigger_interval_s=2.0, window_start_s=start, window_end_s=start + 2.0,
    )
    assert sample.backlog == 0
    assert any("not numeric" in e for e in sample.errors)


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
    assert executors_and_cores(load("p1_app_executors.json")) == (1, 2)
    assert executors_and_cores(load("sa_da_allexecutors.json")) == (4, 4)
    assert executors_and_cores(load("sa_noda_allexecutors.json")) == (2, 2)
    assert executors_and_cores([]) == (0, 0)
    sample = _p1_sample(14, 14)
    assert (sample.executors, sample.cores) == (1, 2)


def test_invalid_window_raises() -> None:
    with pytest.raises(ValueError, match="window_end_s"):
        sample_from_rest([], [], [], [], run_id=RUN_ID, trigger_interval_s=2.0, window_start_s=5, window_end_s=5)
    with pytest.raises(ValueError, match="trigger_interval_s"):
        sample_from_rest([], [], [], [], run_id=RUN_ID, trigger_interval_s=-1, window_start_s=0, window_end_s=5)


# -- collect_sample with a fake client ------------------------------------------------------------


class FixtureClient:
    """Serves the p1 captures like SparkRestClient would; records the calls."""

    def __init__(self, *, sql_fails: bool = False) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.sql_fails = sql_fails

    def jobs(self, app_id: str, status: object = None) -> list[dict[str, Any]]:
        self.calls.append(("jobs", app_id, status))
        return load("p1_app_jobs.json")

    def stages(self, app_id: str, status: object = None) -> list[dict[str, Any]]:
        self.calls.append(("stages", app_id, status))
        return [s for s in load("p1_app_stages.json") if status is None or s["status"] == "COMPLETE"]

    def executors(self, app_id: str) -> list[dict[str, Any]]:
        self.calls.append(("executors", app_id))
        return load("p1_app_executors.json")

    def sql_execution(self, app_id: str, execution_id: int, details: bool = True) -> dict[str, Any]:
        self.calls.append(("sql", app_id, execution_id))
        if self.sql_fails:
            raise SparkRestError("GET .../sql failed with HTTP 404", url="u", status=404, attempts=1)
        return next(e for e in load("p1_app_sql__details-true.json") if e["id"] == execution_id)


def test_collect_sample_fetches_and_names_vertices() -> None:
    client = FixtureClient()
    now = batch_end_s(_progress(15)) + 1.0
    sample = collect_sample(
        client, "local-1795257202448", load("p1_recentProgress.json"),
        run_id=RUN_ID, trigger_interval_s=2.0, window_s=10.0, now_s=now,
    )
    assert ("stages", "local-1795257202448", "complete") in client.calls
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
        FixtureClient(sql_fails=True), "app", load("p1_recentProgress.json"),
        run_id=RUN_ID, trigger_interval_s=2.0, window_s=10.0, now_s=batch_end_s(_progress(15)) + 1.0,
    )
    assert [v.name for v in sample.vertices] == ["stage 0", "stage 1"]
    assert any("vertex names fall back" in e for e in sample.errors)


def test_a_batch_belongs_to_the_window_holding_its_completion():
    """Consecutive windows count every batch exactly once, even one that started in the previous
    window (its progress is published only when it completes)."""
    progress = _progress(14)
    boundary = progress_time_s(progress) + 0.001  # started just before, completed just after
    assert batch_end_s(progress) > boundary
    kwargs = dict(run_id=RUN_ID, trigger_interval_s=2.0)
    args = (load("p1_app_jobs.json"), load("p1_app_stages.json"), [progress], load("p1_app_executors.json"))
    before = sample_from_rest(*args, window_start_s=boundary - 10, window_end_s=boundary, **kwargs)
    after = sample_from_rest(*args, window_start_s=boundary, window_end_s=boundary + 10, **kwargs)
    assert (before.batches, after.batches) == (0, 1)
