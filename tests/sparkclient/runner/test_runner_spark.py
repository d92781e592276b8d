"""The runner end to end: real Spark, real Redis, the generator and the supervisor as processes.

Checks the in-process rescale (tasks per stage change, the stateful stage keeps its partitions
and state rows), the offline state repartition of the RocksDB state through the runner, the
driver-restart path, the downtime measurement, exactly-once counting into the sink, and that
stopping the supervisor leaves no JVM behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from sparkclient.collector.progress import read_progress
from sparkclient.contract.binding import BindingStatus, StageInput, bind_stages, plan_stages_from_json
from sparkclient.contract.control import read_status, send_command, wait_result
from sparkclient.contract.messages import RescaleCommand, RescalePath
from sparkclient.contract.sparkconf import ROCKSDB_BOUNDED_CONF, ROCKSDB_MAX_MEMORY_CONF
from sparkclient.contract.spec import load_pipeline
from sparkclient.demo.generator import read_counts
from sparkclient.demo.redislog import PartitionedLog
from sparkclient.demo.redisproc import free_port
from sparkclient.demo.sink import sink_total
from tests.repo import ROOT
from tests.waiting import runner_failure, wait_for

pytestmark = [pytest.mark.spark, pytest.mark.timeout(1800)]

JOB, TOPIC = "t-demo", "t-nexmark"
PIPELINE = "sparkclient.demo.examples.nexmark:build"
#: The standby's warm-up on the pipeline's plan, in batches (``run --warm-up-batches``): the test
#: checks the handover's path, pause and exactly once, not how warm the new JVM's first batches are.
WARM_UP_BATCHES = 2
#: How long a Spark UI answer may take on a busy shared host, seconds: an answer is what the test waits for.
ANSWER_S = 60


def send_rescale(client, job: str, command_id: str, knobs: dict) -> None:
    send_command(client, job, RescaleCommand(id=command_id, knobs={**SETTINGS, **knobs}))


SETTINGS = {"trigger_interval_s": 2, "enrich_latency_ms": 2, "max_records_per_batch": 0}
BOUNDED, MAX_MEMORY = ROCKSDB_BOUNDED_CONF, ROCKSDB_MAX_MEMORY_CONF




def _batches(client, run_id: str | None = None) -> list[dict]:
    return [p for p in read_progress(client, JOB)
            if "addBatch" in p["durationMs"] and (run_id is None or p["runId"] == run_id)]


def _last_job_stage_tasks(status) -> list[int]:
    """Tasks per stage of the last completed batch job, in stage order (source, enrich, state)."""
    url = f"{status.ui_url}/api/v1/applications/{status.app_id}/jobs"
    jobs = [j for j in httpx.get(url, timeout=ANSWER_S).json() if j["status"] == "SUCCEEDED"]
    last = max(jobs, key=lambda j: j["jobId"])
    stages_url = f"{status.ui_url}/api/v1/applications/{status.app_id}/stages"
    stages = {s["stageId"]: s for s in httpx.get(stages_url, timeout=ANSWER_S).json()}
    return [stages[sid]["numTasks"] for sid in sorted(last["stageIds"])]


def _spark_setting(status, key: str) -> str | None:
    """``key`` of the running application's Spark properties (the REST API's ``/environment``)."""
    url = f"{status.ui_url}/api/v1/applications/{status.app_id}/environment"
    return dict(httpx.get(url, timeout=ANSWER_S).json()["sparkProperties"]).get(key)


def _kill_standby(handover: str, timeout_s: float = 120.0) -> None:
    """SIGKILL the standby driver of ``handover`` (``--standby ID`` on its command line) once it appears."""
    import psutil

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for proc in psutil.process_iter(["cmdline"]):
            cmdline = proc.info["cmdline"] or []
            if "--standby" in cmdline and cmdline[cmdline.index("--standby") + 1:][:1] == [handover]:
                proc.kill()
                return
        time.sleep(0.2)


def _process_group_members(pgid: int) -> list[tuple[int, str]]:
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid:  # fields after "comm)": state, ppid, pgrp, ...
            members.append((int(entry.name), stat.split("(", 1)[1].rsplit(")", 1)[0]))
    return members


def test_rescale_paths_and_exactly_once(redis_server, redis_client, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    generator = subprocess.Popen(
        [sys.executable, "-m", "sparkclient.demo.generator", "--redis-url", redis_server.url, "--topic", TOPIC,
         "--partitions", "4", "--rate", "150"], cwd=ROOT, env=env)
    supervisor = subprocess.Popen(
        [sys.executable, "-m", "sparkclient", "run", "--pipeline", PIPELINE, "--job", JOB,
         "--redis-url", redis_server.url, "--workdir", str(tmp_path / "job"), "--ui-port", str(free_port()),
         "--knob", "cores=1", "--knob", "source_partitions=1", "--knob", "enrich_partitions=1",
         "--knob", "state_partitions=2", "--warm-up-batches", str(WARM_UP_BATCHES)],
        cwd=ROOT, env={**env, "NEXMARK_TOPIC": TOPIC})
    driver_groups: set[int] = set()
    crashed = runner_failure(redis_client, JOB, tmp_path / "job" / "driver.log")
    try:
        wait_for(lambda: len(_batches(redis_client)) >= 2, timeout_s=300, what="two batches of the first driver",
                 failed=crashed)
        status = read_status(redis_client, JOB)
        assert status.running and status.ui_url.startswith("http://127.0.0.1:")
        driver_groups.add(status.pid)
        first_run = status.run_id
        assert _last_job_stage_tasks(status) == [1, 1, 2]
        # the physical plan gives the stages, and each binds to its knob, confirmed by the tasks ran
        plan = plan_stages_from_json(wait_for(lambda: read_status(redis_client, JOB).plan_stages, timeout_s=30,
                                              what="the plan's stages", failed=crashed))
        assert [(s.input, s.partitions, s.stateful) for s in plan] == [
            (StageInput.SOURCE, None, False), (StageInput.REPARTITION, 1, False), (StageInput.SHUFFLE, 2, True)]
        knobs = load_pipeline(PIPELINE).knobs
        bindings = bind_stages(plan, knobs, status.knobs, [1, 1, 2])
        assert [(b.knob, b.status) for b in bindings] == [
            ("source_partitions", BindingStatus.BOUND), ("enrich_partitions", BindingStatus.BOUND),
            ("state_partitions", BindingStatus.BOUND)]
        # a knob value that is not what Spark ran is a mismatch, never a silent binding
        assert bind_stages(plan, knobs, {**status.knobs, "enrich_partitions": 4}, [1, 1, 2])[1].status \
            is BindingStatus.MISMATCH
        assert status.capacity == (os.cpu_count() or 1) and status.trigger_interval_s == 2.0
        # the demo's state_memory knob bounds RocksDB from the driver's start (one cache for the JVM)
        assert (_spark_setting(status, BOUNDED), _spark_setting(status, MAX_MEMORY)) == ("true", "256")

        # refused before anything stops: a knob outside its bounds, executors above the capacity
        send_rescale(redis_client, JOB, "r0", {"cores": 1, "source_partitions": 99})
        refused = wait_result(redis_client, JOB, "r0", timeout_s=120)
        assert not refused.succeeded and refused.code == "out-of-bounds" and "source_partitions" in refused.error
        send_rescale(redis_client, JOB, "r0b", {"cores": 8})
        refused = wait_result(redis_client, JOB, "r0b", timeout_s=120)
        assert not refused.succeeded and refused.code == "above-capacity", refused
        assert read_status(redis_client, JOB).run_id == first_run

        # in-process: other source partitions and repartition count, same state partitions
        send_rescale(redis_client, JOB, "r1", {"cores": 1, "source_partitions": 2, "enrich_partitions": 3,
                                              "state_partitions": 2})
        result = wait_result(redis_client, JOB, "r1", timeout_s=300)
        print("in-process rescale:", result)
        assert result.succeeded, result
        assert result.path is RescalePath.IN_PROCESS and result.downtime_s > 0
        assert result.knobs["enrich_partitions"] == 3
        second_run = read_status(redis_client, JOB).run_id
        assert second_run != first_run
        # the runner finishes the batch in flight before it stops: the first run's last batch is known only now
        before = _batches(redis_client, first_run)[-1]
        after = wait_for(lambda: _batches(redis_client, second_run), timeout_s=60,
                         what="a batch of the restarted query", failed=crashed)[0]
        assert _last_job_stage_tasks(read_status(redis_client, JOB)) == [2, 3, 2]
        # the stateful vertex kept its partitions and its state rows (the first batch after the
        # restart can only add rows it updated and drop rows it removed)
        (state_before,), (state_after,) = before["stateOperators"], after["stateOperators"]
        assert state_before["numShufflePartitions"] == state_after["numShufflePartitions"] == 2
        assert state_before["numRowsTotal"] > 0
        rows_delta = state_after["numRowsTotal"] - state_before["numRowsTotal"]
        removed, updated = state_after["numRowsRemoved"], state_after["numRowsUpdated"]
        assert -removed <= rows_delta <= updated, (state_before, state_after)

        # state partitions: repartitioned offline (RocksDB) between the stop and the restart
        send_rescale(redis_client, JOB, "r2", {"cores": 1, "source_partitions": 2, "enrich_partitions": 3,
                                              "state_partitions": 3})
        result = wait_result(redis_client, JOB, "r2", timeout_s=300)
        print("in-process rescale with offline state repartition:", result)
        assert result.succeeded, result
        assert result.path is RescalePath.STATE_REPARTITION and result.downtime_s > 0
        third_run = read_status(redis_client, JOB).run_id
        after = wait_for(lambda: _batches(redis_client, third_run), timeout_s=60,
                         what="a batch after the repartition", failed=crashed)[0]
        assert after["stateOperators"][0]["numShufflePartitions"] == 3
        assert _last_job_stage_tasks(read_status(redis_client, JOB)) == [2, 3, 3]

        # driver restart: cores change, and the state memory, which only a new JVM takes
        send_rescale(redis_client, JOB, "r3", {"cores": 2, "source_partitions": 2, "enrich_partitions": 3,
                                              "state_partitions": 3, "state_memory_mb": 128})
        result = wait_result(redis_client, JOB, "r3", timeout_s=400)
        print("driver-restart rescale:", result)
        assert result.succeeded, result
        assert result.path is RescalePath.DRIVER_HANDOVER and result.downtime_s >= result.pause_s > 0
        status = read_status(redis_client, JOB)
        driver_groups.add(status.pid)
        assert status.run_id not in (first_run, second_run, third_run)
        assert status.knobs["cores"] == 2 and status.knobs["state_memory_mb"] == 128
        assert _spark_setting(status, MAX_MEMORY) == "128"
        print(f"warm handover: pause {result.pause_s:.2f} s, downtime {result.downtime_s:.2f} s")

        # two drivers, one checkpoint: a second driver for the same job never gets the lease
        intruder = subprocess.run(
            [sys.executable, "-m", "sparkclient", "run", "--driver", "--pipeline", PIPELINE, "--job", JOB,
             "--redis-url", redis_server.url, "--workdir", str(tmp_path / "job"), "--ui-port", str(free_port()),
             "--capacity", "2"], cwd=ROOT, env={**env, "NEXMARK_TOPIC": TOPIC}, capture_output=True, text=True,
            timeout=120)
        assert intruder.returncode != 0
        assert "another driver holds the checkpoint lease" in intruder.stdout + intruder.stderr
        assert read_status(redis_client, JOB).run_id == status.run_id and read_status(redis_client, JOB).running

        # a standby that dies before the handover: the running driver carries on, the command fails cleanly
        killer = threading.Thread(target=_kill_standby, args=("r4",), daemon=True)
        killer.start()
        send_rescale(redis_client, JOB, "r4", {"cores": 1, "source_partitions": 2, "enrich_partitions": 3,
                                              "state_partitions": 3})
        failed = wait_result(redis_client, JOB, "r4", timeout_s=400)
        assert not failed.succeeded and failed.code == "restart-failed" and "standby" in failed.error, failed
        after_failure = read_status(redis_client, JOB)
        assert after_failure.run_id == status.run_id and after_failure.knobs["cores"] == 2 and after_failure.running

        # stop the generator; the query drains; every bid is counted exactly once
        generator.send_signal(signal.SIGTERM)
        assert generator.wait(timeout=15) == 0
        bids = read_counts(redis_client, TOPIC)["bid"]
        latest = PartitionedLog(redis_client, TOPIC).latest_offsets()
        sink = str(tmp_path / "job" / "sink.sqlite")

        def drained() -> bool:
            batches = _batches(redis_client)
            return bool(batches) and batches[-1]["sources"][0]["endOffset"] == latest and sink_total(sink) == bids

        wait_for(drained, timeout_s=60, what=f"the sink to reach {bids} bids (now {sink_total(sink)})", failed=crashed)
        time.sleep(3)  # stays stable: nothing is counted twice
        assert sink_total(sink) == bids
        assert PartitionedLog(redis_client, TOPIC).lost() == 0
    finally:
        for proc in (generator, supervisor):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        generator.wait(timeout=15)
        rc = supervisor.wait(timeout=120)
    assert rc == 0
    assert read_status(redis_client, JOB).state == "stopped"
    survivors = [m for g in driver_groups for m in _process_group_members(g)]
    assert not survivors, f"processes of the drivers survived the supervisor: {survivors}"
