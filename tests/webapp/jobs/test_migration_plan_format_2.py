"""Migrations ``jobs.0018_plan_format_2`` and ``proposals.0008_plan_format_2``: plans stored in the old
shape (``plan_as_json``: unversioned, reasons and vertex notes as sentences) become format 2, their
reasons legacy-text reason values, and the web app's old dict of a runner's answer becomes the
control protocol's ``RescaleResult`` JSON. A stored plan of the old shape still renders after it.

The fixtures (``tests/fixtures/webapp-plans-v1``) are what the web app stored before: ``plan_as_json``
of real evaluations from the test factories (a scale-up and its proposal, a held delayed scale-down,
a skewed job at its maximum cores)."""

from __future__ import annotations

import importlib
import json
import re
from datetime import timedelta

import pytest
from django.apps import apps
from django.utils import timezone

from scaling.values.plan import PLAN_FORMAT, JobPlan
from scaling.values.reasons import Limit, PlanReason
from scaling.values.state import PendingScaleDown, ScalerState, state_to_dict
from sparkclient.contract.messages import RescalePath, ResultStatus
from tests.capture_paths import FIXTURES
from tests.webapp.factories import make_job, make_snapshots
from webapp.jobs.models import Evaluation, Job
from webapp.proposals.holds import held_scale_down
from webapp.proposals.models import Execution, Proposal
from webapp.proposals.rollback import last_good_config

pytestmark = pytest.mark.django_db

jobs_migration = importlib.import_module("webapp.jobs.migrations.0018_plan_format_2")
proposals_migration = importlib.import_module("webapp.proposals.migrations.0008_plan_format_2")
PLANS_V1 = FIXTURES / "webapp-plans-v1"


def _fixture(name: str) -> dict:
    return json.loads((PLANS_V1 / name).read_text())


def _migrate() -> None:
    jobs_migration.evaluations_to_format_2(apps, None)
    proposals_migration.proposals_to_format_2(apps, None)


def _old_evaluation(job: Job, stored: dict) -> Evaluation:
    return Evaluation.objects.create(job=job, decision=stored["decision"], reasons=stored["reasons"],
                                     plan=stored["plan"], held_scale_down=stored["held_scale_down"],
                                     proposed_config=dict(job.config), window_s=45.0)


def test_an_old_plan_and_its_proposal_still_render_after_the_migration(client, operator):
    old = _fixture("scale-up.json")
    job = make_job(metric_window_s=45)
    make_snapshots(job, count=4)
    evaluation = _old_evaluation(job, old["evaluation"])
    earlier = {"revision": 1, "evaluation": evaluation.pk, "proposed_config": {**job.config, "cores": 2},
               "reasons": old["proposal"]["reasons"], "prediction": {}, "at": timezone.now().isoformat()}
    proposal = Proposal.objects.create(job=job, evaluation=evaluation, current_config=dict(job.config),
                                       proposed_config={**job.config, "cores": 3}, reasons=old["proposal"]["reasons"],
                                       plan=old["proposal"]["plan"], revision=2, revisions=[earlier])
    _migrate()
    evaluation.refresh_from_db()
    proposal.refresh_from_db()

    for row in (evaluation, proposal):
        assert row.plan["format"] == PLAN_FORMAT
        assert row.job_plan == JobPlan.from_json(old["evaluation"]["plan"])  # nothing lost on the way
        assert [r.code for r in row.reason_values] == [PlanReason.LEGACY_TEXT]
        assert [r.data["text"] for r in row.reason_values] == old["evaluation"]["reasons"]
    assert [r.code for r in proposal.job_plan.reasons] == [PlanReason.LEGACY_TEXT]
    assert [v.vertex_id for v in proposal.job_plan.vertices] == ["v0", "v1", "v2"]
    assert [r["reasons"] for r in proposal.revisions] == [[r.to_json() for r in proposal.reason_values]]

    job_page = client.get(f"/jobs/{job.pk}/").content.decode()
    pending = re.search(r'<ul id="pending-reasons">(.*?)</ul>', job_page, re.S).group(1)
    assert re.findall(r'data-code="([^"]+)"', pending) == [PlanReason.LEGACY_TEXT]
    page = client.get(f"/proposals/{proposal.pk}/").content.decode()
    why = re.search(r'<ul id="reasons">(.*?)</ul>', page, re.S).group(1)
    assert re.findall(r'data-code="([^"]+)"', why) == [PlanReason.LEGACY_TEXT]
    table = re.search(r'<table class="grid" id="vertex-table">(.*?)</table>', page, re.S).group(1)
    assert re.findall(r'<tr data-vertex="([^"]+)"', table) == ["v0", "v1", "v2"]
    for vertex in proposal.job_plan.vertices:
        assert f"{vertex.current} → {vertex.proposed}" in table
    assert 'id="forecast"' in page

    _migrate()  # a second run changes nothing
    assert Evaluation.objects.get(pk=evaluation.pk).plan == evaluation.plan
    assert Proposal.objects.get(pk=proposal.pk).reasons == proposal.reasons


