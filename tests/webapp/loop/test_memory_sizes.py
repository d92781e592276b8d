"""The memories beside the heap in the live loop (``webapp.jobs.memory``, ``webapp.loop.evaluate``): the
RocksDB state memory and the executors' overhead measured per window, recommended through their
knobs, carried by a rescale of another knob under ``memory_apply`` and never restarted for alone, and
shown on the job page and in the API."""

from __future__ import annotations

import itertools

import pytest

from scaling.values.memory import MB
from scaling.values.reasons import MemoryKind, MemoryStep, PlanReason
from tests.webapp.factories import HEAP_KNOB, PLAN_STAGES, make_job, make_snapshots, make_user
from webapp.jobs.memory import job_memory
from webapp.jobs.models import Job, MetricSnapshot
from webapp.loop.evaluate import evaluation_run
from webapp.proposals.memory import memory_offer, memory_only
from webapp.proposals.models import Proposal
from webapp.proposals.services import memory_propose, proposal_approve

pytestmark = pytest.mark.django_db

STATE = {"name": "state_mb", "default": 1024, "min": 64, "max": 8192, "sets": "state_memory", "description": ""}
OVERHEAD = {"name": "overhead_mb", "default": 2048, "min": 384, "max": 8192, "sets": "memory_overhead",
            "description": ""}


def _memory_job(name: str, *, apply: bool, cluster: str = "local@host", knobs: tuple = (STATE, OVERHEAD)) -> Job:
    """A job with the memory ``knobs`` on ``cluster``, ``memory_apply`` set to ``apply``."""
    return make_job(name, knobs=knobs, cluster=cluster, metric_window_s=45, memory_apply=apply)


def _memory_window(job: Job, *, other: bool, state_mb: float = 100, nonheap_mb: float = 300) -> None:
    """Four snapshots of a job keeping up with its load, above the band (``other``: a scale-up) or
    inside it, with the state stores at ``state_mb`` over the job and an executor's non-heap peak at
    ``nonheap_mb``."""
    shape = {} if other else {"enrich_busy_s": 5.0, "backlog_step": 0, "batch_duration_s": 1.0}
    snapshots = make_snapshots(job, keeping_up=True, **shape)
    MetricSnapshot.objects.filter(pk__in=[s.pk for s in snapshots]).update(
        gc_share=0.02, state_memory_bytes=round(state_mb * MB), nonheap_peak_bytes=round(nonheap_mb * MB))


@pytest.mark.parametrize(("apply", "other"), list(itertools.product((True, False), repeat=2)))
def test_the_state_memory_rides_with_another_change_under_memory_apply_and_never_alone(apply, other):
    job = _memory_job("state", apply=apply)
    _memory_window(job, other=other)
    evaluation = evaluation_run(job=job)
    sizes = {size.kind: size for size in evaluation.job_plan.memory_sizes}
    assert set(sizes) == {MemoryKind.STATE}  # local mode: no overhead recommendation, no executor to size
    step = MemoryStep.RECOMMEND_ONLY if not apply else MemoryStep.ALONG if other else MemoryStep.WAITS
    assert sizes[MemoryKind.STATE].step == step
    resized = step == MemoryStep.ALONG
    # 1024 → 128 MB is capped by guard_max_change_factor per step
    assert (sizes[MemoryKind.STATE].proposed_mb < 1024) == resized
    assert (PlanReason.MEMORY_RESIZE in [r["code"] for r in evaluation.reasons]) == resized
    proposal = job.proposals.filter(status="pending").first()
    assert (proposal is not None) == other  # nothing is proposed for the state memory alone
    if proposal is not None:
        assert proposal.proposed_config["state_mb"] == sizes[MemoryKind.STATE].proposed_mb


def test_on_a_cluster_the_overhead_follows_the_non_heap_peak_and_the_state_bound():
    job = _memory_job("overhead", apply=True, cluster="spark://master:7077")
    _memory_window(job, other=True, state_mb=300, nonheap_mb=250)
    memory = job_memory(job=job)
    by_kind = {size.kind: size for size in memory.sizes}
    executors = MetricSnapshot.objects.filter(job=job).latest("collected_at").executors
    assert memory.state_mb == pytest.approx(300 / executors, abs=0.01)  # the stores spread over the executors
    # non-heap 250 MB + the 1024 MB state bound it may hold, × 1.2 = 1529 → 1536 MB: saves 512 of 2048
    assert (by_kind[MemoryKind.OVERHEAD].recommended_mb, by_kind[MemoryKind.OVERHEAD].peak_mb) == (1536, 250 + 1024)
    evaluation = evaluation_run(job=job)
    sizes = {size.kind: size for size in evaluation.job_plan.memory_sizes}
    assert sizes[MemoryKind.OVERHEAD].proposed_mb == 1536 and sizes[MemoryKind.OVERHEAD].step == MemoryStep.ALONG
    assert job.proposals.get(status="pending").proposed_config["overhead_mb"] == 1536


def test_a_full_state_bound_grows_and_without_a_knob_nothing_is_recommended():
    full = _memory_job("full", apply=True)
    _memory_window(full, other=True, state_mb=1024)
    assert [(s.kind, s.recommended_mb) for s in job_memory(job=full).sizes] == [(MemoryKind.STATE, 2048)]
    bare = _memory_job("bare", apply=True, knobs=())
    _memory_window(bare, other=True)
    memory = job_memory(job=bare)
    assert memory.sizes == () and memory.state_mb == pytest.approx(100)  # measured, shown, no knob to size
    assert evaluation_run(job=bare).job_plan.memory_sizes == ()


