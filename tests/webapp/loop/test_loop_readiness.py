"""Signal validity, through the loop harness (``tests/webapp/loop/harness.py``): a
stream-stream join whose SQL plan is unusable is "not ready" and never yields a scale-down, under a
policy that scales the same job down when its samples are ready; the job page names the code."""

from __future__ import annotations

import json

import pytest
from django.utils import timezone

from scaling.sim import topologies
from scaling.values.readiness import NotReady, SampleIssue, issues_to_json
from scaling.values.reasons import PlanReason
from sparkclient.contract import keys
from tests.fakespark import fake_spark_ui
from tests.webapp.factories import make_job, make_snapshots, make_user
from tests.webapp.loop import test_collect
from tests.webapp.loop.harness import EXECUTORS_KNOB, LoopHarness, make_harness, steps
from webapp.jobs.models import Evaluation, EvaluationHold, Job, MetricSnapshot
from webapp.jobs.window import snapshot_sample, window_readiness
from webapp.loop.evaluate import evaluation_context, evaluation_run
from webapp.proposals.holds import config_direction

pytestmark = [pytest.mark.django_db]

#: The batch-ratio veto off, scale-downs at once (no FLINK-36018 delay).
SIGNALS_OFF = {"scale_down_veto_batch_ratio": 100.0, "scale_down_veto_backlog_growth": 1.0,
               "scale_down_interval_s": 0.0}
UNUSABLE_PLAN = SampleIssue(NotReady.SQL_PLAN_UNUSABLE, {"sources": 2, "source_stages": 1})


def _as_without_the_sql_plan(*, flag: bool):
    """A hook: the snapshot as the collector stores it without the join's SQL plan: the second scan
    (``auctions``) a stage fed by the first with no records in; ``flag``: marked not ready.

    The arrival is the first source's read: the second source's arrivals, left to the first, read
    as a growing backlog whose veto would stop this scale-down by chance (not for every load), so
    the only signal left to stop it is the sample's readiness."""

    def hook(snapshot: MetricSnapshot) -> None:
        second = snapshot.vertices.get(vertex_id="auctions")
        second.is_source, second.upstream, second.records_in = False, ["persons"], 0
        second.save()
        first = snapshot.vertices.get(vertex_id="persons")
        MetricSnapshot.objects.filter(pk=snapshot.pk).update(
            arrival_rate_per_s=first.records_in / snapshot.window_s,
            not_ready=issues_to_json([UNUSABLE_PLAN] if flag else []))
    return hook


def _run_join(monkeypatch, *, flag: bool) -> LoopHarness:
    """Nexmark Q8 (persons ⋈ auctions) on 8 cores at 2,000 events/s for 15 min: far below the band."""
    h = make_harness(monkeypatch, trace=steps((900.0, 2000.0)), sim_job=topologies.nexmark_q8(), start_cores=8,
                     policy=SIGNALS_OFF, name=f"join-{flag}")
    h.snapshot_hooks.append(_as_without_the_sql_plan(flag=flag))
    return h.run()


def _scale_downs(h: LoopHarness) -> list:
    return [p for p in h.proposals() if config_direction(job=h.job, current=p.current_config,
                                                         proposed=p.proposed_config) == "down"]


def test_the_policy_scales_the_join_down_when_its_samples_are_ready(monkeypatch):
    h = _run_join(monkeypatch, flag=False)
    downs = _scale_downs(h)
    assert downs and downs[0].proposed_config[EXECUTORS_KNOB] < 8


def test_a_join_whose_sql_plan_is_unusable_never_yields_a_scale_down(monkeypatch, client):
    h = _run_join(monkeypatch, flag=True)
    evaluations = list(Evaluation.objects.filter(job=h.job).order_by("created_at"))
    assert evaluations and not _scale_downs(h)
    assert all(e.plan["executors_proposed"] >= e.plan["executors_current"] for e in evaluations)
    assert all(v["proposed"] >= v["current"] for e in evaluations for v in e.plan["vertices"])
    assert not any(e.held_scale_down for e in evaluations)
    for evaluation in evaluations:
        named = [r for r in evaluation.reason_values if r.code == PlanReason.SAMPLES_NOT_READY]
        assert [r.data["code"] for r in named] == [NotReady.SQL_PLAN_UNUSABLE]
    assert {row["cores"] for row in h.timeline} == {8}
    client.force_login(make_user("op-ready"))
    html = client.get(f"/jobs/{h.job.pk}/").content.decode()
    assert 'id="not-ready"' in html and f'data-code="{NotReady.SQL_PLAN_UNUSABLE}"' in html, html


# --- the evaluation's part: any algorithm, the binding, the stored issues --------------------------------

