"""Applying the heap recommendation through the proposal lifecycle (``webapp.loop.evaluate`` with
``scaling.planner.memory.with_memory``, ``webapp.proposals.services``): what the loop proposes for each
combination of memory pressure, ``memory_apply``, a declared memory knob and another change; an
operator's "Propose this heap size" and "also apply the memory recommendation"; and no "Apply now" of
a held scale-down under memory pressure."""

from __future__ import annotations

import itertools
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.utils import timezone

from scaling.planner.memory import executors_after
from scaling.values.memory import MB
from scaling.values.reasons import MemoryStep, PlanReason
from tests.webapp.factories import HEAP_KNOB, make_job, make_snapshots, make_user
from tests.webapp.loop.harness import make_harness, steps
from webapp.jobs.memory import job_memory
from webapp.jobs.models import Job, MetricSnapshot
from webapp.loop.evaluate import evaluation_run
from webapp.proposals.codes import AuditReason
from webapp.proposals.guardrails import Guardrails, direction, violated_guardrail
from webapp.proposals.lifecycle import TransitionError
from webapp.proposals.memory import MemoryPressureRefusal
from webapp.proposals.models import Proposal
from webapp.proposals.services import memory_propose, proposal_approve, scale_down_apply_now

pytestmark = pytest.mark.django_db

def _heap_job(name: str, *, knob: bool = True, apply: bool = False, **policy) -> Job:
    """A job with the heap knob (``knob``), ``memory_apply`` set to ``apply``."""
    return make_job(name, knobs=[HEAP_KNOB] if knob else [], metric_window_s=45, memory_apply=apply, **policy)


def _heap_window(job: Job, *, pressure: bool, other: bool, **kwargs) -> list[MetricSnapshot]:
    """Four snapshots of a job keeping up with its load: above the band (``other``: a scale-up) or
    inside it; under pressure GC 50 % with the heap at 1000 of 1024 MB (recommended 2048 MB), else GC
    5 % at 300 MB (recommended 512)."""
    shape = {} if other else {"enrich_busy_s": 5.0, "backlog_step": 0, "batch_duration_s": 1.0}
    snapshots = make_snapshots(job, **{"keeping_up": True, **shape, **kwargs})
    MetricSnapshot.objects.filter(pk__in=[s.pk for s in snapshots]).update(
        gc_share=0.5 if pressure else 0.05, heap_peak_bytes=(1000 if pressure else 300) * MB, heap_max_bytes=1024 * MB)
    return snapshots


def _expected(pressure: bool, apply: bool, knob: bool, other: bool) -> tuple[MemoryStep, int | None]:
    """The memory step and the proposed heap (MB, None: the proposal leaves it or there is none)."""
    if not knob:
        return MemoryStep.NO_KNOB, None
    if not apply:
        return MemoryStep.RECOMMEND_ONLY, None
    if other:
        return MemoryStep.ALONG, 2048 if pressure else 512
    return (MemoryStep.ALONE, 2048) if pressure else (MemoryStep.WAITS, None)


@pytest.mark.parametrize(("pressure", "apply", "knob", "other"), list(itertools.product((True, False), repeat=4)))
def test_whether_and_how_the_loop_proposes_the_heap(pressure, apply, knob, other):
    job = _heap_job("memory", knob=knob, apply=apply)
    _heap_window(job, pressure=pressure, other=other)
    evaluation = evaluation_run(job=job)
    step, heap = _expected(pressure, apply, knob, other)
    plan = evaluation.job_plan
    codes = [r["code"] for r in evaluation.reasons]
    assert plan.memory_step == step
    assert (PlanReason.MEMORY_PRESSURE in codes) == pressure
    assert (PlanReason.MEMORY_RESIZE in codes) == (heap is not None)
    proposal = job.proposals.filter(status="pending").first()
    assert (proposal is not None) == (other or heap is not None)
    if proposal is None:
        return
    assert proposal.proposed_config.get("heap_mb") == (heap if heap is not None else job.config.get("heap_mb"))
    assert (proposal.proposed_config["cores"] > job.config["cores"]) == other  # memory-only without another change
    if heap is not None:
        resize = next(r for r in evaluation.reason_values if r.code == PlanReason.MEMORY_RESIZE)
        assert (resize.data["current_mb"], resize.data["recommended_mb"], resize.data["under_pressure"],
                resize.data["step"]) == (1024, heap, int(pressure), str(step))
        assert evaluation.direction == ("up" if other or heap > 1024 else "down")


