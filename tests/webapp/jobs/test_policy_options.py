"""A job's policy comes from the one option table (``scaling.policy.options``): its fields, their defaults and
help, the admin form's and the API's bounds, the round trip to ``scaling.Policy``; and the two
features that learn from past rescales act in the web app (micro-batch mode)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone
from rest_framework.authtoken.models import Token

from scaling.planner.sizing import EXECUTORS_KEY
from scaling.policy.option_types import Kind
from scaling.policy.options import job_options, policy_options
from scaling.policy.policy import Policy
from scaling.values.plan import JobPlan, VertexPlan
from scaling.values.reasons import Decision
from scaling.values.state import state_from_dict
from sparkclient.contract import keys
from sparkclient.contract.messages import RescalePath, RescaleResult, ResultStatus
from tests.scaling.policy.test_options import just_outside, with_switch
from tests.webapp.factories import make_job, make_snapshots, make_user
from webapp.jobs.admin import POLICY_FIELDSETS, JobPolicyForm
from webapp.jobs.models import Job, JobPolicy
from webapp.jobs.policy_mapping import POLICY_FIELDS, scaling_policy
from webapp.loop.evaluate import evaluation_run
from webapp.loop.execute import attempt_send
from webapp.loop.reconcile import workflow_reconcile
from webapp.loop.verify import blocks_scale_ups
from webapp.proposals.models import AuditEvent, Execution, Proposal
from webapp.proposals.predictions import capacity_per_s, executor_record

pytestmark = pytest.mark.django_db
BOUNDED = [o for o in job_options() if o.bounds is not None]
#: A valid value other than the default, per shared option (the rules between options hold).
OTHER = {"utilization_min": 0.5, "utilization_max": 0.9, "vertex_min_parallelism": 2, "batch_ratio_scale_up": 2.0,
         "algorithm": "batch-ratio", "excluded_vertices": ["v1"], "excluded_periods": ["01:00-02:00"]}


def other_value(option):
    if option.name in OTHER:
        return OTHER[option.name]
    if option.kind == Kind.SWITCH:
        return not option.default
    if option.kind == Kind.CHOICE:
        return next(v for v in option.values if v != option.default)
    low, high = option.bounds
    return low if option.default != low else high


def test_every_job_option_is_a_field_with_the_tables_default_and_help():
    for option in job_options():
        field = JobPolicy._meta.get_field(option.name)
        default = field.get_default()
        assert default == (list(option.default) if option.kind == Kind.STRINGS else option.default), option.name
        assert option.help in field.help_text, option.name
    assert set(POLICY_FIELDS) == {o.name for o in policy_options() if o.per_job}
    in_fieldsets = [name for _, section in POLICY_FIELDSETS for name in section["fields"]]
    assert len(in_fieldsets) == len(set(in_fieldsets))
    assert {o.name for o in job_options()} <= set(in_fieldsets)


def test_defaults_are_one_set():
    policy = scaling_policy(JobPolicy.objects.get(job=make_job()))
    assert policy == Policy()


@pytest.mark.parametrize("option", [o for o in policy_options() if o.per_job], ids=lambda o: o.name)
def test_every_option_round_trips_model_and_policy(option):
    value = other_value(option)
    row = JobPolicy.objects.get(job=make_job())
    setattr(row, option.name, value)
    row.full_clean()
    row.save()
    row.refresh_from_db()
    expected = Policy(**{option.name: tuple(value) if isinstance(value, list) else value})
    assert scaling_policy(row) == expected
    back = JobPolicy(job=row.job, **{name: getattr(expected, name) for name in POLICY_FIELDS})
    assert getattr(back, option.name) == getattr(expected, option.name)
    assert scaling_policy(back) == expected


def _form(policy: JobPolicy, changes: dict) -> JobPolicyForm:
    """The admin form posted back with ``changes`` (booleans as a browser sends them)."""
    blank = JobPolicyForm(instance=policy)
    data = {}
    for name in blank.fields:
        value = changes.get(name, blank[name].value())
        if isinstance(value, bool):
            if value:
                data[name] = "on"
            continue
        data[name] = "" if value is None else value
    return JobPolicyForm(data=data, instance=policy)


@pytest.mark.parametrize("option", BOUNDED, ids=lambda o: o.name)
def test_admin_and_api_accept_exactly_the_tables_bounds(client, option):
    job = make_job()
    policy = JobPolicy.objects.get(job=job)
    for value in just_outside(option):
        form = _form(policy, with_switch(option, value))
        assert not form.is_valid() and option.name in form.errors, (value, form.errors)
    token = Token.objects.create(user=make_user("api-admin", role="admin"))
    client.defaults["HTTP_AUTHORIZATION"] = f"Token {token.key}"
    url = f"/api/jobs/{job.pk}/policy/"
    for value in just_outside(option):
        refused = client.patch(url, json.dumps(with_switch(option, value)), content_type="application/json")
        assert refused.status_code == 400 and option.name in refused.json(), (value, refused.content)
    for value in option.bounds:  # each bound alone: no range error (a rule between options may still object)
        messages = _form(policy, with_switch(option, value)).errors.get(option.name, [])
        assert not [m for m in messages if "must be within" in m or "Ensure this value" in m], (value, messages)


def _verified(*, enrich_busy_s: float, backlog_step: int, name: str = "demo", **policy) -> Proposal:
    """A scale-up proposal, executed, then verified on snapshots whose enrich stage is as slow as
    ``enrich_busy_s`` (15 s: as predicted) with the backlog growing by ``backlog_step``."""
    job = make_job(name, metric_window_s=45, verification_windows=2, **policy)
    make_snapshots(job)
    evaluation_run(job=job)
    proposal = job.proposals.get()
    done_at = timezone.now()
    Proposal.objects.filter(pk=proposal.pk).update(status="succeeded")
    Execution.objects.create(proposal=proposal, status="succeeded", attempts=1, attempt_state="done",
                             finished_at=done_at)
    later = done_at + timedelta(seconds=100)
    make_snapshots(job, count=6, end=later, enrich_busy_s=enrich_busy_s, backlog_step=backlog_step)
    assert workflow_reconcile(now=later)["verified"] == 1
    proposal.refresh_from_db()
    return proposal


@pytest.mark.parametrize("enabled", [True, False])
def test_effectiveness_detection_switches_the_scale_up_block(enabled):
    """A scale-up whose stage got 4x slower per core: ineffective; the block follows the switch."""
    proposal = _verified(enrich_busy_s=60.0, backlog_step=0, effectiveness_detection_enabled=enabled)
    assert proposal.verification == Proposal.Verification.INEFFECTIVE
    job = Job.objects.get(pk=proposal.job_id)
    assert bool(job.scale_up_block) is enabled
    assert AuditEvent.objects.filter(job=job, action="scale_up_blocked").exists() is enabled


def test_the_effectiveness_threshold_is_flinks_share_of_the_expected_gain():
    """Flink ``detectIneffectiveScaleUp`` on the job's capacity: a scale-up that realized half of the
    predicted gain is effective at the default threshold 0.1 and ineffective at 0.6; a verdict other
    than ineffective never blocks."""
    job = make_job(metric_window_s=45)
    make_snapshots(job)
    evaluation_run(job=job)
    proposal = job.proposals.get()
    before, expected = (capacity_per_s(proposal.job_plan, {"v0"}, proposed=new) for new in (False, True))
    assert expected > before
    half = {"realized": {"capacity_per_s": before + 0.5 * (expected - before)}}

    def blocks(threshold, result=Proposal.Verification.INEFFECTIVE):
        policy = JobPolicy(job=job, effectiveness_threshold=threshold)
        return blocks_scale_ups(proposal=proposal, result=result, detail=half, policy=policy, sources={"v0"})

    assert (blocks(0.1), blocks(0.6)) == (False, True)
    assert not blocks(0.6, Proposal.Verification.VERIFIED)


def test_an_executor_change_is_recorded_for_observed_scalability():
    source = VertexPlan(vertex_id="src", current=2, proposed=4, true_processing_rate=200.0, true_output_rate=200.0,
                        selectivity=1.0, target_data_rate=100.0, catch_up_data_rate=0.0, ideal_parallelism=1,
                        utilization=0.25, busy_core_s_per_s=0.5, adjustable=True)
    plan = JobPlan(decision=Decision.SCALE, reasons=(), vertices=(source,), executors_current=2, executors_proposed=4,
                   cores_per_executor=1, overhead_fraction=0.0)
    (record,) = executor_record(plan, 10.0, {"src"})
    assert (record.vertex_id, record.old_parallelism, record.new_parallelism) == (EXECUTORS_KEY, 2, 4)
    assert record.true_processing_rate == pytest.approx(400.0)   # 2 cores × 200 records per busy core-second
    assert record.expected_processing_rate == pytest.approx(800.0)
    assert executor_record(replace(plan, executors_proposed=2), 10.0) == ()
    state = state_from_dict({"history": [], "pending_scale_downs": []}).with_records((record,))
    assert state.last_record(EXECUTORS_KEY) == record


def test_a_succeeded_execution_records_its_executor_change_in_the_jobs_memory(workflow_redis, enqueued):
    """Observed scalability in micro-batch mode fits its coefficient to the job's executor records
    (``scaling.planner.microbatch``): an execution that changed the executors leaves one in the job's state."""
    job = make_job(metric_window_s=45, observed_scalability_enabled=True)
    make_snapshots(job)
    evaluation_run(job=job)
    proposal = job.proposals.get()
    plan = proposal.job_plan
    assert plan.executors_proposed != plan.executors_current
    Proposal.objects.filter(pk=proposal.pk).update(status="executing")
    execution = Execution.objects.create(proposal=proposal, attempts=1, attempt_state="waiting_retry")
    workflow_redis.set(keys.control_result(job.name, execution.exec_id(1)),
                       RescaleResult(id=execution.exec_id(1), status=ResultStatus.SUCCEEDED,
                                     path=RescalePath.DRIVER_RESTART, downtime_s=14.0).to_json())
    assert attempt_send(proposal_id=proposal.pk, attempt=2).status == "succeeded"
    record = state_from_dict(Job.objects.get(pk=job.pk).scaler_state).last_record(EXECUTORS_KEY)
    assert (record.old_parallelism, record.new_parallelism) == (plan.executors_current, plan.executors_proposed)
    assert record.true_processing_rate > 0


