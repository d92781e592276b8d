"""Memory in the live loop (``webapp.jobs.memory``, the gate in ``webapp.loop.evaluate``): under memory
pressure no scale-down and a scale-up only with the pressure named; a heap far below its maximum gets a
recommend-only smaller size on the job page and in the API, and nothing is proposed or restarted for it."""

from __future__ import annotations

import pytest
from django.utils import timezone
from django.utils.html import escape

from scaling.values.memory import MB
from scaling.values.reasons import PlanReason, Reason
from scaling.words.reason_text import reason_text
from tests.webapp.factories import make_job, make_snapshots, make_user
from webapp.jobs.models import Job, MetricSnapshot
from webapp.loop.evaluate import evaluation_run
from webapp.proposals.models import Execution

pytestmark = pytest.mark.django_db


def _measure(snapshots, *, gc_share: float, peak_mb: int, max_mb: int) -> None:
    MetricSnapshot.objects.filter(pk__in=[s.pk for s in snapshots]).update(
        gc_share=gc_share, heap_peak_bytes=peak_mb * MB, heap_max_bytes=max_mb * MB)


def _over_provisioned(name: str):
    """A job on 6 cores whose load is below the band and whose batches keep to their trigger: a scale-down."""
    job = make_job(name=name, metric_window_s=45, scale_down_interval_s=0)
    Job.objects.filter(pk=job.pk).update(config={**job.config, "cores": 6, "source_partitions": 6,
                                                 "enrich_partitions": 6})
    job.refresh_from_db()
    now = timezone.now()
    snapshots = make_snapshots(job, enrich_busy_s=3.0, backlog_step=0, cores=6, tasks=(6, 6, 2), keeping_up=True,
                               batch_duration_s=1.0, end=now)
    return job, snapshots, now


def test_a_scale_down_is_blocked_under_gc_pressure_and_the_job_page_shows_the_numbers(client):
    calm, calm_snapshots, now = _over_provisioned("calm")
    _measure(calm_snapshots, gc_share=0.05, peak_mb=300, max_mb=512)
    assert evaluation_run(job=calm, now=now).proposed_config["cores"] < 6  # the control: it scales down

    job, snapshots, now = _over_provisioned("gc-bound")
    _measure(snapshots, gc_share=0.42, peak_mb=490, max_mb=512)
    evaluation = evaluation_run(job=job, now=now)
    assert evaluation.decision == "blocked" and evaluation.proposed_config == job.config
    pressure = Reason.from_json(evaluation.reasons[0])
    assert pressure.code == PlanReason.MEMORY_PRESSURE
    assert (pressure.data["signal"], pressure.data["gc_share"], pressure.data["heap_peak_mb"]) == ("gc", 0.42, 490.0)
    assert not job.proposals.exists() and evaluation.held_scale_down == {}
    client.force_login(make_user())
    html = client.get(f"/jobs/{job.pk}/").content.decode()
    assert 'id="memory-pressure" data-code="memory-pressure"' in html
    assert escape(reason_text(pressure)) in html and 'data-mb="490"' in html


def test_a_scale_up_under_gc_pressure_goes_ahead_with_the_pressure_named():
    job = make_job(metric_window_s=45)
    snapshots = make_snapshots(job)  # load above the band: a scale-up
    _measure(snapshots, gc_share=0.5, peak_mb=500, max_mb=512)
    evaluation = evaluation_run(job=job)
    assert evaluation.decision == "scale" and evaluation.proposed_config["cores"] > job.config["cores"]
    assert [r["code"] for r in evaluation.reasons][0] == PlanReason.MEMORY_PRESSURE
    assert job.proposals.get().status == "pending"


def test_a_heap_far_below_its_maximum_gets_a_recommend_only_smaller_size(client):
    """Acceptance: the page and the API show 8192 → 1216 MB and what it saves; the evaluation and its
    proposal are those of the same window without memory figures, and nothing executes."""
    plain = make_job(name="plain", metric_window_s=45)
    make_snapshots(plain, keeping_up=True)
    job = make_job(name="roomy", metric_window_s=45)
    _measure(make_snapshots(job, keeping_up=True), gc_share=0.01, peak_mb=1000, max_mb=8192)
    ours, theirs = evaluation_run(job=job), evaluation_run(job=plain)
    assert (ours.decision, ours.proposed_config, ours.reasons) == (theirs.decision, theirs.proposed_config,
                                                                   theirs.reasons)
    assert job.proposals.count() == plain.proposals.count() and not Execution.objects.exists()

    client.force_login(make_user())
    body = client.get(f"/api/jobs/{job.pk}/memory/").json()
    assert body["pressure"] is None and body["apply"] is False
    assert body["recommendation"] == {"kind": "heap", "current_mb": 8192, "recommended_mb": 1216, "peak_mb": 1000.0,
                                      "overhead": 0.2, "executors": 1, "saves_mb": 6976}
    html = client.get(f"/jobs/{job.pk}/").content.decode()
    assert 'data-current-mb="8192" data-recommended-mb="1216" data-saves-mb="6976"' in html
    assert "Recommended heap of each JVM that runs tasks: 8192 → <b>1216 MB</b>" in html  # the reasons' words
    assert 'id="memory-no-knob"' in html and "declare <code>Knob(..., sets=KnobTarget.MEMORY)</code>" in html
    assert 'id="propose-memory"' not in html  # without a memory knob nothing can apply it


def test_no_memory_measured_shows_nothing_and_the_api_answers_nulls(client):
    job = make_job(metric_window_s=45)
    make_snapshots(job)
    client.force_login(make_user())
    assert client.get(f"/api/jobs/{job.pk}/memory/").json()["recommendation"] is None
    assert 'id="memory"' not in client.get(f"/jobs/{job.pk}/").content.decode()


def test_a_heap_peak_of_zero_is_not_measured_and_recommends_nothing(client):
    """Spark reads 0 for a stage shorter than a heartbeat: no "peak 0 MB", no smaller size from it."""
    job = make_job(metric_window_s=45)
    _measure(make_snapshots(job), gc_share=0.0, peak_mb=0, max_mb=1024)
    client.force_login(make_user())
    memory = client.get(f"/api/jobs/{job.pk}/memory/").json()
    assert (memory["recommendation"], memory["heap_peak_mb"], memory["gc_share"]) == (None, None, 0.0)
    html = client.get(f"/jobs/{job.pk}/").content.decode()
    assert 'id="heap-peak"' not in html and 'id="memory-recommendation"' not in html