def _batch_ratio_job(*, not_ready: bool):
    """The batch-ratio algorithm (SPARK-12133) on 4 cores with batches at R = 0.1: it removes one."""
    job = make_job(name=f"ratio-{not_ready}", metric_window_s=45, algorithm="batch-ratio",
                   activation_evaluations=1)
    Job.objects.filter(pk=job.pk).update(config={**job.config, "cores": 4})
    job.refresh_from_db()
    snapshots = make_snapshots(job, cores=4, batch_duration_s=0.2, backlog_step=0, keeping_up=True)
    if not_ready:
        MetricSnapshot.objects.filter(pk=snapshots[1].pk).update(
            not_ready=issues_to_json([SampleIssue(NotReady.FIRST_BATCH, {"batch_id": 0})]))
    return job


def test_any_algorithm_s_scale_down_on_a_window_not_ready_is_held():
    ready = evaluation_run(job=_batch_ratio_job(not_ready=False))
    assert (ready.decision, ready.direction, ready.hold) == ("scale", "down", "")
    assert ready.proposed_config["cores"] == 3 and ready.job.proposals.count() == 1
    job = _batch_ratio_job(not_ready=True)
    held = evaluation_run(job=job)
    assert (held.decision, held.direction, held.hold) == ("scale", "down", EvaluationHold.SAMPLES_NOT_READY)
    assert held.hold_detail == {"codes": [NotReady.FIRST_BATCH]} and not job.proposals.exists()
    assert [r.data["code"] for r in held.reason_values if r.code == PlanReason.SAMPLES_NOT_READY] == ["first-batch"]


def test_a_knob_bound_to_a_stage_that_ran_other_tasks_makes_the_window_not_ready():
    """The enrich stage ran 200 tasks while its knob is 1 (the user's first batch): binding-mismatch."""
    job = make_job(metric_window_s=45)
    snapshots = make_snapshots(job, tasks=(1, 200, 2))
    ctx = evaluation_context(job=job, snapshots=snapshots, now=snapshots[-1].collected_at)
    (issue,) = ctx.not_ready
    assert issue.code is NotReady.BINDING_MISMATCH
    assert dict(issue.data) == {"knob": "enrich_partitions", "knob_value": 1, "tasks_ran": 200, "position": 1}
    assert evaluation_context(job=job, snapshots=make_snapshots(job), now=timezone.now()).not_ready == ()


def test_the_collector_s_issues_are_stored_and_read_back():
    job = make_job(metric_window_s=45)
    (snapshot,) = make_snapshots(job, count=1)
    issues = (SampleIssue(NotReady.IMPLAUSIBLE_CORES, {"cores": 64, "limit": 8}),)
    MetricSnapshot.objects.filter(pk=snapshot.pk).update(not_ready=issues_to_json(issues))
    snapshot.refresh_from_db()
    assert snapshot_sample(snapshot).not_ready == issues and not snapshot_sample(snapshot).ready


@pytest.mark.parametrize("stored, codes", [
    ([], []),
    (issues_to_json([SampleIssue(NotReady.FIRST_BATCH, {"batch_id": 0})]), [NotReady.FIRST_BATCH]),
    ("garbled", [NotReady.MISSING_STAGES]),                   # not a list
    ([{"code": "from-a-later-version"}], [NotReady.MISSING_STAGES]),
])
def test_a_stored_not_ready_this_version_cannot_read_is_not_ready(stored, codes):
    """What cannot be read cannot be trusted for a scale-down: the window of a ready snapshot and one whose
    ``not_ready`` is unreadable is not ready, and the evaluation holds its scale-down."""
    job = make_job(metric_window_s=45)
    ready, other = make_snapshots(job, count=2)
    MetricSnapshot.objects.filter(pk=other.pk).update(not_ready=stored)
    other.refresh_from_db()
    assert [i.code for i in snapshot_sample(other).not_ready] == codes
    assert [i.code for i in window_readiness(snapshots=[ready, other], bindings=[])] == codes
    if codes == [NotReady.MISSING_STAGES]:
        assert dict(snapshot_sample(other).not_ready[0].data) == {"batches": 0, "of": other.batches}


def test_a_collect_reporting_more_cores_than_the_runner_s_capacity_stores_the_sample_not_ready(workflow_redis,
                                                                                                 settings):
    """The p1 capture's executors against a runner whose cluster has 1 core: stored, not ready."""
    settings.SCALER_COLLECT_INTERVAL_S = 15
    job = make_job(name="capacity")
    for progress in test_collect.PROGRESS:
        workflow_redis.xadd(keys.progress(job.name), {"json": json.dumps(progress)})
    with fake_spark_ui() as ui:
        test_collect.running(workflow_redis, job, ui.url, capacity=1)
        snapshot = test_collect.collect(job)
    assert snapshot is not None and snapshot.batches > 0 and snapshot.cores > 1
    assert snapshot.not_ready == [{"code": "implausible-cores", "data": {"cores": snapshot.cores, "limit": 1}}]