@pytest.mark.django_db(transaction=True)
def test_the_migration_keeps_the_block_on_for_existing_jobs():
    """Before 0014 the switch changed nothing and every ineffective scale-up blocked: stored rows
    (false, the old default) read true afterwards, as they behaved."""
    job = make_job()
    call_command("migrate", "jobs", "0013", verbosity=0)
    try:
        JobPolicy.objects.filter(job=job).update(effectiveness_detection_enabled=False)
    finally:
        call_command("migrate", verbosity=0)  # every app: going back unapplied later ones of others
    assert JobPolicy.objects.get(job=job).effectiveness_detection_enabled is True


def test_observed_scalability_acts_on_the_live_loops_plan():
    """Three past rescales that gained far less than linear (1 → 2 → 4 executors, 100 → 110 → 120
    records/s): with observed scalability on, the planner divides the predicted gain of more cores by
    the fitted coefficient (clamped at 0.5) and asks for more executors than without."""
    history = [{"at_s": 1.0 + i, "vertex_id": EXECUTORS_KEY, "old_parallelism": p, "new_parallelism": 2 * p,
                "true_processing_rate": rate, "expected_processing_rate": 2 * rate}
               for i, (p, rate) in enumerate([(1, 100.0), (2, 110.0), (4, 120.0)])]
    proposed = {}
    for enabled in (False, True):
        job = make_job(f"learn-{enabled}", metric_window_s=45, observed_scalability_enabled=enabled, max_cores=64)
        Job.objects.filter(pk=job.pk).update(scaler_state={"history": history})
        make_snapshots(job)
        proposed[enabled] = evaluation_run(job=Job.objects.get(pk=job.pk)).job_plan.executors_proposed
    assert proposed[True] > proposed[False] > 1, proposed