def test_an_old_held_scale_down_and_its_vertex_notes_read_after_the_migration(client, operator):
    old = _fixture("held-scale-down.json")["evaluation"]
    job = make_job(metric_window_s=45, scale_down_interval_s=600)
    make_snapshots(job, count=4)
    held = old["held_scale_down"]
    first_at_s = JobPlan.from_json(old["plan"]).held[0].first_at_s
    state = ScalerState(pending_scale_downs=(PendingScaleDown("executors", first_at_s, ((first_at_s, 3),)),))
    Job.objects.filter(pk=job.pk).update(scaler_state=state_to_dict(state))
    evaluation = _old_evaluation(job, old)
    _migrate()
    evaluation.refresh_from_db()

    assert evaluation.held_scale_down["plan"]["format"] == PLAN_FORMAT
    assert [r.code for r in evaluation.reason_values] == [PlanReason.LEGACY_TEXT] * 2
    pinned = evaluation.job_plan.vertex("v1")  # its note, a sentence, is a legacy-text reason of v1
    assert (pinned.reason.code, pinned.reason.vertex_id) == (PlanReason.LEGACY_TEXT, "v1")
    assert evaluation.job_plan.vertex("v0").reason is None  # an empty note is no reason
    now_held = held_scale_down(job=Job.objects.get(pk=job.pk))
    assert now_held["cores"] == held["cores"] == 3 and now_held["plan"].executors_proposed == 3
    assert now_held["plan"].decision == "scale"
    html = client.get(f"/jobs/{job.pk}/").content.decode()
    assert 'id="apply-scale-down"' in html


def test_old_limits_still_say_what_the_plan_cannot_meet_after_the_migration(client, operator):
    old = _fixture("limits.json")["evaluation"]
    job = make_job(metric_window_s=45, max_cores=2)
    make_snapshots(job, count=4)
    evaluation = _old_evaluation(job, old)
    _migrate()
    evaluation.refresh_from_db()

    plan = evaluation.job_plan
    assert [item.code for item in plan.limits] == [Limit.MAX_EXECUTORS, Limit.BOTTLENECK, Limit.CATCH_UP_UNREACHABLE]
    assert plan.limit(Limit.CATCH_UP_UNREACHABLE).data["catch_up_s"] == float("inf")
    html = client.get(f"/jobs/{job.pk}/").content.decode()
    why = re.search(r'<ul id="why-none">(.*?)</ul>', html, re.S).group(1)
    assert re.findall(r'data-code="([a-z]+)"', why) == ["bounds", "limits"]


def test_an_old_runner_answer_becomes_a_rescale_result():
    job = make_job()
    proposal = Proposal.objects.create(job=job, status=Proposal.Status.SUCCEEDED, current_config=dict(job.config),
                                       proposed_config={**job.config, "cores": 3})
    applied = {**job.config, "cores": 2}
    answered = Execution.objects.create(proposal=proposal, status=Execution.Status.SUCCEEDED, attempts=1,
                                        finished_at=timezone.now(), path="in-process", result={
        "id": f"proposal-{proposal.pk}-attempt-1", "status": "succeeded", "path": "in-process", "downtime_s": 4.2,
        "pause_s": 1.5, "error": "", "code": None, "config": applied, "completed_at": 1795686238.0,
        "executor_change_s": None})
    failed = Proposal.objects.create(job=job, status=Proposal.Status.FAILED, current_config=dict(job.config),
                                     proposed_config={**job.config, "cores": 4})
    silent = Execution.objects.create(proposal=failed, status=Execution.Status.FAILED, attempts=2, path="none",
                                      result={"status": "failed", "path": "none", "error": "no answer from the runner"})
    _migrate()

    result = Execution.objects.get(pk=answered.pk).rescale_result
    assert (result.status, result.path, result.knobs, result.downtime_s) == (ResultStatus.SUCCEEDED,
                                                                             RescalePath.IN_PROCESS, applied, 4.2)
    later = Proposal.objects.create(job=job, current_config=applied, proposed_config={**applied, "cores": 5})
    Proposal.objects.filter(pk=later.pk).update(created_at=timezone.now() + timedelta(seconds=1))
    assert last_good_config(job=job, before=Proposal.objects.get(pk=later.pk)) == applied
    result = Execution.objects.get(pk=silent.pk).rescale_result
    assert (result.id, result.status, result.path, result.code) == (f"proposal-{failed.pk}-attempt-2",
                                                                    ResultStatus.FAILED, RescalePath.NONE, None)
