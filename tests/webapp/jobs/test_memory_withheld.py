"""The load a window's memory is right-sized on (``webapp.jobs.window.window_sizing``, the rule
``scaling.planner.memory.sizing_withheld``): each boundary of the gate with two windows, one on each
side (no completed batch of this run or one, keeping up or not, ready or not), and the heap of a job
under memory pressure that grows whichever side it is on."""

from __future__ import annotations

import pytest
from django.utils.html import escape

from scaling.values.memory import MB, Withheld
from scaling.values.reasons import MemoryKind, MemoryStep, PlanReason
from scaling.words.reason_text import reason_text
from tests.webapp.factories import HEAP_KNOB, make_job, make_snapshots, make_user
from webapp.jobs.memory import job_memory
from webapp.jobs.models import Job, MetricSnapshot
from webapp.loop.evaluate import evaluation_run

pytestmark = pytest.mark.django_db

STATE = {"name": "state_mb", "default": 1024, "min": 64, "max": 8192, "sets": "state_memory", "description": ""}


def _window(name: str, *, keeping_up: bool = True, gc_share: float = 0.02, peak_mb: int = 102, **policy):
    """A job with a heap and a state-memory knob, four snapshots inside the band (``keeping_up`` or
    with a growing backlog) with the heap at ``peak_mb`` of 1024 MB and the state stores at 100 MB:
    a heap of 1024 → 512 MB and a state bound of 1024 → 128 MB recommended when the window may be
    right-sized."""
    job = make_job(name, knobs=[HEAP_KNOB, STATE], cluster="local@host", metric_window_s=45, **policy)
    snapshots = make_snapshots(job, enrich_busy_s=5.0, backlog_step=0, batch_duration_s=1.0, keeping_up=keeping_up)
    MetricSnapshot.objects.filter(pk__in=[s.pk for s in snapshots]).update(
        gc_share=gc_share, heap_peak_bytes=peak_mb * MB, heap_max_bytes=1024 * MB, state_memory_bytes=100 * MB)
    return job, snapshots


def _right_sized(job: Job) -> tuple[int | None, list[MemoryKind], str | None]:
    """The heap recommended (MB), the kinds of the other sizes, and the withheld cause."""
    memory = job_memory(job=job)
    cause = memory.withheld.data["cause"] if memory.withheld else None
    if memory.withheld is not None:
        assert memory.withheld.code == PlanReason.MEMORY_WITHHELD
    return (memory.recommendation.recommended_mb if memory.recommendation else None,
            [size.kind for size in memory.sizes], cause)


@pytest.mark.parametrize("batches", [0, 1])
def test_a_window_without_a_completed_batch_is_not_right_sized_and_one_batch_is_enough(batches):
    job, snapshots = _window(f"batches-{batches}")
    MetricSnapshot.objects.filter(pk__in=[s.pk for s in snapshots]).update(batches=0)
    MetricSnapshot.objects.filter(pk=snapshots[-1].pk).update(batches=batches)
    assert _right_sized(job) == ((512, [MemoryKind.STATE], None) if batches
                                 else (None, [], str(Withheld.NO_BATCH)))


@pytest.mark.parametrize("this_run", [True, False])
def test_only_the_batches_of_the_current_run_count(this_run):
    """The window's older snapshots completed batches; the newest, of a run started since, none: the
    batches were of the run before it."""
    job, snapshots = _window(f"run-{this_run}")
    MetricSnapshot.objects.filter(pk=snapshots[-1].pk).update(batches=0, run_id="run-1" if this_run else "run-2")
    assert _right_sized(job)[2] == (None if this_run else str(Withheld.NO_BATCH))


@pytest.mark.parametrize("keeping_up", [True, False])
def test_a_job_not_keeping_up_is_not_right_sized_and_its_page_says_why(client, keeping_up):
    job, _snapshots = _window(f"keeping-up-{keeping_up}", keeping_up=keeping_up)
    memory = job_memory(job=job)
    client.force_login(make_user())
    html = client.get(f"/jobs/{job.pk}/").content.decode()
    if keeping_up:
        assert _right_sized(job) == (512, [MemoryKind.STATE], None)
        assert 'id="memory-withheld"' not in html and 'data-recommended-mb="512"' in html
        return
    assert _right_sized(job) == (None, [], str(Withheld.NOT_KEEPING_UP))
    data = memory.withheld.data  # the sources read half of what arrives: 450 records/s more each second
    assert data["backlog_growth_per_s"] == pytest.approx(450.0) and data["backlog_growth_per_s"] > data["noise_per_s"]
    assert 'id="memory-withheld" data-code="memory-withheld" data-cause="not-keeping-up"' in html
    assert escape(reason_text(memory.withheld)) in html and "data-recommended-mb" not in html


@pytest.mark.parametrize("ready", [True, False])
def test_a_window_that_is_not_ready_is_not_right_sized(ready):
    job, snapshots = _window(f"ready-{ready}")
    if not ready:
        MetricSnapshot.objects.filter(pk=snapshots[1].pk).update(
            not_ready=[{"code": "restart-in-window", "data": {"batches": 1}}])
    assert _right_sized(job) == ((512, [MemoryKind.STATE], None) if ready
                                 else (None, [], str(Withheld.NOT_READY)))
    if not ready:
        assert (job_memory(job=job).withheld.data["code"], job_memory(job=job).withheld.data["samples"]) \
            == ("restart-in-window", 1)


@pytest.mark.parametrize("keeping_up", [True, False])
def test_a_heap_under_memory_pressure_grows_whether_or_not_the_job_keeps_up(keeping_up):
    """GC at 50 % with the heap at 1000 of 1024 MB: the relief (2048 MB) is recommended on both sides,
    and with memory_apply the loop proposes it: alone on a job keeping up, with the cores a job falling
    behind scales up to; the state bound is right-sized only on a job keeping up."""
    job, _snapshots = _window(f"pressure-{keeping_up}", keeping_up=keeping_up, gc_share=0.5, peak_mb=1000,
                              memory_apply=True)
    heap, sizes, cause = _right_sized(job)
    assert heap == 2048 and job_memory(job=job).pressure is not None
    assert (sizes, cause) == (([MemoryKind.STATE], None) if keeping_up else ([], str(Withheld.NOT_KEEPING_UP)))
    evaluation = evaluation_run(job=job)
    assert evaluation.job_plan.memory_step == (MemoryStep.ALONE if keeping_up else MemoryStep.ALONG)
    proposed = job.proposals.get(status="pending").proposed_config
    assert proposed["heap_mb"] == 2048 and (proposed["cores"] > job.config["cores"]) == (not keeping_up)
