"""The job, proposal and rescales pages state each number once, with its origin: one catch-up per
execution, nothing from zero batches, utilization beside the band's needed utilization, stage and job
capacities in one unit, one capacity, band and cores needed on each page, bounds with their source,
paths in words and the expected time to effect."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from scaling.values.reasons import Limit, PlanLimit
from scaling.words.reason_text import LOAD_NAME
from scaling.words.reason_text import reason_text as plan_reason_text
from tests.webapp.dashboard_factories import make_evaluation, make_succeeded
from tests.webapp.factories import make_job, make_pending, make_snapshots, make_user
from webapp.jobs.models import Job, MetricSnapshot
from webapp.loop import bounds
from webapp.proposals.lifecycle import transition
from webapp.proposals.models import Execution, Proposal
from webapp.proposals.predictions import realized

pytestmark = pytest.mark.django_db


def cell(html: str, cell_id: str) -> str:
    match = re.search(rf'id="{cell_id}"[^>]*>(.*?)</(?:td|span|p)>', html, re.S)
    assert match, cell_id
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", match.group(1))).strip().replace("&#x27;", "'")


def executed(proposal: Proposal, *, catch_up_s: float | None, execution_s: float = 51.0, path: str = "driver-handover",
             detail: dict | None = None) -> Execution:
    """``proposal`` succeeded: its execution took ``execution_s`` from its start to its first batch."""
    started = timezone.now() - timedelta(minutes=10)
    Proposal.objects.filter(pk=proposal.pk).update(status=Proposal.Status.SUCCEEDED, decided_at=started,
                                                   verification="verified" if detail else "",
                                                   verification_detail=detail or {})
    execution = Execution.objects.create(proposal=proposal, status=Execution.Status.SUCCEEDED, path=path,
                                         downtime_s=4.0, pause_s=1.5, added_lag_s=4.81, catch_up_s=catch_up_s,
                                         finished_at=started + timedelta(seconds=execution_s))
    Execution.objects.filter(pk=execution.pk).update(started_at=started)
    execution.refresh_from_db()
    return execution


# --- one catch-up -------------------------------------------------------------------------------------

def test_the_execution_line_and_the_realized_column_state_one_catch_up(client, operator):
    """The verification's own measure said "not caught up" while the execution's said 171 s: the page
    states the execution's, from the start of the rescale and from the first batch after it."""
    proposal = make_pending()
    executed(proposal, catch_up_s=171.0, execution_s=51.0,
             detail={"batches": 9, "realized": {"catch_up_s": None, "capacity_per_s": 900.0, "utilization": 0.6,
                                                "busy_share": 0.6, "batch_ratio": 0.8, "downtime_s": 4.0}})
    html = client.get(f"/proposals/{proposal.pk}/").content.decode()
    assert cell(html, "execution-catch-up") == ("2 min 51 s from the start of the rescale (2 min after the first "
                                                "batch on the new configuration)")
    assert cell(html, "realized-catch-up") == ("2 min after the first batch on the new configuration (2 min 51 s "
                                               "from the start of the rescale)")
    assert "not caught up" not in html and 'data-catch-up="measured"' in html


def test_a_catch_up_not_measured_yet_is_not_yet_everywhere(client, operator):
    """"catch-up not yet" stood beside a realized "14 s" (the verification's measure)."""
    proposal = make_pending()
    executed(proposal, catch_up_s=None,
             detail={"batches": 9, "realized": {"catch_up_s": 14.0, "capacity_per_s": 900.0, "utilization": 0.6,
                                                "busy_share": 0.6, "batch_ratio": 0.8, "downtime_s": 4.0}})
    html = client.get(f"/proposals/{proposal.pk}/").content.decode()
    assert cell(html, "execution-catch-up").startswith("not yet")
    assert cell(html, "realized-catch-up") == cell(html, "execution-catch-up")
    rescales = client.get(f"/jobs/{proposal.job_id}/rescales/").content.decode()
    assert re.search(r'class="catch-up" data-state="following" title="not yet: [^"]*">not yet</td>', rescales)
    history = client.get(f"/jobs/{proposal.job_id}/history/").content.decode()
    assert re.search(r'class="catch-up" title="not yet: [^"]*">not yet</td>', history)


# --- nothing from zero batches ------------------------------------------------------------------------

