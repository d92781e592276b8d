"""Memory, end to end with real Spark: a pipeline whose RocksDB state grows under a 512 MB heap comes
under memory pressure, gets no scale-down while it lasts, and gets a heap recommendation that, applied
through the runner, removes the pressure.

The real runner (``python -m sparkclient run``, a real ``redis-server``) runs
:mod:`tests.sparkclient.runner.memory_pressure_pipeline` with ``memory_mb=512`` (local mode:
``spark.driver.memory``). The web app's own loop steps run in the test's process on the Django test
database, every :data:`BEAT_S` seconds: ``snapshot_collect`` reads the driver's UI and the published
progress, ``evaluation_run`` plans through the memory gate. The job page is rendered with the test
client. The recommended heap is then sent as a rescale command over Redis; the runner applies it by a
warm handover to a new driver, and as many batches are measured on it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pytest

from scaling.planner.memory import hold_under_pressure, window_memory
from scaling.values.memory import MB
from scaling.values.plan import JobPlan
from scaling.values.reasons import Decision, PlanReason
from sparkclient.collector.progress import ran_a_batch, read_progress
from sparkclient.contract.control import read_status, send_command, wait_result
from sparkclient.contract.messages import RescaleCommand, RescalePath
from sparkclient.demo.redisproc import free_port
from tests.repo import ROOT
from tests.waiting import runner_failure, stop_supervisor, wait_for
from tests.webapp.factories import make_user
from webapp.jobs.memory import job_memory, memory_inputs
from webapp.jobs.models import Job
from webapp.jobs.services import job_register
from webapp.loop.collect import snapshot_collect
from webapp.loop.evaluate import evaluation_run

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.django_db, pytest.mark.timeout(1500)]

JOB = "memory-pressure"
PIPELINE = "tests.sparkclient.runner.memory_pressure_pipeline:build"
#: Seconds between two beats of the loop (collect, then evaluate).
BEAT_S = 10.0
#: The tight run stops once this many evaluations in a row were under pressure (a pressure that
#: lasts, not one window), or after MAX_RUN_BATCHES; the roomy run is measured for as many batches.
PRESSURE_BEATS = 2
#: The tight run's longest run, in batches: 180 s at the pipeline's 2 s trigger on a quiet host, longer
#: on a busy one. The run is bounded by its progress, not by the clock.
MAX_RUN_BATCHES = 90
MEMORY_PRESSURE = PlanReason.MEMORY_PRESSURE.value
#: The standby's warm-up on the pipeline's plan, in batches (``run --warm-up-batches``): the test
#: measures the heap after the handover, not how warm the new JVM's first batches are.
WARM_UP_BATCHES = 2


def _beat(job: Job, beats: list[dict], started: float) -> None:
    """One beat of the live loop (collect, then evaluate), its figures appended to ``beats``."""
    snapshot = snapshot_collect(job=job)
    if snapshot is None:
        return
    job.refresh_from_db()
    evaluation = evaluation_run(job=job)
    beats.append({
        "t_s": round(time.monotonic() - started, 1), "run_id": snapshot.run_id, "batches": snapshot.batches,
        "gc_share": snapshot.gc_share, "heap_peak_mb": snapshot.heap_peak_bytes and snapshot.heap_peak_bytes / MB,
        "heap_max_mb": snapshot.heap_max_bytes and snapshot.heap_max_bytes / MB,
        "evaluation": evaluation and {"decision": evaluation.decision, "direction": evaluation.direction,
                                      "codes": [r["code"] for r in evaluation.reasons]}})


def _run_batches(client, run_id: str) -> int:
    """Batches the run ``run_id`` completed, from its published progress."""
    return sum(1 for p in read_progress(client, JOB) if p.get("runId") == run_id and ran_a_batch(p))


def _beat_until(job: Job, beats: list[dict], *, client, run_id: str, until) -> int:
    """Beat until ``until(batches the run completed)`` holds; returns those batches."""
    started = time.monotonic()
    while True:
        time.sleep(BEAT_S)
        _beat(job, beats, started)
        batches = _run_batches(client, run_id)
        if until(batches):
            return batches


def _page_figures(html: str) -> dict:
    figures = {name: re.search(pattern, html) for name, pattern in (
        ("gc_share", r'id="gc-share" data-share="([0-9.]+)"'), ("heap_peak_mb", r'id="heap-peak" data-mb="([0-9]+)"'),
        ("pressure", r'id="memory-pressure" data-code="([a-z-]+)"'),
        ("recommended_mb", r'data-recommended-mb="([0-9]+)"'))}
    return {name: match.group(1) if match else None for name, match in figures.items()}


@pytest.fixture
def runner(workflow_redis, redis_server, tmp_path, settings):
    """The job registered, and its runner started with a 512 MB heap; stopped (and checked gone) after."""
    settings.SCALER_COLLECT_INTERVAL_S, settings.SCALER_STABILIZATION_S = BEAT_S, BEAT_S
    port = free_port()
    job = job_register(name=JOB, spark_ui_hosts=["127.0.0.1"], spark_ui_ports=f"{port}-{port + 16}",
                       policy={"metric_window_s": 2 * BEAT_S})
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYSPARK_PYTHON": sys.executable}
    supervisor = subprocess.Popen(
        [sys.executable, "-m", "sparkclient", "run", "--pipeline", PIPELINE, "--job", JOB, "--redis-url",
         redis_server.url, "--workdir", str(tmp_path / "job"), "--ui-port", str(port), "--knob", "memory_mb=512",
         "--warm-up-batches", str(WARM_UP_BATCHES)],
        cwd=ROOT, env=env)
    try:
        yield job, supervisor, workflow_redis, tmp_path / "job" / "driver.log"
    finally:
        stop_supervisor(supervisor, timeout_s=120)
        print(f"driver log: {tmp_path / 'job' / 'driver.log'}")


def test_memory_pressure_blocks_scale_downs_and_the_recommended_heap_removes_it(runner, client):
    job, supervisor, redis_client, driver_log = runner
    threshold = job.policy.memory_gc_pressure_threshold
    status = wait_for(lambda: supervisor.poll() is None and read_status(redis_client, JOB).running
                      and read_status(redis_client, JOB), timeout_s=180, what="the runner to run the pipeline",
                      failed=runner_failure(redis_client, JOB, driver_log))
    tight: list[dict] = []

    def under_pressure(beat: dict) -> bool:
        codes = (beat["evaluation"] or {}).get("codes") or []
        return (beat["gc_share"] or 0) > threshold and MEMORY_PRESSURE in codes

    def pressure_now(batches: int) -> bool:
        newest = tight[-PRESSURE_BEATS:]
        return batches >= MAX_RUN_BATCHES or (len(newest) == PRESSURE_BEATS and all(map(under_pressure, newest)))

    tight_batches = _beat_until(job, tight, client=redis_client, run_id=status.run_id, until=pressure_now)
    job.refresh_from_db()
    print("\n512 MB:", json.dumps(tight, indent=None))

    # measured: the GC share of task time above the threshold, in the collector's own windows
    shares = [b["gc_share"] for b in tight if b["gc_share"] is not None]
    assert max(shares) > threshold, tight
    # the gate: no evaluation under pressure scales down, and a scale-down plan is blocked with its reason
    gated = [b["evaluation"] for b in tight if b["evaluation"] and MEMORY_PRESSURE in b["evaluation"]["codes"]]
    assert gated, tight
    assert not [e for e in gated if e["decision"] == Decision.SCALE and e["direction"] == "down"], gated
    assert not [p for p in job.proposals.all()
                if any(p.proposed_config.get(k, 0) < v for k, v in p.current_config.items() if k != "memory_mb")]
    window = window_memory(memory_inputs(job=job, snapshots=list(job.snapshots.order_by("collected_at"))))
    pressure = window.pressure if window is not None else None
    assert pressure is not None
    scale_down = JobPlan(decision=Decision.SCALE, reasons=(), vertices=(), executors_current=2, executors_proposed=1)
    blocked = hold_under_pressure(scale_down, pressure, scales_up=False)
    assert blocked.decision == Decision.BLOCKED and blocked.reasons[0].code == PlanReason.MEMORY_PRESSURE
    # the recommendation, and the job page with the numbers
    memory = job_memory(job=job)
    assert memory is not None and memory.pressure is not None and memory.recommendation is not None, memory
    heap = memory.recommendation
    assert heap.current_mb == 512 < heap.recommended_mb, heap
    client.force_login(make_user("viewer", role="viewer"))
    page = client.get(f"/jobs/{job.pk}/")
    assert page.status_code == 200
    shown = _page_figures(page.content.decode())
    print("page:", shown, "recommendation:", heap.to_json())
    assert float(shown["gc_share"]) > threshold and int(shown["heap_peak_mb"]) > 0, shown
    assert shown["pressure"] == MEMORY_PRESSURE and shown["recommended_mb"] == str(heap.recommended_mb), shown

    # applied through the runner: a new driver with the new heap, by the warm handover; or by a driver
    # restart when the tight driver's JVM ran out of heap before its standby was ready (a busy host)
    knobs = {**read_status(redis_client, JOB).knobs, "memory_mb": heap.recommended_mb}
    asked = time.monotonic()
    send_command(redis_client, JOB, RescaleCommand(id="memory-1", knobs=knobs))
    result = wait_result(redis_client, JOB, "memory-1", timeout_s=600)
    print(f"rescale: {result} in {time.monotonic() - asked:.1f} s")
    assert result.succeeded and result.path in (RescalePath.DRIVER_HANDOVER, RescalePath.DRIVER_RESTART), result
    status = read_status(redis_client, JOB)
    assert status.knobs["memory_mb"] == heap.recommended_mb

    roomy: list[dict] = []
    roomy_batches = _beat_until(job, roomy, client=redis_client, run_id=status.run_id,
                                until=lambda batches: batches >= tight_batches)
    print(f"{heap.recommended_mb} MB:", json.dumps(roomy, indent=None))
    measured = [b for b in roomy if b["run_id"] == status.run_id and b["gc_share"] is not None]
    assert measured and roomy_batches >= tight_batches
    assert max(b["gc_share"] for b in measured) <= threshold, measured
    assert all(abs(b["heap_max_mb"] - heap.recommended_mb) < 64 for b in measured if b["heap_max_mb"]), measured
    assert job_memory(job=job).pressure is None
    assert not [b for b in roomy if b["evaluation"] and MEMORY_PRESSURE in b["evaluation"]["codes"]
                and b["run_id"] == status.run_id], roomy
