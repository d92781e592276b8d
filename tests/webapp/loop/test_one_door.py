"""The one door: a recorded window decides the same plan in the live loop (``evaluation_run``), in
``python -m scaling evaluate --plans`` and in the simulator's controller, byte for byte."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from scaling.scenario.write import scenario_of
from scaling.sim.engine import Config, Observation, PolicyController
from scaling.values.memory import MB
from scaling.values.reasons import MemoryStep, PlanReason
from tests.webapp.factories import HEAP_KNOB, KNOBS, make_snapshots
from webapp.jobs.models import Job, MetricSnapshot
from webapp.jobs.services import job_register
from webapp.loop import evaluate

pytestmark = pytest.mark.django_db

#: The heap knob, with room to grow to 64 GB.
WIDE_HEAP_KNOB = {**HEAP_KNOB, "max": 65536}


def _job_and_window(case: str) -> tuple[Job, list[MetricSnapshot]]:
    """A job with a heap knob (``memory_apply`` on) and a window whose load is above the band: under
    GC pressure (``pressure``), or with a first batch after a start in it (``not-ready``)."""
    job = job_register(name=case, topic="nexmark", query_name=f"{case}-query", knobs=[*KNOBS, WIDE_HEAP_KNOB],
                       config={"cores": 1, "source_partitions": 1, "enrich_partitions": 1, "state_partitions": 2,
                               "trigger_interval_s": 2, "heap_mb": 1024},
                       policy={"metric_window_s": 45, "memory_apply": True})
    snapshots = make_snapshots(job)
    pks = [s.pk for s in snapshots]
    if case == "pressure":
        MetricSnapshot.objects.filter(pk__in=pks).update(gc_share=0.45, heap_peak_bytes=1000 * MB,
                                                         heap_max_bytes=1024 * MB, state_memory_bytes=300 * MB)
    else:
        MetricSnapshot.objects.filter(pk__in=pks).update(gc_share=0.02, heap_peak_bytes=400 * MB,
                                                         heap_max_bytes=1024 * MB)
        MetricSnapshot.objects.filter(pk=pks[1]).update(not_ready=[{"code": "first-batch", "data": {"batch_id": 0}}])
    return Job.objects.select_related("policy").get(pk=job.pk), snapshots


def _simulated(request) -> dict:
    """The plan of the simulator's controller on the request's window, as the engine would show it."""
    controller = PolicyController(request.policy, mode=request.mode, memory=request.memory.policy,
                                  heap_knob=WIDE_HEAP_KNOB["name"])
    heap = request.memory.knob(request.memory.knobs[0].kind).running_mb
    cores = request.cluster.executors * request.cluster.cores_per_executor
    controller.decide(Observation(
        now_s=request.now_s, config=Config({v.id: v.parallelism for v in request.topology.vertices}, cores, heap),
        topology=request.topology, cluster=request.cluster, metrics=request.metrics,
        batch_durations_s=request.batch_durations_s, memory=request.memory.readings, not_ready=request.not_ready))
    return controller.plans[-1][1].to_json()


def _scenario_cli(request) -> dict:
    out = subprocess.run([sys.executable, "-m", "scaling", "evaluate", "-", "--plans"], check=True, text=True,
                         input=json.dumps(scenario_of(request)), capture_output=True, timeout=60)
    return json.loads(out.stdout)["plans"][0]


@pytest.mark.parametrize("case", ["pressure", "not-ready"])
def test_the_loop_the_scenario_cli_and_the_simulator_decide_the_same_plan(case):
    job, snapshots = _job_and_window(case)
    now = snapshots[-1].collected_at
    stable = evaluate._evaluable_window(job, now)
    request = evaluate.evaluation_request(evaluate.evaluation_context(job=job, snapshots=stable, now=now))
    live = evaluate.evaluation_run(job=job, now=now).plan
    codes = [r["code"] for r in live["reasons"]]
    if case == "pressure":  # the gate and the heap decision ran: the heap grows alone (DS2 activation holds the cores)
        assert codes[0] == PlanReason.MEMORY_PRESSURE and PlanReason.MEMORY_RESIZE in codes
        assert live["memory_step"] == MemoryStep.ALONE and live["memory_proposed_mb"] == 2048
    else:  # the not-ready sample is named, and no heap decrease is recommended on it
        assert PlanReason.SAMPLES_NOT_READY in codes and live["memory_step"] is None
        assert live["memory_proposed_mb"] is None and PlanReason.MEMORY_RESIZE not in codes
    assert _scenario_cli(request) == live
    assert _simulated(request) == live
