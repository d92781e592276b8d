"""Evaluation (``webapp.loop.evaluate``): when a window is evaluated, what the job's memory keeps, and
one context per evaluation (its policy and its stage bindings built once)."""

from datetime import timedelta

import pytest
from django.utils import timezone
from django.utils.html import escape

from scaling.planner.door import decide
from scaling.values.reasons import Limit, PlanReason, VetoSignal
from scaling.words.reason_text import reason_text
from tests.webapp.factories import make_job, make_snapshots, make_user
from webapp.jobs import bindings, policy_mapping
from webapp.jobs.models import Job
from webapp.loop import evaluate
from webapp.loop.evaluate import evaluation_run

pytestmark = pytest.mark.django_db


def counting(monkeypatch, module, name: str) -> list:
    """Replace ``module.name`` by a wrapper that records each call; returns the record."""
    calls, real = [], getattr(module, name)

    def wrapper(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapper)
    return calls


@pytest.mark.parametrize("count, decision", [(4, "scale"), (1, None)])
def test_an_evaluation_builds_the_policy_once_and_binds_the_stages_once(monkeypatch, count, decision):
    job = make_job(metric_window_s=45)
    make_snapshots(job, count=count)
    policies = counting(monkeypatch, evaluate, "scaling_policy")
    parsed = counting(monkeypatch, bindings, "plan_stages_from_json")
    bound = counting(monkeypatch, bindings, "bind_stages")
    evaluation = evaluate.evaluation_run(job=job)
    assert (evaluation.decision if evaluation else None) == decision
    evaluated = 1 if evaluation else 0
    # the newest snapshot's stages bound once, and the plan's stages once (the pinned knobs)
    assert (len(policies), len(parsed), len(bound)) == (evaluated, evaluated, 2 * evaluated)


def test_the_context_holds_the_bindings_of_the_newest_snapshot_and_the_pinned_knobs():
    job = make_job(metric_window_s=45)
    snapshots = make_snapshots(job, count=4)
    ctx = evaluate.evaluation_context(job=job, snapshots=snapshots, now=snapshots[-1].collected_at)
    assert ctx.policy == policy_mapping.scaling_policy(job.policy)
    assert ctx.bindings == bindings.stage_bindings(job=job, snapshot=snapshots[-1])
    assert ctx.pinned == tuple(bindings.pinned_knobs(job=job))
    assert ctx.positions == {v.vertex_id: v.position for v in snapshots[-1].vertices.all()}


def test_window_not_full_gives_no_evaluation():
    job = make_job(metric_window_s=120)
    make_snapshots(job, count=2)
    assert evaluation_run(job=job) is None
    assert not job.proposals.exists()


def test_metrics_right_after_a_restart_are_not_evaluated(settings):
    """FLIP-271 stabilization: the first SCALER_STABILIZATION_S seconds of a run are ignored."""
    settings.SCALER_STABILIZATION_S = 30
    job = make_job(metric_window_s=45)
    make_snapshots(job, count=4)  # one run, 60 s of snapshots: only the last 30 s are stable
    assert evaluation_run(job=job) is None
    make_snapshots(job, count=2, end=timezone.now() + timedelta(seconds=30))  # same run, 30 s later
    evaluation = evaluation_run(job=job, now=timezone.now() + timedelta(seconds=30))
    assert evaluation is not None and evaluation.window_s == pytest.approx(45.0)


def test_delayed_scale_down_is_held_across_evaluations_then_applied():
    """FLINK-36018 in the product path: the job's memory carries the pending scale-down from one
    evaluation to the next; it is proposed only once ``scale_down_interval_s`` has passed."""

    job = make_job(metric_window_s=45, scale_down_interval_s=600)
    Job.objects.filter(pk=job.pk).update(config={**job.config, "cores": 6, "source_partitions": 6,
                                                 "enrich_partitions": 6})
    job.refresh_from_db()
    t0 = timezone.now()
    make_snapshots(job, enrich_busy_s=3.0, backlog_step=0, cores=6, tasks=(6, 6, 2), batch_duration_s=0.6,
                   keeping_up=True, end=t0)
    first = evaluation_run(job=job, now=t0)
    job.refresh_from_db()
    assert first.decision == "blocked" and not job.proposals.exists(), first.reasons
    assert PlanReason.HELD_EXECUTOR_SCALE_DOWN in {r.code for r in first.reason_values}
    assert job.scaler_state["pending_scale_downs"], "the pending scale-down must be remembered"

    later = t0 + timedelta(seconds=601)
    make_snapshots(job, enrich_busy_s=3.0, backlog_step=0, cores=6, tasks=(6, 6, 2), batch_duration_s=0.6,
                   keeping_up=True, end=later)
    second = evaluation_run(job=job, now=later)
    assert second.decision == "scale", second.reasons
    proposal = job.proposals.get()
    assert proposal.proposed_config["cores"] < 6


def test_batches_that_overrun_the_trigger_veto_the_scale_down_and_the_job_page_says_so(client):
    """Load below the band on 6 cores, but every batch takes 5 s of a 2 s trigger: no scale-down
    (``scale-down-vetoed`` on the batch ratio), and the job page shows the reason's words."""

    job = make_job(metric_window_s=45, scale_down_interval_s=0)
    Job.objects.filter(pk=job.pk).update(config={**job.config, "cores": 6, "source_partitions": 6,
                                                 "enrich_partitions": 6})
    job.refresh_from_db()
    now = timezone.now()
    snapshots = make_snapshots(job, enrich_busy_s=3.0, backlog_step=0, cores=6, tasks=(6, 6, 2), keeping_up=True,
                               end=now)
    plan = decide(evaluate.evaluation_request(evaluate.evaluation_context(job=job, snapshots=snapshots, now=now)))
    codes = [r.code for r in plan.reasons]
    assert PlanReason.LOAD_BELOW_BAND in codes and plan.executors_proposed == plan.executors_current == 6
    vetoed = next(r for r in plan.reasons if r.code == PlanReason.SCALE_DOWN_VETOED)
    assert (vetoed.data["signal"], vetoed.data["value"], vetoed.data["threshold"]) == (VetoSignal.BATCH_RATIO, 2.5, 0.9)
    evaluation = evaluation_run(job=job, now=now)
    assert evaluation.proposed_config["cores"] == 6
    assert all(evaluation.proposed_config[k] >= v for k, v in job.config.items() if k.endswith("_partitions"))
    client.force_login(make_user())
    html = client.get(f"/jobs/{job.pk}/").content.decode()
    assert escape(reason_text(vetoed)) in html


def test_without_an_executors_knob_the_evaluation_keeps_the_cores():
    """The job's knobs declare no executors knob: the window's cluster is not adjustable, and a load
    above the band on 1 core is planned at 1 core with ``cores-not-adjustable``."""

    job = make_job(metric_window_s=45)
    Job.objects.filter(pk=job.pk).update(knobs=[k for k in job.knobs if k.get("sets") != "executors"])
    job.refresh_from_db()
    snapshots = make_snapshots(job)
    ctx = evaluate.evaluation_context(job=job, snapshots=snapshots, now=snapshots[-1].collected_at)
    plan = decide(evaluate.evaluation_request(ctx))
    assert plan.executors_proposed == plan.executors_current == 1
    assert plan.predicted_utilization == plan.utilization_now or plan.changes
    assert plan.limit(Limit.CORES_NOT_ADJUSTABLE) is not None
    assert plan.limit(Limit.MAX_EXECUTORS) is None