def test_the_status_line_before_the_first_batch_says_no_batch_yet(client, operator):
    job = make_job(metric_window_s=45)
    MetricSnapshot.objects.create(job=job, collected_at=timezone.now(), run_id="run-1", config=job.config,
                                  window_s=15.0, batches=0, backlog=0, arrival_rate_per_s=0.0,
                                  processed_rate_per_s=0.0, batch_duration_s=0.0, trigger_interval_s=2.0,
                                  batch_ratio=0.0, executors=1, cores=1)
    html = client.get(f"/jobs/{job.pk}/").content.decode()
    status = re.search(r'<section class="card" id="status">(.*?)</section>', html, re.S).group(1)
    assert 'id="no-batch"' in status
    assert 'id="capacity"' not in status and "R 0.00" not in status and "0.00 s" not in status


def test_nothing_realized_is_stated_from_zero_batches(client, operator):
    proposal = make_pending()
    executed(proposal, catch_up_s=None, detail={"batches": 0, "realized": {
        "capacity_per_s": None, "utilization": 0.0, "busy_share": 0.0, "batch_ratio": None, "downtime_s": 4.0}})
    html = client.get(f"/proposals/{proposal.pk}/").content.decode()
    for key in ("capacity", "utilization", "batch-ratio"):
        assert cell(html, f"realized-{key}") == "no batch completed in the verification window"
    assert "0 %" not in cell(html, "realized-utilization")
    rescales = client.get(f"/jobs/{proposal.job_id}/rescales/").content.decode()
    assert "→ 0 rec/s" not in rescales


def test_realized_figures_are_none_for_windows_without_a_batch():
    job = make_job(metric_window_s=45)
    snapshots = make_snapshots(job, count=2)
    MetricSnapshot.objects.filter(pk__in=[s.pk for s in snapshots]).update(batches=0)
    after = list(MetricSnapshot.objects.filter(pk__in=[s.pk for s in snapshots]).order_by("collected_at"))
    out = realized(plan=None, after=after, finished_at=timezone.now(), downtime_s=3.0, vertices=[])
    assert out["batches"] == 0
    assert (out["capacity_per_s"], out["utilization"], out["busy_share"], out["batch_ratio"]) == (None,) * 4


# --- utilization, load and capacity in one unit --------------------------------------------------------

def test_utilization_states_the_load_the_reason_gives(client, operator):
    proposal = make_pending()
    html = client.get(f"/proposals/{proposal.pk}/").content.decode()
    load = proposal.prediction["inputs"]["load"]
    reasons = re.search(r'<ul id="reasons">(.*?)</ul>', html, re.S).group(1)
    assert f"{LOAD_NAME} {load:.2f}" in reasons
    assert "load" not in re.sub(r"<[^>]+>", "", reasons)  # words that cannot be read as the host's load average
    assert f"is {load:.2f} now" in cell(html, "utilization")
    assert proposal.prediction["utilization_now"] == pytest.approx(proposal.job_plan.utilization_now, abs=1e-3)


def test_stage_capacities_combine_into_the_jobs_and_show_their_cores(client, operator):
    proposal = make_pending()
    plan = proposal.job_plan
    html = client.get(f"/proposals/{proposal.pk}/").content.decode()
    table = re.search(r'<table class="grid" id="vertex-table">(.*?)</table>', html, re.S).group(1)
    capacities = [tuple(int(x) for x in pair) for pair in re.findall(r'class="capacity">(\d+) → (\d+)</td>', table)]
    assert len(capacities) == len(plan.vertices)
    cores = re.findall(r'class="cores" data-now="(\d+)" data-new="(\d+)"', table)
    assert len(cores) == len(plan.vertices)
    job_now = int(re.search(r'id="job-capacity" data-now="(\d+)" data-expected="(\d+)"', html).group(1))
    job_new = int(re.search(r'id="job-capacity" data-now="(\d+)" data-expected="(\d+)"', html).group(2))
    assert all(job_now <= now and job_new <= new for now, new in capacities)
    assert 1 / job_now == pytest.approx(sum(1 / now for now, _ in capacities), rel=0.01)
    assert job_new == pytest.approx(proposal.prediction["capacity_per_s"], rel=0.01)  # the prediction's, same formula


