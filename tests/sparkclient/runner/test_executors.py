"""In-place executor scaling on a standalone cluster started like ``make cluster``: 2 -> 1 -> 2
while a stateful query keeps running, checked on ``/api/v1/applications/<id>/executors``.
The choice of executors to remove is unit-tested on the Spark 4.3.0 standalone captures."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from sparkclient.demo.cluster import load_cluster, stop_cluster
from sparkclient.demo.redisproc import free_port
from sparkclient.runner.executors import (
    ExecutorChange,
    ExecutorScaler,
    ExecutorScalingError,
    active_executor_ids,
    choose_victims,
    state_executors,
)
from tests.capture_paths import spark_json
from tests.repo import ROOT
from tests.waiting import wait_for

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def test_active_executors_of_a_standalone_capture() -> None:
    assert active_executor_ids(spark_json("sa_noda_allexecutors.json")) == ["1", "2"]


def test_executors_without_state_go_first() -> None:
    executors = [{"id": "driver"}, {"id": "0", "activeTasks": 0}, {"id": "1", "activeTasks": 0},
                 {"id": "2", "activeTasks": 1}, {"id": "3", "isActive": False}]
    tasks = [[{"executorId": "0", "status": "SUCCESS"}, {"executorId": "0", "status": "SUCCESS"},
              {"executorId": "2", "status": "SUCCESS"}, {"executorId": "1", "status": "FAILED"}]]
    holders = state_executors(tasks)
    assert holders == {"0": 2, "2": 1}
    assert choose_victims(executors, 1, holders) == ["1"]  # holds no state
    assert choose_victims(executors, 2, holders) == ["1", "2"]  # then the fewest state partitions
    assert choose_victims(executors, 1) == ["1"]  # no state known: idlest, newest first
    with pytest.raises(ValueError, match="cannot remove 4 of 3"):
        choose_victims(executors, 4, holders)


def test_task_list_capture_gives_state_holders() -> None:
    holders = state_executors([spark_json("p1_app_stages_29_0_taskList.json")])
    assert holders == {"driver": 3}  # local mode: the driver ran the 3 tasks listed


class _Limited(ExecutorScaler):
    """An ExecutorScaler without Spark: ``granted`` answers the request, ``appear`` lists the
    active executors REST shows at each poll."""

    def __init__(self, granted: bool, appear: list[list[str]]) -> None:  # not super().__init__: it needs Spark
        self.min_executors, self.granted, self.appear, self.asked = 1, granted, list(appear), []

    def _request_total(self, total: int) -> bool:
        self.asked.append(total)
        return self.granted

    def active(self) -> list[str]:
        return self.appear.pop(0) if len(self.appear) > 1 else self.appear[0]


def test_limit_to_asks_for_the_total_and_says_whether_an_executor_came() -> None:
    came = _Limited(True, [[], [], ["0"]])
    assert came.limit_to(2, wait_s=5, poll_s=0.001) and came.asked == [2]
    assert not _Limited(True, [[]]).limit_to(1, wait_s=0.01, poll_s=0.001)
    with pytest.raises(ExecutorScalingError, match="refused the request for 2 executors"):
        _Limited(False, [["0"]]).limit_to(2, wait_s=1)


def test_trim_to_removes_only_the_executors_above_the_total() -> None:
    """An executor that registered after the total was asked for is removed; at or below it, nothing."""
    class Trimmed(_Limited):
        def scale_to(self, total, **_kw):
            self.asked.append(total)
            return ExecutorChange(before=len(self.appear[0]), after=total, removed=("1",), duration_s=0.1)

    above = Trimmed(True, [["0", "1"]])
    assert above.trim_to(1) == ("1",) and above.asked == [1]
    for active in (["0"], []):
        at = Trimmed(True, [active])
        assert at.trim_to(1) == () and at.asked == []


# -- real Spark on a standalone cluster --------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("cluster")
    started = subprocess.run(
        [sys.executable, "-m", "sparkclient.demo.cluster", "start", "--workdir", str(workdir), "--worker-cores", "4",
         "--worker-memory", "2g", "--master-port", str(free_port()), "--master-ui-port", str(free_port()),
         "--worker-ui-port", str(free_port())],
        cwd=ROOT, capture_output=True, text=True, timeout=240, check=False)
    assert started.returncode == 0, started.stdout + started.stderr
    running = load_cluster(workdir)
    assert running is not None
    yield running
    stop_cluster(running)
    assert not (workdir / "cluster.json").exists()


def _executors(spark) -> list[dict]:
    sc = spark.sparkContext
    return httpx.get(f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/executors", timeout=10).json()




@pytest.mark.spark
@pytest.mark.timeout(600)
def test_executor_count_changes_in_place_while_the_query_runs(cluster, tmp_path: Path) -> None:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = (SparkSession.builder.master(cluster.master_url).appName("test-executors")
             .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.ui.port", str(free_port())).config("spark.ui.showConsoleProgress", "false")
             .config("spark.executor.cores", "1").config("spark.executor.memory", "512m")
             .config("spark.cores.max", "2").config("spark.dynamicAllocation.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.streaming.stateStore.providerClass", ROCKSDB)
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    query = None
    try:
        scaler = ExecutorScaler(spark, min_executors=1)
        wait_for(lambda: len(active_executor_ids(_executors(spark))) == 2, timeout_s=120, what="2 executors at start")
        query = (spark.readStream.format("rate").option("rowsPerSecond", 20).option("numPartitions", 2).load()
                 .groupBy((F.col("value") % 5).alias("k")).count()
                 .writeStream.format("noop").outputMode("update")
                 .option("checkpointLocation", str(tmp_path / "ck")).trigger(processingTime="1 second").start())

        def batches() -> int:
            return max((p["batchId"] for p in query.recentProgress if p["numInputRows"] > 0), default=-1)

        wait_for(lambda: batches() >= 2, timeout_s=180, what="two batches with data")
        # The runner's own lookup: the newest batch whose jobs all succeeded (the newest batch of all
        # may still be running with no task launched, which once made this test read {}).
        holders = scaler.newest_state_holders(str(query.runId))
        assert sum(holders.values()) == 2  # the 2 state partitions, on the executors
        assert set(holders) <= set(scaler.active())

        with pytest.raises(ExecutorScalingError, match="below"):
            scaler.scale_to(0)

        down = scaler.scale_to(1, state_tasks=holders)
        print(f"executors 2 -> 1 in {down.duration_s:.2f} s, removed {down.removed}, state tasks {holders}")
        kept = active_executor_ids(_executors(spark))
        assert len(kept) == 1 and kept[0] not in down.removed
        if len(holders) == 1 or len(set(holders.values())) > 1:  # an executor held more state: it stays
            assert kept[0] == max(holders, key=holders.get)
        mark = batches()
        wait_for(lambda: batches() >= mark + 2, timeout_s=180, what="two batches on 1 executor")
        assert query.isActive and query.exception() is None

        up = scaler.scale_to(2)
        print(f"executors 1 -> 2 in {up.duration_s:.2f} s")
        assert len(active_executor_ids(_executors(spark))) == 2
        mark = batches()
        wait_for(lambda: batches() >= mark + 2, timeout_s=180, what="two batches on 2 executors again")
        assert query.isActive and query.exception() is None

        sc = spark.sparkContext
        every = httpx.get(f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/allexecutors", timeout=10).json()
        gone = {e["id"]: e for e in every if not e["isActive"]}
        assert set(down.removed) <= set(gone)
        assert all(gone[i].get("removeReason") for i in down.removed)
        master = cluster.master_json()
        (app,) = [a for a in master["activeapps"] if a["id"] == sc.applicationId]
        assert app["cores"] == 2
    finally:
        if query is not None:
            query.stop()
        spark.stop()


@pytest.mark.spark
@pytest.mark.timeout(900)
def test_the_runner_changes_a_user_pipelines_executors_in_place(cluster, tmp_path: Path, redis_server,
                                                                 redis_client) -> None:
    """A cores change of a user's pipeline on the standalone cluster is applied
    in place by ``python -m sparkclient run``: same run id, the change time measured."""
    from sparkclient.contract.control import read_status, send_command, wait_result
    from sparkclient.contract.messages import RescaleCommand, RescalePath
    from sparkclient.demo.examples.files_load import write_file
    from tests.own_pipeline import write_module

    outside = tmp_path / "elsewhere"  # the user's own folder, not the project
    pipeline = write_module(outside)
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    rng = random.Random(1)
    job = "inplace"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(outside), str(ROOT)]), CLICKS_INBOX=str(inbox),
               PYSPARK_PYTHON=sys.executable)
    supervisor = subprocess.Popen(
        [sys.executable, "-m", "sparkclient", "run", "--pipeline", pipeline, "--job", job, "--master",
         cluster.master_url, "--master-ui", cluster.master_ui, "--redis-url", redis_server.url,
         "--workdir", str(tmp_path / "job"), "--ui-port", str(free_port()), "--knob", "cost_us=0",
         "--conf", "spark.decommission.enabled=true"],
        cwd=outside, env=env)
    try:
        seq = iter(range(1, 10_000))

        def batches_with_data() -> bool:
            write_file(inbox, next(seq), 20, rng)  # a file a second: steady load
            return read_status(redis_client, job).running and redis_client.xlen(f"ss:progress:{job}") >= 3

        wait_for(batches_with_data, timeout_s=300, interval_s=1, what="the user pipeline's first batches")
        before = read_status(redis_client, job)
        assert before.master == cluster.master_url and before.knobs["cores"] == 1
        assert before.capacity >= 2  # the master's free cores
        send_command(redis_client, job, RescaleCommand(id="up", knobs={**before.knobs, "cores": 2}))
        result = wait_result(redis_client, job, "up", timeout_s=240)
        print(f"in place: cores 1 -> 2 in {result.executor_change_s} s, {result}")
        assert result.succeeded and result.path is RescalePath.IN_PLACE, result
        assert result.downtime_s == 0 and result.executor_change_s and result.executor_change_s > 0
        after = read_status(redis_client, job)
        assert after.run_id == before.run_id and after.knobs["cores"] == 2  # the query never stopped
        mark = redis_client.xlen(f"ss:progress:{job}")

        def more_batches() -> bool:
            write_file(inbox, next(seq), 20, rng)
            return redis_client.xlen(f"ss:progress:{job}") >= mark + 2

        wait_for(more_batches, timeout_s=120, interval_s=1, what="two more batches after the change")
        assert read_status(redis_client, job).run_id == before.run_id
        master = cluster.master_json()
        assert [a["cores"] for a in master["activeapps"] if a["id"] == after.app_id] == [2]

        # and back down through Spark's graceful decommission (spark.decommission.enabled)
        send_command(redis_client, job, RescaleCommand(id="down", knobs={**after.knobs, "cores": 1}))
        down = wait_result(redis_client, job, "down", timeout_s=240)
        print(f"in place, decommissioned: cores 2 -> 1 in {down.executor_change_s} s")
        assert down.succeeded and down.path is RescalePath.IN_PLACE, down.error
        assert read_status(redis_client, job).run_id == before.run_id
        mark = redis_client.xlen(f"ss:progress:{job}")
        wait_for(more_batches, timeout_s=120, interval_s=1, what="two more batches on one executor")
        sc_url = f"{after.ui_url}/api/v1/applications/{after.app_id}/allexecutors"
        gone = [e for e in httpx.get(sc_url, timeout=10).json() if not e["isActive"] and e["id"] != "driver"]
        assert gone and all("decommission" in (e.get("removeReason") or "").lower() for e in gone), gone
    finally:
        supervisor.send_signal(signal.SIGTERM)
        assert supervisor.wait(timeout=120) == 0