def test_the_job_page_and_the_api_show_the_state_and_non_heap_memory(client):
    job = _memory_job("shown", apply=False)
    _memory_window(job, other=False)
    client.force_login(make_user())
    body = client.get(f"/api/jobs/{job.pk}/memory/").json()
    assert (body["state_mb"], body["nonheap_peak_mb"]) == (pytest.approx(100), pytest.approx(300))
    assert body["sizes"] == [{"kind": "state", "current_mb": 1024, "recommended_mb": 128, "peak_mb": 100.0,
                              "overhead": 0.2, "executors": 1, "saves_mb": 896}]
    html = client.get(f"/jobs/{job.pk}/").content.decode()
    assert 'id="state-memory" data-mb="100"' in html and 'id="nonheap-peak" data-mb="300"' in html
    assert 'class="memory-size" data-kind="state" data-current-mb="1024" data-recommended-mb="128"' in html
    assert "Recommended RocksDB state memory of each JVM: 1024 → <b>128 MB</b>" in html
    assert "Recommend-only: nothing restarts for it" in html


def test_an_operator_adds_every_memory_recommendation_when_approving(client):
    job = _memory_job("offered", apply=False, knobs=(HEAP_KNOB, STATE))
    _memory_window(job, other=True)
    MetricSnapshot.objects.filter(job=job).update(heap_peak_bytes=300 * MB, heap_max_bytes=1024 * MB)
    evaluation_run(job=job)
    proposal = job.proposals.get(status="pending")
    assert "heap_mb" not in proposal.proposed_config or proposal.proposed_config["heap_mb"] == 1024
    offer = memory_offer(proposal)
    assert offer.config == {"heap_mb": 512, "state_mb": 128} and offer.knobs == "heap_mb,state_mb"
    operator = make_user()
    client.force_login(operator)
    page = client.get(f"/proposals/{proposal.pk}/").content.decode()
    assert 'data-knobs="heap_mb,state_mb"' in page
    assert "also apply the memory recommendation (heap_mb 1,024 → 512 MB, state_mb 1,024 → 128 MB" in page
    approved = proposal_approve(proposal=proposal, actor=operator, with_memory=True)
    approved.refresh_from_db()
    assert (approved.proposed_config["heap_mb"], approved.proposed_config["state_mb"]) == (512, 128)
    plan = approved.job_plan
    assert plan.memory_proposed_mb == 512
    sizes = [(s.kind, s.proposed_mb, s.step) for s in plan.memory_sizes]
    assert sizes == [(MemoryKind.STATE, 128, MemoryStep.REQUESTED)]
    event = approved.audit_events.get(action="approved")
    assert [a["knob"] for a in event.reason["data"]["added"]] == ["heap_mb", "state_mb"]
    history = client.get(f"/jobs/{job.pk}/history/").content.decode()
    assert "RocksDB state memory of each JVM (state_mb) 1024 → 128 MB" in history


def test_the_job_page_proposes_the_state_memory_alone_when_a_person_asks():
    job = _memory_job("asked", apply=False, knobs=(STATE,))
    _memory_window(job, other=False)
    proposal = memory_propose(job=job, actor=make_user())
    assert {k: v for k, v in proposal.proposed_config.items() if job.config.get(k) != v} == {"state_mb": 128}
    assert memory_only(proposal)


@pytest.mark.parametrize(("store", "recommended"), [
    ("org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider", True),
    ("org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider", False),
    (None, True),  # the checkpoint holds no state yet: the store is not named, the knob is taken at its word
])
def test_the_state_memory_is_recommended_only_for_rocksdb_state(store, recommended):
    job = _memory_job("store", apply=False)
    stages = [dict(s) for s in PLAN_STAGES]
    if store is not None:
        stages[2]["state_store"] = store
    Job.objects.filter(pk=job.pk).update(plan_stages=stages)
    job.refresh_from_db()
    _memory_window(job, other=False)
    assert [s.kind for s in job_memory(job=job).sizes] == ([MemoryKind.STATE] if recommended else [])


def test_the_approve_box_leaves_out_a_memory_knob_the_proposal_changes_already():
    job = _memory_job("along", apply=True, knobs=(HEAP_KNOB, STATE))
    _memory_window(job, other=True)
    MetricSnapshot.objects.filter(job=job).update(heap_peak_bytes=300 * MB, heap_max_bytes=1024 * MB)
    evaluation_run(job=job)
    proposal = job.proposals.get(status="pending")
    # memory_apply rode both along, each at most × guard_max_change_factor (2): nothing is left to offer
    assert (proposal.proposed_config["heap_mb"], proposal.proposed_config["state_mb"]) == (512, 512)
    assert memory_offer(proposal) is None
    Proposal.objects.filter(pk=proposal.pk).update(proposed_config={**proposal.proposed_config, "heap_mb": 1024})
    offer = memory_offer(Proposal.objects.get(pk=proposal.pk))
    assert offer.config == {"heap_mb": 512}  # the state memory the proposal changes is not offered twice