@pytest.mark.parametrize("ready", [True, False])
def test_a_decrease_rides_along_only_on_a_window_that_is_ready(ready):
    """memory_apply on, a scale-up that would carry 1024 → 512 MB: on a ready window it does; with a
    sample not ready the scale-up goes, the heap is not right-sized and the reason says why."""
    job = _heap_job("not-ready", apply=True)
    snapshots = _heap_window(job, pressure=False, other=True)
    if not ready:
        MetricSnapshot.objects.filter(pk=snapshots[-1].pk).update(
            not_ready=[{"code": "first-batch", "data": {"batch_id": 0}}])
    evaluation = evaluation_run(job=job)
    assert evaluation.proposed_config["cores"] > job.config["cores"]
    assert evaluation.proposed_config["heap_mb"] == (512 if ready else 1024)
    assert evaluation.job_plan.memory_step == (MemoryStep.ALONG if ready else None)
    withheld = job_memory(job=job).withheld
    assert (withheld.data["cause"], withheld.data["code"]) == ("not-ready", "first-batch") if not ready \
        else withheld is None


def test_an_operator_proposes_the_heap_size_and_the_loop_leaves_it_to_them(client):
    job = _heap_job("roomy")
    _heap_window(job, pressure=False, other=False)
    evaluation_run(job=job)
    assert not job.proposals.exists()  # recommend-only: the loop proposes nothing
    user = make_user()
    client.force_login(user)
    html = client.get(f"/jobs/{job.pk}/").content.decode()
    assert 'id="propose-memory" data-knob="heap_mb" data-mb="512"' in html and 'id="memory-recommend-only"' in html
    response = client.post(f"/jobs/{job.pk}/memory/propose/")
    proposal = job.proposals.get()
    assert response.status_code == 302 and response.url == f"/proposals/{proposal.pk}/"
    assert proposal.status == "pending" and proposal.evaluation is None
    assert proposal.proposed_config == {**job.config, "heap_mb": 512}
    assert [r.code for r in proposal.reason_values] == [PlanReason.MEMORY_RESIZE]
    assert proposal.job_plan.memory_step == MemoryStep.REQUESTED
    event = proposal.audit_events.get(action="proposed")
    assert event.actor_user == user and event.after["heap_mb"] == 512
    page = client.get(f"/proposals/{proposal.pk}/").content.decode()
    effect = page[page.index('id="time-to-effect"'):]
    assert effect[:effect.index("</p>")].count("warm handover to a new driver") == 1  # a heap change's path
    assert '<tr data-knob="heap_mb" class="changed">' in page and "→ <b>512 MB</b>" in page
    history = client.get(f"/jobs/{job.pk}/history/").content.decode()
    assert "→ <b>512 MB</b>" in history and "heap of each JVM that runs tasks" in history
    body = client.get(f"/api/proposals/{proposal.pk}/").json()
    assert body["proposed_config"]["heap_mb"] == 512 and body["current_config"]["heap_mb"] == 1024
    assert (body["plan"]["memory_current_mb"], body["plan"]["memory_proposed_mb"]) == (1024, 512)
    assert body["reasons"][0]["code"] == PlanReason.MEMORY_RESIZE and "1024 → 512 MB" in body["reasons"][0]["text"]
    # evaluations inside the band do not withdraw it, nor does a second request duplicate it
    for _ in range(job.policy.withdraw_after_evaluations + 1):
        _heap_window(job, pressure=False, other=False, end=timezone.now())
        evaluation_run(job=job)
    assert job.proposals.get().status == "pending"
    with pytest.raises(TransitionError, match="is pending"):
        memory_propose(job=job, actor=user)
    proposal_approve(proposal=proposal, actor=user)
    assert Proposal.objects.get(pk=proposal.pk).status == "approved"


def test_no_proposal_of_a_decrease_under_pressure_nor_without_a_knob():
    under = _heap_job("under")
    _heap_window(under, pressure=True, other=False)
    proposal = memory_propose(job=under, actor=make_user())  # an increase under pressure: allowed
    assert proposal.proposed_config["heap_mb"] == 2048
    bare = _heap_job("bare", knob=False)
    _heap_window(bare, pressure=False, other=False)
    with pytest.raises(TransitionError, match="no memory recommendation"):
        memory_propose(job=bare, actor=make_user("other"))