def _figures(html: str) -> dict[str, str]:
    line = re.search(r'<p class="numbers figures" id="figures">(.*?)</p>', html, re.S).group(1)
    return dict(re.findall(r'data-figure="([a-z-]+)"[^>]*>([^<]*)<', line))


def test_the_job_proposal_and_rescales_pages_state_the_same_figures(client, operator):
    """One capacity, one band, one cores needed: the same words on the three pages of one job (the
    proposal's plan is the newest evaluation's), and the proposal's capacity the per-stage table's."""
    proposal = make_pending()
    job = proposal.job
    urls = {"job": f"/jobs/{job.pk}/", "proposal": f"/proposals/{proposal.pk}/",
            "rescales": f"/jobs/{job.pk}/rescales/"}
    pages = {name: client.get(url).content.decode() for name, url in urls.items()}
    figures = {name: _figures(html) for name, html in pages.items()}
    assert figures["job"] == figures["proposal"] == figures["rescales"]
    assert set(figures["job"]) == {"capacity", "load", "band", "cores-needed"}
    assert figures["job"]["capacity"] == re.search(r'id="job-capacity" data-now="(\d+)"', pages["proposal"]).group(1)
    assert figures["job"]["cores-needed"] == f"{proposal.job_plan.cores_needed} cores needed"
    assert figures["job"]["load"] == f"{LOAD_NAME} {proposal.job_plan.load:.2f}"


@pytest.mark.parametrize(("backlog_mode", "band"), [(False, "[0.40, 1.00]"), (True, "[0.00, 1.00]")])
def test_the_rescales_trigger_names_the_band_the_plan_compared_with(client, operator, backlog_mode, band):
    """In backlog mode the plan compares with [0, 1] (FLIP-271), and the Rescales page says so, as the
    plan's reason does, in the one band format."""
    job = make_job(metric_window_s=45)
    done = make_succeeded(job)
    evaluation = make_evaluation(job, decision="scale", load=1.5, backlog_mode=backlog_mode)
    Proposal.objects.filter(pk=done.pk).update(evaluation=evaluation)
    html = client.get(f"/jobs/{job.pk}/rescales/").content.decode()
    trigger = re.search(rf'<tr data-proposal="{done.pk}".*?<td class="trigger">(.*?)</td>', html, re.S).group(1)
    assert trigger.endswith(f": {LOAD_NAME} 1.50, band {band}")


def test_the_job_page_states_no_figures_of_an_evaluation_older_than_the_configuration(client, operator):
    proposal = make_pending()
    Job.objects.filter(pk=proposal.job.pk).update(config_changed_at=timezone.now())
    figures = _figures(client.get(f"/jobs/{proposal.job.pk}/").content.decode())
    assert figures == {"capacity": "not measured"}


# --- bounds with their source ------------------------------------------------------------------------

def _at_host_bound(monkeypatch) -> Job:
    """A job on a 2-core host (the policy allows 8) running 2 cores, its load above the band."""
    monkeypatch.setattr(bounds, "runner_master", lambda job: "local[2]")
    job = make_job(metric_window_s=45)
    Job.objects.filter(pk=job.pk).update(capacity=2, config={**job.config, "cores": 2})
    job.refresh_from_db()
    make_snapshots(job, cores=2)
    make_evaluation(job, decision="no-change", load=1.59, utilization=1.0, executors_current=2, executors_proposed=2,
                    vertices=[{"vertex_id": "v0"}])
    return job


def test_why_names_the_hosts_cores_as_the_bound(client, operator, monkeypatch):
    job = _at_host_bound(monkeypatch)
    html = client.get(f"/jobs/{job.pk}/").content.decode()
    why = re.search(r'data-code="bounds">(.*?)</li>', html, re.S).group(1).replace("&#x27;", "'")
    assert "already at the most cores it may have: 2 cores (the host's cores; the policy allows 8)" in why
    assert "bound of the policy" not in why
    assert re.search(r'id="cores-bound" data-cores="2" data-source="host"', html)


def test_the_rescales_page_and_chart_use_the_effective_maximum(client, operator, monkeypatch):
    job = _at_host_bound(monkeypatch)
    html = client.get(f"/jobs/{job.pk}/rescales/").content.decode()
    assert re.search(r'id="bound" data-cores="2" data-source="host"', html)
    figure = json.loads(re.search(r'id="executors-figure" type="application/json">(.*?)</script>', html, re.S).group(1))
    assert [t["y"] for t in figure["data"] if t["name"] == "max 2 (host)"] == [[2, 2]]
    assert not [t for t in figure["data"] if t["name"].startswith("max 8")]


