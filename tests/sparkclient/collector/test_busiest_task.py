"""The busiest task on the live path (skew): a stage whose slowest task sets the batch
time is seen as slow from Spark's own ``taskSummary``, not only in a scenario that gives
``busy_time_max_ms_per_s``. Checked on a real capture of a skewed query (80 % of the rows on one
key; ``tests/fixtures/spark-4.3.0-skew``)."""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any

import pytest

from scaling.planner.microbatch import plan_micro_batch
from scaling.policy.policy import Policy
from scaling.values.metrics import MetricsError, MetricWindow, VertexMeasurement, paced_task_busy_s
from sparkclient.collector.collect import collect_sample
from sparkclient.collector.model_inputs import model_inputs
from sparkclient.collector.rest import SparkRestError
from sparkclient.collector.sparkjson import SparkDataError
from sparkclient.collector.stages import slowest_task_run_ms
from tests.capture_paths import SKEW_CAPTURE, SPARK_4_3_0

CAPTURE: dict[str, Any] = json.loads(SKEW_CAPTURE.read_text())


class SkewClient:
    """Serves the skew capture as ``SparkRestClient`` would, ``taskSummary`` included."""

    def __init__(self, *, summaries_fail: bool = False) -> None:
        self.summaries_fail = summaries_fail
        self.summary_calls: list[tuple[int, int]] = []
        self.stage_statuses: object = None

    def jobs(self, app_id: str, status: object = None) -> list[dict[str, Any]]:
        return copy.deepcopy(CAPTURE["jobs"])

    def stages(self, app_id: str, status: object = None) -> list[dict[str, Any]]:
        self.stage_statuses = status
        wanted = None if status is None else {s.upper() for s in ([status] if isinstance(status, str) else status)}
        return [copy.deepcopy(s) for s in CAPTURE["stages"] if wanted is None or s["status"] in wanted]

    def executors(self, app_id: str) -> list[dict[str, Any]]:
        return copy.deepcopy(CAPTURE["executors"])

    def sql_execution(self, app_id: str, execution_id: int, details: bool = True) -> dict[str, Any]:
        raise SparkRestError("GET .../sql failed with HTTP 404", url="u", status=404, attempts=1)

    def task_summary(self, app_id: str, stage_id: int, attempt: int, quantiles: object = (1.0,)) -> dict[str, Any]:
        self.summary_calls.append((stage_id, attempt))
        if self.summaries_fail:
            raise SparkRestError("GET .../taskSummary failed with HTTP 404", url="u", status=404, attempts=1)
        return copy.deepcopy(CAPTURE["task_summaries"][f"{stage_id}/{attempt}"])


def _collect(client: SkewClient, window_s: float = 20.0):
    return collect_sample(client, CAPTURE["app_id"], CAPTURE["progresses"], run_id=CAPTURE["run_id"],
                          trigger_interval_s=CAPTURE["trigger_interval_s"], window_s=window_s,
                          now_s=CAPTURE["now_s"])


# -- the formula (scaling.values.metrics.paced_task_busy_s) ------------------------------------------------


def test_one_wave_is_the_slowest_task_and_several_waves_only_a_task_above_the_even_share():
    # 4 tasks on 4 slots: the stage lasts as long as its slowest task, 3 s (mean 1.5 s).
    assert paced_task_busy_s(3.0, 6.0, 4, 4) == 3.0
    # 4 tasks on 2 slots: the stage lasts max(3 s, 6 s / 2) = 3 s on 2 slots: 6 slot-s / 4 tasks.
    assert paced_task_busy_s(3.0, 6.0, 4, 2) == 1.5
    # A hot task of 5 s among 4 (Σ 8 s) on 2 slots: 5 s on 2 slots = 10 slot-s / 4 tasks.
    assert paced_task_busy_s(5.0, 8.0, 4, 2) == 2.5
    # Never below the mean, and 200 small tasks on 2 cores are evened out by the scheduler.
    assert paced_task_busy_s(0.01, 2.0, 200, 2) == pytest.approx(2.0 / 200)
    with pytest.raises(MetricsError, match="slots"):
        paced_task_busy_s(1.0, 1.0, 4, 0)
    with pytest.raises(MetricsError, match="slowest_task_s"):
        paced_task_busy_s(float("nan"), 1.0, 4, 2)


def test_the_window_averages_the_busiest_task_and_a_sample_without_it_counts_its_mean():
    a = VertexMeasurement(span_s=10.0, tasks=4, busy_s=8.0, records_in=1000, records_out=1000, busy_max_s=5.0)
    b = VertexMeasurement(span_s=10.0, tasks=4, busy_s=8.0, records_in=1000, records_out=1000)
    metrics = MetricWindow.from_measurements([{"v": a}, {"v": b}]).aggregate()["v"]
    assert metrics.busy_time_ms_per_s == pytest.approx(200.0)            # 8 s / 10 s / 4 tasks
    assert metrics.busy_time_max_ms_per_s == pytest.approx((500.0 + 200.0) / 2)
    unmeasured = MetricWindow.from_measurements([{"v": b}, {"v": b}]).aggregate()["v"]
    assert unmeasured.busy_time_max_ms_per_s is None