def test_approving_with_the_memory_recommendation_adds_it_and_audits_it(client):
    job = _heap_job("approve")
    _heap_window(job, pressure=False, other=True)
    evaluation_run(job=job)
    proposal = job.proposals.get()
    assert "heap_mb" not in {k for k, v in proposal.proposed_config.items() if job.config.get(k) != v}
    user = make_user()
    client.force_login(user)
    page = client.get(f"/proposals/{proposal.pk}/").content.decode()
    assert 'id="memory-offer" data-knob="heap_mb" data-from-mb="1024" data-to-mb="512"' in page
    assert "also apply the memory recommendation (heap_mb 1,024 → 512 MB" in page
    response = client.post(f"/proposals/{proposal.pk}/decide/", {"action": "approve", "revision": proposal.revision,
                                                                 "with_memory": "on"})
    assert response.status_code == 302
    proposal.refresh_from_db()
    assert proposal.status == "approved" and proposal.proposed_config["heap_mb"] == 512
    assert proposal.proposed_config["cores"] > job.config["cores"]  # the rescale it was approved for stays
    assert proposal.job_plan.memory_step == MemoryStep.REQUESTED
    assert PlanReason.MEMORY_RESIZE in [r.code for r in proposal.reason_values]
    event = proposal.audit_events.get(action="approved")
    assert event.reason["code"] == AuditReason.MEMORY_ADDED and event.after["heap_mb"] == 512
    assert (event.reason["data"]["from_mb"], event.reason["data"]["to_mb"]) == (1024, 512)
    history = client.get(f"/jobs/{job.pk}/history/").content.decode()
    approved = "approved with the memory recommendation: heap of each JVM that runs tasks (heap_mb) 1024 → 512 MB"
    assert approved in history


def test_approving_without_the_box_leaves_the_heap_and_the_box_is_not_offered_twice(client):
    job = _heap_job("plain")
    _heap_window(job, pressure=False, other=True)
    evaluation_run(job=job)
    proposal = job.proposals.get()
    user = make_user()
    proposal_approve(proposal=proposal, actor=user)
    proposal.refresh_from_db()
    assert proposal.proposed_config["heap_mb"] == 1024
    assert proposal.audit_events.get(action="approved").reason == {}
    along = _heap_job("along", apply=True)
    _heap_window(along, pressure=False, other=True)
    evaluation_run(job=along)
    carried = along.proposals.get()
    assert carried.proposed_config["heap_mb"] == 512  # memory_apply: it rides along already
    with pytest.raises(TransitionError, match="no memory recommendation to add"):
        proposal_approve(proposal=carried, actor=user, with_memory=True)
    client.force_login(user)
    answer = client.post(f"/api/proposals/{carried.pk}/approve/", {"with_memory": True},
                         content_type="application/json")
    assert answer.status_code == 409 and Proposal.objects.get(pk=carried.pk).status == "pending"


def _held(job: Job, *, pressure: bool) -> None:
    """A job on 6 cores whose scale-down is held (scale_down_interval_s), then a window under pressure or not."""
    Job.objects.filter(pk=job.pk).update(config={**job.config, "cores": 6, "source_partitions": 6,
                                                 "enrich_partitions": 6})
    job.refresh_from_db()
    later = timezone.now()
    now = later - timedelta(seconds=60)
    make_snapshots(job, enrich_busy_s=3.0, backlog_step=0, cores=6, tasks=(6, 6, 2), keeping_up=True,
                   batch_duration_s=1.0, end=now)
    evaluation_run(job=job, now=now)
    snapshots = make_snapshots(job, enrich_busy_s=3.0, backlog_step=0, cores=6, tasks=(6, 6, 2), keeping_up=True,
                               batch_duration_s=1.0, end=later)
    MetricSnapshot.objects.filter(pk__in=[s.pk for s in snapshots]).update(
        gc_share=0.5 if pressure else 0.05, heap_peak_bytes=1000 * MB, heap_max_bytes=1024 * MB)
    evaluation_run(job=job, now=later)


def test_apply_now_of_a_held_scale_down_is_refused_under_memory_pressure(client):
    calm = _heap_job("calm", knob=False, scale_down_interval_s=3600)
    _held(calm, pressure=False)
    user = make_user()
    assert scale_down_apply_now(job=calm, actor=user).proposed_config["cores"] < 6  # the control

    job = _heap_job("pressed", knob=False, scale_down_interval_s=3600)
    _held(job, pressure=True)
    with pytest.raises(MemoryPressureRefusal) as refused:
        scale_down_apply_now(job=job, actor=user)
    assert refused.value.reason.code == PlanReason.MEMORY_PRESSURE and refused.value.reason.data["gc_share"] == 0.5
    assert not job.proposals.exists()
    client.force_login(user)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert 'id="held-memory-pressure" data-code="memory-pressure"' in page and 'id="apply-scale-down"' not in page
    response = client.post(f"/jobs/{job.pk}/scale-down/apply/", follow=True)
    assert "memory pressure" in response.content.decode() and not job.proposals.exists()