def test_a_quota_and_a_knob_are_named_as_sources(monkeypatch):
    job = make_job(max_cores=16)
    Job.objects.filter(pk=job.pk).update(capacity=6)
    job.refresh_from_db()
    assert bounds.effective_max_cores(job, master="yarn").to_dict()["source"] == "quota"
    Job.objects.filter(pk=job.pk).update(capacity=0)
    job.refresh_from_db()
    bound = bounds.effective_max_cores(job, master="")
    assert (bound.cores, str(bound.source)) == (8, "knob")  # the demo's cores knob allows 8


# --- paths, rows and timestamps --------------------------------------------------------------------------

def test_an_offline_state_repartition_is_named_so(client, operator):
    proposal = make_pending()
    executed(proposal, catch_up_s=12.0, path="state-repartition")
    html = client.get(f"/proposals/{proposal.pk}/").content.decode()
    assert cell(html, "execution-path") == "offline state repartition, then the query restarted in the same driver"
    rescales = client.get(f"/jobs/{proposal.job_id}/rescales/").content.decode()
    assert re.search(r'data-path="state-repartition">offline state repartition', rescales)
    assert 'data-path="state-repartition">in-process' not in rescales
    history = client.get(f"/jobs/{proposal.job_id}/history/").content.decode()
    assert re.search(r'class="path" data-path="state-repartition">offline state repartition', history)


def test_a_rollback_row_has_no_empty_capacity_arrow(client, operator):
    job = make_job()
    done = make_succeeded(job)
    rollback = Proposal.objects.create(job=job, kind=Proposal.Kind.ROLLBACK, rollback_of=done,
                                       status=Proposal.Status.SUCCEEDED, current_config=done.proposed_config,
                                       proposed_config=done.current_config, decided_at=timezone.now())
    Execution.objects.create(proposal=rollback, status=Execution.Status.SUCCEEDED, path="driver-handover",
                             downtime_s=2.0, finished_at=timezone.now())
    html = client.get(f"/jobs/{job.pk}/rescales/").content.decode()
    row = re.search(rf'<tr data-proposal="{rollback.pk}".*?</tr>', html, re.S).group(0)
    assert "– → –" not in row and re.search(r'class="capacity">–</td>', row)


def test_decided_is_never_before_created(no_enqueue_attempt):
    proposal = make_pending()
    early = proposal.created_at - timedelta(milliseconds=16)
    approved = transition(proposal=proposal, target=Proposal.Status.APPROVED, actor=make_user("op3"),
                          decided_at=early)
    assert approved.decided_at >= approved.created_at


@pytest.fixture
def no_enqueue_attempt(monkeypatch):
    from webapp.proposals import dispatch  # noqa: PLC0415 - the module the approval enqueues through

    monkeypatch.setattr(dispatch, "enqueue_attempt", lambda *a, **k: None)


def test_prose_carries_no_config_names_or_raw_floats():
    text = plan_reason_text(PlanLimit(Limit.CATCH_UP_UNREACHABLE, None, {
        "catch_up_s": 720.75, "catch_up_duration_s": 120.0, "cores_max": 2}))
    assert text == ("catch-up-unreachable: draining the backlog takes 12 min 1 s even at 2 cores, above the "
                    "policy's catch-up target of 2 min")


# --- the expected time to effect ------------------------------------------------------------------------

def test_before_any_execution_or_measured_standby_start_the_time_to_effect_is_not_measured(client, operator):
    """A handover that has to start its standby first is not given the bench's pause, which leaves out the
    start: "not measured", with the bench's start named as the bench's."""
    proposal = make_pending()
    assert proposal.proposed_config["cores"] != proposal.current_config["cores"]
    html = client.get(f"/proposals/{proposal.pk}/").content.decode()
    text = cell(html, "time-to-effect")
    assert text.startswith("Expected time to effect: not measured (warm handover to a new driver")
    assert "bench-rescale measured a start of 38 s on a quiet 2-core machine" in text