# -- Spark's taskSummary (sparkclient.collector.stages.slowest_task_run_ms) -----------------------------------


def test_the_slowest_task_is_the_summary_at_quantile_one():
    summaries = CAPTURE["task_summaries"]
    stages = {f"{s['stageId']}/{s['attemptId']}": s for s in CAPTURE["stages"]}
    for key, summary in summaries.items():
        slowest = slowest_task_run_ms(summary)
        stage = stages[key]
        assert slowest == summary["executorRunTime"][0]
        # between the mean task and all tasks together
        assert stage["executorRunTime"] / stage["numTasks"] - 1e-9 <= slowest <= stage["executorRunTime"] + 1e-9


def test_a_summary_without_quantile_one_or_with_bad_values_is_refused_naming_the_field():
    other = json.loads((SPARK_4_3_0 / "p1_app_stages_29_0_taskSummary.json").read_text())  # 0.05, 0.5, 0.95
    with pytest.raises(SparkDataError, match="quantiles"):
        slowest_task_run_ms(other)
    summary = next(iter(CAPTURE["task_summaries"].values()))
    for bad, field in ((dict(summary, executorRunTime=[-1.0]), r"executorRunTime\[0\]"),
                       (dict(summary, executorRunTime=[1.0, 2.0]), "executorRunTime"),
                       (dict(summary, quantiles=None), "quantiles"),
                       ([summary], "taskSummary")):
        with pytest.raises(SparkDataError, match=field):
            slowest_task_run_ms(bad)


# -- collect_sample on the skewed query -------------------------------------------------------------


def test_a_skewed_stage_shows_its_busiest_task_and_the_plan_sees_the_skew():
    client = SkewClient()
    sample = _collect(client)
    assert not any("missing from /stages" in e for e in sample.errors), sample.errors
    assert client.stage_statuses == ("complete", "skipped")
    v0, v1 = sample.vertices
    span = sample.window_s
    mean_v1 = v1.busy_s / v1.tasks / span * 1000
    busiest_v1 = v1.busy_max_s / span * 1000
    print(f"\nskew capture, 20 s window: v1 mean {mean_v1:.1f} ms/s, busiest task {busiest_v1:.1f} ms/s "
          f"(x{busiest_v1 / mean_v1:.2f}); v0 x{v0.busy_max_s / (v0.busy_s / v0.tasks):.2f}")
    # 80 % of the rows on one key of 4 tasks on 2 cores: the hot task holds its core while the other
    # core runs the 3 light tasks, so the stage's pace is ~1.6-1.7x its mean busy time.
    assert busiest_v1 > 1.4 * mean_v1
    # The rate source's 2 even partitions: only the jitter of tasks of a few ms, less than the hot key's skew.
    assert v0.busy_max_s / (v0.busy_s / v0.tasks) < busiest_v1 / mean_v1
    assert len(client.summary_calls) <= 32

    inputs = model_inputs([sample], adjustable=lambda v: True)
    m1 = inputs.metrics["v1"]
    assert m1.busy_time_max_ms_per_s == pytest.approx(busiest_v1, rel=1e-6)
    without = {**inputs.metrics, "v1": dataclasses.replace(m1, busy_time_max_ms_per_s=None)}

    def tpr(metrics) -> float:
        plan = plan_micro_batch(inputs.topology, metrics, inputs.cluster, Policy())
        return {vp.vertex_id: vp for vp in plan.vertices}["v1"].true_processing_rate

    # The true processing rate is the busiest task's (FLIP-271 MAX): lower than the mean's by the skew.
    assert tpr(inputs.metrics) / tpr(without) == pytest.approx(
        m1.busy_time_ms_per_s / m1.busy_time_max_ms_per_s, rel=1e-6)


def test_without_task_summaries_the_mean_stands_in_with_one_note_and_few_calls():
    client = SkewClient(summaries_fail=True)
    sample = _collect(client)
    assert all(v.busy_max_s is None for v in sample.vertices)
    assert len(client.summary_calls) == 3                  # gives up after 3 failures
    notes = [e for e in sample.errors if "slowest task" in e]
    assert len(notes) == 1 and "falls back to the mean" in notes[0]
    inputs = model_inputs([sample], adjustable=lambda v: True)
    assert inputs.metrics["v1"].busy_time_max_ms_per_s is None