def test_in_the_loop_an_opted_in_job_under_pressure_gets_its_heap_once_and_the_pressure_ends(monkeypatch):
    """The loop harness, auto mode with memory_apply, 100 events/s on 1 core (inside the band): the heap
    is under GC pressure while it runs below 2048 MB. One memory-only proposal 1024 → 2048 MB executes;
    then no pressure, and the smaller size recommended after it waits (no restart for memory alone)."""
    h = make_harness(monkeypatch, trace=steps((900, 100)), policy={"mode": "auto", "memory_apply": True})
    Job.objects.filter(pk=h.job.pk).update(knobs=[*h.job.knobs, HEAP_KNOB], config={**h.job.config, "heap_mb": 1024})
    h.job.refresh_from_db()

    def heap(snapshot: MetricSnapshot) -> None:
        running = snapshot.config.get("heap_mb", 1024)
        tight = running < 2048
        MetricSnapshot.objects.filter(pk=snapshot.pk).update(
            gc_share=0.45 if tight else 0.02, heap_peak_bytes=round(running * (0.98 if tight else 0.6)) * MB,
            heap_max_bytes=running * MB)

    h.snapshot_hooks.append(heap)
    h.run()
    (executed,) = h.executed()
    assert {k for k, v in executed.proposed_config.items() if executed.current_config.get(k) != v} == {"heap_mb"}
    assert executed.proposed_config["heap_mb"] == 2048 and executed.job_plan.memory_step == MemoryStep.ALONE
    assert [r.code for r in executed.reason_values][0] == PlanReason.MEMORY_PRESSURE
    assert h.runner.commands[0]["knobs"]["heap_mb"] == 2048
    h.job.refresh_from_db()
    assert h.job.config["heap_mb"] == 2048 and len(h.proposals()) == 1
    last = h.job.evaluations.order_by("-created_at").first()
    assert PlanReason.MEMORY_PRESSURE not in [r["code"] for r in last.reasons]
    assert last.job_plan.memory_step == MemoryStep.WAITS


@pytest.mark.parametrize(("proposed", "expected"), [
    ({"cores": 1, "work": 4, "heap_mb": 2048}, "up"),     # more memory alone: up
    ({"cores": 1, "work": 4, "heap_mb": 512}, "down"),    # less memory alone: down
    ({"cores": 1, "work": 2, "heap_mb": 2048}, "down"),   # the partitions first, the heap is not a partition
    ({"cores": 2, "work": 4, "heap_mb": 512}, "up"),      # the executors first
    ({"cores": 1, "work": 4, "heap_mb": 1024}, "none"),
])
def test_a_heap_change_is_up_or_down_after_the_executors_and_the_partitions(proposed, expected):
    guardrails = Guardrails(scaled_knobs=frozenset({"cores", "work", "heap_mb"}), executors_knob="cores",
                            memory_knob="heap_mb", max_change_factor=2.0)
    current = {"cores": 1, "work": 4, "heap_mb": 1024}
    assert direction(guardrails, current, proposed) == expected
    held = violated_guardrail(guardrails, current, {**current, "heap_mb": 4096}, 0.0)
    assert held is not None and held.data["knob"] == "heap_mb"  # the change factor holds the heap as any knob


def test_the_pages_show_an_opted_in_jobs_own_heap_proposal(client):
    job = _heap_job("opted-in", apply=True)
    _heap_window(job, pressure=True, other=False)
    evaluation_run(job=job)
    proposal = job.proposals.get()
    client.force_login(make_user())
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert 'id="memory-apply"' in page and 'id="memory-pressure" data-code="memory-pressure"' in page
    assert '<li data-code="memory-resize">' in page and "1024 → 2048 MB" in page
    assert 'id="propose-memory"' not in page  # a proposal is pending: approve it instead
    detail = client.get(f"/proposals/{proposal.pk}/").content.decode()
    assert 'id="memory-offer"' not in detail  # it changes the heap already
    assert "to relieve the memory pressure; on its own, as the job is under memory pressure" in detail


@pytest.mark.parametrize(("cluster", "current", "proposed", "expected"), [
    ("spark://10.0.0.1:7077", 16, 7, 7),    # fewer executors: the heap is sized for their larger share
    ("spark://10.0.0.1:7077", 4, 8, 8),
    ("spark://10.0.0.1:7077", 4, 4, None),  # no change of executors
    ("local@127.0.0.1", 4, 1, None),        # local mode: one JVM runs every task, whatever the cores
])
def test_the_heap_follows_the_executors_a_plan_runs_on_only_on_a_cluster(cluster, current, proposed, expected):
    plan = SimpleNamespace(executors_current=current, executors_proposed=proposed)
    local = Job(cluster=cluster).local_mode
    assert executors_after(plan, local_mode=local) == expected
    assert executors_after(None, local_mode=local) is None