def test_the_time_to_effect_is_the_median_of_this_jobs_executions_of_the_path(client, operator):
    proposal = make_pending()
    job = proposal.job
    for took_s in (82.0, 140.0, 100.0):
        done = make_succeeded(job, path="driver-handover")
        # the measured time to effect, not when the answer was read (an hour later here), of a handover
        # whose standby started at the approval (no standby is seen ready for this one)
        Execution.objects.filter(proposal=done).update(time_to_effect_s=took_s,
                                                       result={**done.execution.result, "standby": "started"},
                                                       finished_at=done.decided_at + timedelta(hours=1))
    make_succeeded(job, path="driver-handover")  # no first batch reported: not a sample
    Job.objects.filter(pk=job.pk).update(config=proposal.current_config)
    html = client.get(f"/proposals/{proposal.pk}/").content.decode()
    text = cell(html, "time-to-effect")
    assert text.startswith("Expected time to effect: about 100 s from the approval")
    assert "median of this job's 3 handovers that started their standby driver at the approval" in text


def test_the_rescales_page_states_each_executions_time_to_effect_in_its_own_column(client, operator):
    proposal = make_pending()
    execution = executed(proposal, catch_up_s=171.0)
    Execution.objects.filter(pk=execution.pk).update(time_to_effect_s=82.4)
    other = make_succeeded(proposal.job, path="none")
    html = client.get(f"/jobs/{proposal.job_id}/rescales/").content.decode()
    assert cell(html, "time-to-effect-definition") == ("Time to effect: from the approval to the first batch on "
                                                       "the new configuration.")
    assert html.count("from the approval to the first batch") == 1  # defined once
    assert "<th>Time to effect</th>" in html
    row = re.search(rf'<tr data-proposal="{proposal.pk}".*?</tr>', html, re.S).group(0)
    assert re.search(r'class="time-to-effect">82 s</td>', row)
    unmeasured = re.search(rf'<tr data-proposal="{other.pk}".*?</tr>', html, re.S).group(0)
    assert re.search(r'class="time-to-effect">–</td>', unmeasured)


def test_a_stage_with_fewer_tasks_than_cores_gains_nothing_from_more_cores(client, operator):
    """A stage's capacity doubled with its parallelism shown "2 → 2" because the cores doubled: it runs
    on 2 cores either way, and the page says so."""
    job = make_job(metric_window_s=45)
    make_snapshots(job, cores=2)
    make_evaluation(job, decision="scale", executors_current=2, executors_proposed=4, vertices=[
        {"vertex_id": "v0", "current": 2, "proposed": 4}, {"vertex_id": "v1", "current": 2, "proposed": 2}])
    proposal = Proposal.objects.create(job=job, evaluation=job.evaluations.get(), status=Proposal.Status.PENDING,
                                       current_config=dict(job.config, cores=2), plan=job.evaluations.get().plan,
                                       proposed_config=dict(job.config, cores=4), prediction={"capacity_per_s": 1.0})
    html = client.get(f"/proposals/{proposal.pk}/").content.decode()
    pinned = re.search(r'<tr data-vertex="v1".*?</tr>', html, re.S).group(0)
    assert 'data-now="2" data-new="2"' in pinned
    now, new = re.search(r'class="capacity">(\d+) → (\d+)</td>', pinned).groups()
    assert now == new
    assert 'id="prediction-capacity-note"' in html  # the frozen prediction's capacity differs: said why


def test_templates_word_an_execution_with_the_same_renderer():
    from django.template import Context, Template  # noqa: PLC0415 - only this test renders a template string

    proposal = make_pending()
    execution = executed(proposal, catch_up_s=171.0, path="state-repartition")
    text = Template("{% load execution_figures %}{{ e|catch_up }} | {{ e|added_lag }} | {{ e.path|path_text }}"
                    ).render(Context({"e": execution}))
    assert text == ("2 min 51 s from the start of the rescale (2 min after the first batch on the new configuration) | "
                    "4.8 s | offline state repartition, then the query restarted in the same driver")


def test_the_stored_cluster_names_the_host_without_asking_the_runner(monkeypatch):
    job = make_job(max_cores=8)
    Job.objects.filter(pk=job.pk).update(capacity=2, cluster="local@127.0.0.1")
    job.refresh_from_db()
    monkeypatch.setattr("webapp.loop.bounds.runner_master", lambda job: pytest.fail("read the runner"))
    bound = bounds.effective_max_cores(job)
    assert (bound.cores, bound.source) == (2, "host")
