"""Dashboard pages: the jobs overview, the job page (DAG, charts, "why no proposal?"), the proposal
page and the history page, each with its live twin."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.utils import timezone
from django.utils.html import escape

from scaling.values.reasons import Limit, PlanReason, Reason, legacy_text
from scaling.words.reason_text import LOAD_NAME, reason_text
from sparkclient.contract.binding import BindingStatus, PinReason, StageBinding
from tests.webapp.dashboard_factories import make_evaluation, make_succeeded
from tests.webapp.factories import PLAN_STAGES, make_job, make_snapshots, make_user
from webapp.dashboard.views import binding_text
from webapp.jobs.models import Evaluation, Job, MetricSnapshot
from webapp.loop.evaluate import evaluation_run
from webapp.proposals.codes import ACTION_COLOURS
from webapp.proposals.models import Proposal

pytestmark = pytest.mark.django_db


def scaled_job(name="demo", **policy) -> tuple[Job, Proposal]:
    """A job whose window is full and under-provisioned: it has a pending scale-up proposal."""
    job = make_job(name, metric_window_s=45, **policy)
    make_snapshots(job)
    evaluation_run(job=job)
    return job, job.proposals.get(status="pending")


def why_items(html: str) -> dict[str, str]:
    """The "why no proposal?" items of a page: code -> text."""
    block = re.search(r'<ul id="why-none">(.*?)</ul>', html, re.S)
    assert block, "the page shows no 'why no proposal?' list"
    return {code: re.sub(r"\s+", " ", text).strip()
            for code, text in re.findall(r'data-code="([a-z]+)">(.*?)</li>', block.group(1), re.S)}


# --- jobs overview -----------------------------------------------------------------------------

def test_overview_row_shows_health_config_pending_backlog_trend_ratio_last_action_and_mode(
        client, operator, django_assert_max_num_queries):
    job, pending = scaled_job("busy")
    Job.objects.filter(pk=job.pk).update(health=Job.Health.RUNNING)
    quiet = make_job("quiet")
    make_snapshots(quiet, count=1)
    Job.objects.filter(pk=quiet.pk).update(health=Job.Health.COLLECTING)
    done = make_job("done")
    for i, snapshot in enumerate(make_snapshots(done, count=25)):
        snapshot.backlog = 10_000 - 200 * i  # draining
        snapshot.save(update_fields=["backlog"])
    make_succeeded(done, downtime_s=2.5)
    with django_assert_max_num_queries(12):  # fixed: session, user, and the overview's bounded reads
        html = client.get("/").content.decode()
    rows = dict(re.findall(r'<tr data-job="([^"]+)">(.*?)</tr>', html, re.S))
    assert set(rows) == {"busy", "quiet", "done"}
    assert f"#{pending.pk}: cores 1 → " in rows["busy"]
    assert "running" in rows["busy"] and "manual" in rows["busy"]
    assert "2.50" in rows["busy"]  # batch ratio R
    assert "collecting metrics" in rows["quiet"] and re.search(r"\d+ s left", rows["quiet"])
    assert "succeeded" in rows["done"] and "2.5 s down" in rows["done"]
    assert "↓" in rows["done"]  # the backlog falls
    assert "1 executor" in rows["busy"]
    live = client.get("/jobs/live/")
    assert live.status_code == 200 and b'data-job="busy"' in live.content


def test_overview_query_count_does_not_grow_with_jobs(client, operator, django_assert_max_num_queries):
    for i in range(12):
        job = make_job(f"job-{i:02d}")
        make_snapshots(job, count=2)
    with django_assert_max_num_queries(12):
        response = client.get("/")
    assert response.content.count(b"<tr data-job=") == 12


# --- job page ----------------------------------------------------------------------------------

def _figure(html: str, name: str) -> dict:
    return json.loads(re.search(rf'<script id="{name}" type="application/json">(.*?)</script>', html, re.S).group(1))


def _nodes(dag: dict) -> list[dict]:
    return [a for a in dag["layout"]["annotations"] if a.get("name", "").startswith("node:")]


def test_job_page_draws_dag_and_charts_on_one_time_axis(client, operator):
    job, pending = scaled_job()
    make_succeeded(job, cores_from=1, cores_to=1, finished_at=timezone.now() - timedelta(seconds=20))
    html = client.get(f"/jobs/{job.pk}/").content.decode()
    dag = _figure(html, "dag-figure")
    scatter = next(t for t in dag["data"] if t["name"] == "vertices")
    assert len(scatter["x"]) == 3
    assert scatter["marker"]["cmin"] == 0 and scatter["marker"]["cmax"] == 1 and scatter["marker"]["showscale"]
    assert all(0 <= u <= 1 for u in scatter["marker"]["color"])
    nodes = _nodes(dag)
    assert [n["text"].split("<br>")[0] for n in nodes] == ["<b>stage 0</b>", "<b>stage 1</b>", "<b>stage 2</b>"]
    assert any("p 1 → " in n["text"] for n in nodes)  # the pending proposal's parallelism on the node
    assert all("utilization" in n["text"] and "true rate" in n["text"] for n in nodes)
    hover = nodes[1]["hovertext"]
    for words in ("true processing rate", "true output rate", "target data rate", "ideal parallelism", "selectivity"):
        assert words in hover
    edges = [a for a in dag["layout"]["annotations"] if a.get("name") == "edge"]
    assert len(edges) == 2 and all(e["standoff"] > 0 and e["startstandoff"] > 0 for e in edges)
    edge_labels = [a["text"] for a in dag["layout"]["annotations"] if a.get("name") == "edge-label"]
    assert len(edge_labels) == 2 and all(label.endswith("rec/s") for label in edge_labels)
    series = _figure(html, "series-figure")
    names = [t["name"] for t in series["data"]]
    for name in ("input (arrival) rate", "rate while batches run (input rows ÷ batch time)", "backlog", "batch ratio R",
                 "executors", "cores"):
        assert name in names
    assert "processing rate" not in names and "processed" not in html
    assert [n for n in names if n.endswith("utilization")] == [f"stage {i} utilization" for i in range(3)]
    assert {t.get("xaxis", "x") for t in series["data"]} == {"x"}  # one time axis
    assert len({t["yaxis"] for t in series["data"]}) == 5
    marker = next(t for t in series["data"] if t["name"] == "rescale")
    assert "proposal #" in marker["hovertext"][0] and series["layout"]["shapes"]
    assert f'href="/proposals/{pending.pk}/"' in html


def test_dag_marks_the_bottleneck_vertex(client, operator):
    job = make_job(metric_window_s=45)
    make_snapshots(job)
    evaluation = make_evaluation(job, decision="no-change", bottleneck="v1",
                                 vertices=[{"vertex_id": f"v{i}", "target_data_rate": 450.0, "ideal_parallelism": 2}
                                           for i in range(3)])
    assert evaluation.job_plan.bottleneck == "v1"
    live = client.get(f"/jobs/{job.pk}/live/").json()
    nodes = _nodes(live["dag"])
    assert "bottleneck" in nodes[1]["text"] and "bottleneck" not in nodes[0]["text"]
    assert nodes[1]["borderwidth"] > nodes[0]["borderwidth"]


def test_chart_ranges_are_downsampled_and_bounded(client, operator):
    from webapp.dashboard.reads import MAX_CHART_POINTS, chart_data

    job = make_job()
    make_snapshots(job, count=MAX_CHART_POINTS + 200, window_s=15.0)
    chart = chart_data(job=job, range_s=24 * 3600)
    assert 0 < len(chart.t) <= MAX_CHART_POINTS
    assert all(len(values) == len(chart.t) for _name, values in chart.utilization.values())
    assert client.get(f"/jobs/{job.pk}/?range=24h").status_code == 200
    assert client.get(f"/jobs/{job.pk}/?range=bogus").status_code == 200


def test_windows_without_data_are_gaps_and_the_last_good_dag_stays_marked_stale(client, operator):
    """During a restart the collector stores windows with no completed batch (rates and
    backlog 0) and none at all while the runner is down; the page keeps the last good DAG and numbers
    with a "stale since" badge, and the charts have gaps there, never zeros."""
    from webapp.dashboard.figures import _filled_runs
    from webapp.dashboard.reads import chart_data

    job = make_job()
    now = timezone.now()
    good = make_snapshots(job, count=4, end=now - timedelta(minutes=3))
    for i in range(2):  # Spark answers, no batch completes
        MetricSnapshot.objects.create(job=job, collected_at=now - timedelta(seconds=150 - 15 * i), run_id="run-2",
                                      config=job.config, window_s=15.0, batches=0)
    # ... then nothing for two minutes (runner down), then one empty window again
    MetricSnapshot.objects.create(job=job, collected_at=now, run_id="run-2", config=job.config, window_s=15.0,
                                  batches=0)
    Job.objects.filter(pk=job.pk).update(health=Job.Health.DEGRADED)
    chart = chart_data(job=job, range_s=900)
    for series in (chart.arrival_rate, chart.capacity_rate, chart.backlog, chart.batch_ratio):
        assert all(v not in (None, 0) for v in series[:4]), series
        assert series[4:] and all(v is None for v in series[4:]), series
    assert all(v is None for _name, values in chart.utilization.values() for v in values[4:])
    assert len(chart.t) >= 8  # the two empty windows, the gap and the newest one are points of their own
    html = client.get(f"/jobs/{job.pk}/").content.decode()
    assert len(_nodes(_figure(html, "dag-figure"))) == 3  # still drawn
    assert f"stale since {good[-1].collected_at:%H:%M:%S} (no micro-batch completed)" in html
    assert f'id="backlog">{good[-1].backlog}<' in html  # the last measured backlog, not 0
    series = _figure(html, "series-figure")
    arrival = next(t for t in series["data"] if t["name"] == "input (arrival) rate")
    assert 0 not in arrival["y"] and None in arrival["y"]
    # The backlog is filled to zero, which Plotly would draw across a gap: it is one trace per run of
    # measured windows, so nothing is filled where nothing was measured.
    backlog = [t for t in series["data"] if t["name"] == "backlog"]
    assert [len(t["y"]) for t in backlog] == [4] and [t["showlegend"] for t in backlog] == [True]
    assert backlog[0]["y"] == chart.backlog[:4] and backlog[0]["fill"] == "tozeroy"
    runs = _filled_runs(["a", "b", "c", "d", "e"], [1, None, None, 2, 3], name="backlog", yaxis="y2", colour="#000")
    assert [(r["x"], r["y"], r["showlegend"]) for r in runs] == [(["a"], [1], True), (["d", "e"], [2, 3], False)]


def test_restarting_is_named_when_an_execution_runs(client, operator):
    from webapp.proposals.models import Proposal

    job = make_job()
    make_snapshots(job, count=3, end=timezone.now() - timedelta(seconds=60))
    MetricSnapshot.objects.create(job=job, collected_at=timezone.now(), run_id="run-2", config=job.config,
                                  window_s=15.0, batches=0)
    Proposal.objects.create(job=job, status=Proposal.Status.EXECUTING, current_config=job.config,
                            proposed_config=dict(job.config, cores=2))
    live = client.get(f"/jobs/{job.pk}/live/").json()
    assert "(restarting)" in live["stale"] and live["dag"] is not None


# --- "why no proposal?": every reason, produced and shown --------------------------------------

def test_why_window_not_full_shows_the_time_left(client, operator):
    job = make_job(metric_window_s=120)
    make_snapshots(job, count=2, window_s=15.0)
    Job.objects.filter(pk=job.pk).update(health=Job.Health.COLLECTING)
    why = why_items(client.get(f"/jobs/{job.pk}/").content.decode())
    assert why["window"].startswith("the metric window is not yet full: 30 of 120 s collected, about 78 s left")


def test_why_every_vertex_within_bounds_shows_the_band(client, operator):
    job = make_job(metric_window_s=45, utilization_target=0.6)
    make_snapshots(job, arrival=200.0, enrich_busy_s=2.0, backlog_step=0, batch_duration_s=1.0)
    evaluation = evaluation_run(job=job)
    assert evaluation.decision == "no-change" and not job.proposals.exists()
    why = why_items(client.get(f"/jobs/{job.pk}/").content.decode())
    assert why["bounds"].startswith(f"every vertex is within its bounds: {LOAD_NAME} ")
    assert "inside the utilization band [0.30, 0.90]" in why["bounds"]
    assert why["bounds"].count("band") == 1  # stated once: the model's sentence is not appended again


def test_why_below_the_band_at_the_minimum_says_so(client, operator):
    """An idle job: load far below the band, but its 4 cores are already the policy's minimum."""
    job = make_job(metric_window_s=45, min_cores=4, vertex_min_parallelism=4)
    Job.objects.filter(pk=job.pk).update(config={**job.config, "cores": 4, "source_partitions": 4,
                                                 "enrich_partitions": 4, "state_partitions": 4},
                                         plan_stages=[{**s, "partitions": 4 if s["partitions"] else None}
                                                      for s in PLAN_STAGES])
    job.refresh_from_db()
    make_snapshots(job, enrich_busy_s=0.5, backlog_step=0, cores=4, tasks=(4, 4, 4))
    evaluation = evaluation_run(job=job)
    assert evaluation.decision == "no-change" and evaluation.job_plan.load < 0.4
    why = why_items(client.get(f"/jobs/{job.pk}/").content.decode())
    assert why["bounds"].startswith(f"{LOAD_NAME} {evaluation.job_plan.load:.2f} is below the utilization band "
                                    "[0.40, 1.00], but the plan equals the running configuration")
    assert "inside" not in why["bounds"]


def test_why_scale_down_delayed_says_until_when(client, operator):
    from scaling.planner.sizing import EXECUTORS_KEY
    from scaling.values.state import PendingScaleDown, ScalerState, state_to_dict

    job = make_job(metric_window_s=45)
    make_snapshots(job)
    first = 1_900_000_000 - 3600  # due 2030-03-17 17:46:40 UTC with the default hour
    state = ScalerState(pending_scale_downs=(PendingScaleDown(EXECUTORS_KEY, first, ((first, 1),)),))
    Job.objects.filter(pk=job.pk).update(scaler_state=state_to_dict(state))
    evaluation = make_evaluation(job, decision="blocked", reasons=[legacy_text("a sentence nobody parses")])
    Evaluation.objects.filter(pk=evaluation.pk).update(held_scale_down={"executors": 1, "cores": 1,
                                                                        "config": dict(job.config), "plan": {}})
    why = why_items(client.get(f"/jobs/{job.pk}/").content.decode())
    # Stated once, in local time (TIME_ZONE, with the date when it is not today) and "in N": no epoch seconds.
    assert why["delayed"].startswith("a scale-down to 1 core is delayed until 2030-03-17 17:46:40 UTC (in ")
    assert "days; FLINK-36018 scale-down interval 60 min)" in why["delayed"] and "1900000000" not in why["delayed"]


def test_why_excluded_period_names_it(client, operator):
    job = make_job(metric_window_s=45, excluded_periods=["* * * * *"])
    make_snapshots(job)
    make_evaluation(job, decision="blocked", executable=False, reasons=[
        Reason(PlanReason.LOAD_ABOVE_BAND, data={"load": 1.6, "low": 0.4, "high": 1.0, "need": 1.6, "cores": 1,
                                                 "overhead": 0.1}),
        Reason(PlanReason.EXCLUDED_PERIOD, data={"period": "* * * * *"})])
    why = why_items(client.get(f"/jobs/{job.pk}/").content.decode())
    assert why["excluded"] == ("an excluded period is in force: * * * * *; the plan is computed but "
                               "not executed")


def test_why_advisor_mode(client, operator):
    job = make_job(metric_window_s=45, mode="advisor")
    make_snapshots(job, arrival=200.0, enrich_busy_s=2.0, backlog_step=0, batch_duration_s=1.0)
    evaluation_run(job=job)
    html = client.get(f"/jobs/{job.pk}/").content.decode()
    why = why_items(html)
    assert why["advisor"].startswith("advisor mode: the autoscaler only advises")
    assert "advisor mode: proposals are never executed" in html


def test_why_metrics_missing_shows_the_error_spark_gave(client, operator):
    job = make_job()
    Job.objects.filter(pk=job.pk).update(health=Job.Health.DOWN,
                                         last_error="Spark REST API: 503 Service Unavailable for /api/v1/applications")
    why = why_items(client.get(f"/jobs/{job.pk}/").content.decode())
    assert why["missing"] == ("metrics are missing: no snapshot was collected yet: Spark REST API: "
                              "503 Service Unavailable for /api/v1/applications")


def test_why_metrics_stale_shows_age_and_the_error_spark_gave(client, operator):
    job = make_job()
    make_snapshots(job, count=3, end=timezone.now() - timedelta(minutes=10))
    Job.objects.filter(pk=job.pk).update(health=Job.Health.DOWN,
                                         last_error="Spark REST API: connection refused (http://127.0.0.1:4040)")
    why = why_items(client.get(f"/jobs/{job.pk}/").content.decode())
    assert why["stale"].startswith("metrics are stale: the last snapshot is 10 min")
    assert why["stale"].endswith(": Spark REST API: connection refused (http://127.0.0.1:4040)")


def test_why_metrics_missing_from_the_snapshot_lists_spark_errors(client, operator):
    job = make_job()
    (snapshot,) = make_snapshots(job, count=1)
    snapshot.errors = ["stage 3.0: no task metrics (executor lost)"]
    snapshot.save()
    why = why_items(client.get(f"/jobs/{job.pk}/").content.decode())
    assert why["missing"] == "metrics are missing from the last snapshot: stage 3.0: no task metrics (executor lost)"


# --- proposal page -----------------------------------------------------------------------------

def test_proposal_page_shows_vertices_executors_predictions_and_buttons(client, operator):
    job = make_job("demo", metric_window_s=45)
    config = dict(job.config)
    hour_ago = timezone.now() - timedelta(hours=1)  # long finished: no restart hold
    make_succeeded(job, cores_from=1, cores_to=1, downtime_s=3.0, path="", finished_at=hour_ago)
    make_succeeded(job, cores_from=1, cores_to=1, downtime_s=5.0, path="", finished_at=hour_ago)
    Job.objects.filter(pk=job.pk).update(config=config)
    job.refresh_from_db()
    make_snapshots(job)
    evaluation_run(job=job)
    pending = job.proposals.get(status="pending")
    html = client.get(f"/proposals/{pending.pk}/").content.decode()
    table = re.search(r'<table class="grid" id="vertex-table">(.*?)</table>', html, re.S).group(1)
    assert table.count("<tr") == 4  # header and three vertices
    plan = pending.job_plan
    for v in plan.vertices:
        assert f"{v.current} → {v.proposed}" in table
    assert f"{plan.executors_current} → {plan.executors_proposed}" in html
    forecast = re.search(r'<section class="card" id="forecast">(.*?)</section>', html, re.S).group(1)
    utilization = r'id="utilization" class="predicted">\d+ % now → \d+ % on \d+ cores?, at the target rate'
    assert re.search(utilization, forecast)
    assert re.search(r'id="batch-ratio" class="predicted">[\d.]+ now → [\d.]+ predicted', forecast)
    assert re.search(r'id="catch-up" class="predicted">[^<]*after the first batch[^<]*drain [\d,]+ records', forecast)
    assert "4 s (median of 2 measured restarts of this job)" in forecast  # (3.0 + 5.0) / 2
    assert 'id="approve"' in html and 'id="reject-comment"' in html and "required" in html
    assert f'name="revision" value="{pending.revision}"' in html


def test_revision_table_shows_when_each_revision_was_replaced_as_a_time(client, operator):
    """The revisions' times are stored as ISO text in JSON; the table shows them as the page's other
    times (``Y-m-d H:i:s``), not as ``2026-11-25T13:10:04.901478+00:00``; a broken one shows nothing."""
    _job, pending = scaled_job()
    pending.revisions = [
        {"revision": 1, "proposed_config": pending.proposed_config, "prediction": {},
         "at": "2026-11-25T13:10:04.901478+00:00"},
        {"revision": 2, "proposed_config": pending.proposed_config, "prediction": {}, "at": "not a time"},
    ]
    pending.save(update_fields=["revisions"])
    html = client.get(f"/proposals/{pending.pk}/").content.decode()
    table = re.search(r'<section class="card" id="revisions">(.*?)</section>', html, re.S).group(1)
    assert "<td>2026-11-25 13:10:04</td>" in table
    assert "T13:10" not in table and "not a time" not in table


def test_reject_without_comment_is_refused_and_with_one_works(client, operator):
    job, pending = scaled_job()
    response = client.post(f"/proposals/{pending.pk}/decide/", {"action": "reject", "comment": "  "}, follow=True)
    assert "a comment is required" in response.content.decode()
    pending.refresh_from_db()
    assert pending.status == "pending"
    client.post(f"/proposals/{pending.pk}/decide/", {"action": "reject", "comment": "peak is over"})
    pending.refresh_from_db()
    assert pending.status == "rejected" and pending.comment == "peak is over"


def test_approve_from_the_proposal_page_then_live_status(client, operator, no_enqueue):
    job, pending = scaled_job()
    response = client.post(f"/proposals/{pending.pk}/decide/", {"action": "approve"})
    assert response.status_code == 302 and response["Location"] == f"/proposals/{pending.pk}/"
    live = client.get(f"/proposals/{pending.pk}/live/").content.decode()
    assert 'data-status="approved"' in live and 'id="approve"' not in live


def test_viewer_sees_no_buttons_and_cannot_decide(client, no_enqueue):
    job, pending = scaled_job()
    viewer = make_user("viewer", role="viewer")
    client.force_login(viewer)
    html = client.get(f"/proposals/{pending.pk}/").content.decode()
    assert 'id="approve"' not in html and "an operator approves" in html
    assert client.post(f"/proposals/{pending.pk}/decide/", {"action": "approve"}).status_code == 403


# --- history page ------------------------------------------------------------------------------

def test_history_lists_executions_downtime_verification_and_audit(client, operator):
    job = make_job()
    done = make_succeeded(job, downtime_s=1.7)
    html = client.get(f"/jobs/{job.pk}/history/").content.decode()
    executions = re.search(r'<table class="grid" id="executions">(.*?)</table>', html, re.S).group(1)
    assert f"#{done.pk}" in executions and "1.7 s" in executions and "driver-restart" in executions
    assert "not verified yet" in executions
    audit = html[html.index('<table class="grid" id="audit">'):]
    assert audit.count('<td class="action">') == 4
    assert f'id="rollback-{done.pk}"' in executions
    assert client.get(f"/jobs/{job.pk}/history/live/").status_code == 200


def test_history_rollback_button_starts_a_rollback(client, operator, no_enqueue):
    job = make_job()
    done = make_succeeded(job)
    response = client.post(f"/proposals/{done.pk}/rollback/", {"next": f"/jobs/{job.pk}/history/"}, follow=True)
    assert response.status_code == 200
    done.refresh_from_db()
    assert done.status == "rolling_back"
    assert "Auto-approval" in response.content.decode()


def test_anonymous_is_sent_to_login_everywhere(client):
    job, pending = scaled_job()
    for url in ("/", "/jobs/live/", f"/jobs/{job.pk}/", f"/jobs/{job.pk}/live/", f"/jobs/{job.pk}/history/",
                f"/jobs/{job.pk}/history/live/", f"/proposals/{pending.pk}/", f"/proposals/{pending.pk}/live/"):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/"), url


def test_a_knob_stage_mismatch_is_named_on_the_page_and_nothing_is_proposed_for_that_stage(client, operator):
    """The enrich stage ran 3 tasks while its knob says 1 (a pipeline that ignores
    its knob, say): the page names the stage and the knob, and the plan leaves that stage alone."""
    job = make_job(metric_window_s=45)
    make_snapshots(job, count=4, tasks=(1, 3, 2))
    evaluation = evaluation_run(job=job)
    enrich = evaluation.job_plan.vertex("v1")
    assert enrich.proposed == enrich.current == 3  # not adjustable: nothing proposed for it
    proposal = job.proposals.first()
    assert proposal is None or proposal.proposed_config["enrich_partitions"] == 1
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    binding = re.search(r'<ul id="binding">(.*?)</ul>', page, re.S).group(1)
    assert 'data-stage="1" data-knob="enrich_partitions"' in binding
    assert "stage 1 (stage 1) and knob &#x27;enrich_partitions&#x27; disagree: the knob is 1 but Spark ran 3 tasks" \
        in binding
    assert 'data-stage="0"' not in binding and 'data-stage="2"' not in binding  # the others are bound


def test_a_coalesced_shuffle_says_what_coalesced_it_and_what_to_do():
    from sparkclient.contract.binding import BindingStatus, MismatchReason, StageBinding
    from webapp.dashboard.views import binding_text

    binding = StageBinding(2, BindingStatus.MISMATCH, knob="shuffle", reason=MismatchReason.COALESCED,
                           knob_value=8, plan_partitions=8, tasks_ran=1)
    text = binding_text(binding, "enrich")
    assert text.startswith("stage 2 (enrich): Spark's adaptive execution coalesced the shuffle into 1 task, so")
    assert "knob 'shuffle' (8) does not set them" in text
    assert text.endswith("Remove --conf spark.sql.adaptive.coalescePartitions.enabled=true from the runner to let "
                         "the knob set the tasks")


@pytest.mark.parametrize("plan_partitions, tasks_ran, runs", [
    (4, 3, "runs 4 partitions"),     # the plan's count wins over the tasks of one batch
    (None, 2, "runs 2 partitions"),  # a plan without the count: the tasks the batch ran
    (None, 1, "runs 1 partition"),
    (None, None, "runs its partitions"),
])
def test_a_stage_on_the_default_shuffle_partitions_says_how_many_it_runs(plan_partitions, tasks_ran, runs):
    binding = StageBinding(2, BindingStatus.PINNED, pin=PinReason.SHUFFLE_DEFAULT, plan_partitions=plan_partitions,
                           tasks_ran=tasks_ran)
    assert binding_text(binding, "Windowed").startswith(f"stage 2 (Windowed): {runs}, the session's "
                                                       "spark.sql.shuffle.partitions (Spark's default is 200)")


def test_without_a_published_plan_no_stage_is_bound(client, operator):
    job = make_job(metric_window_s=45)
    Job.objects.filter(pk=job.pk).update(plan_stages=[])
    job.refresh_from_db()
    make_snapshots(job, count=4)
    evaluation = evaluation_run(job=job)
    assert all(v.proposed == v.current for v in evaluation.job_plan.vertices)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert page.count('class="msg binding-unverified"') == 3


# --- rescales page, audit filters and diffs, suspension button, favicon ---------------------------

def test_rescales_page_counts_and_lists_each_execution(client, operator):
    from webapp.proposals.models import Execution

    job, _pending = scaled_job()
    done = make_succeeded(job, cores_from=1, cores_to=2)
    Execution.objects.filter(proposal=done).update(pause_s=2.5)
    failed = make_succeeded(job, cores_from=2, cores_to=3)
    Proposal.objects.filter(pk=failed.pk).update(status="failed")
    Execution.objects.filter(proposal=failed).update(status="failed", error="runner timed out")
    html = client.get(f"/jobs/{job.pk}/rescales/").content.decode()
    assert re.search(r'data-count="succeeded"><b>1</b>', html) and re.search(r'data-count="failed"><b>1</b>', html)
    assert re.search(r'data-count="rolled back"><b>0</b>', html)
    row = re.search(rf'<tr data-proposal="{done.pk}".*?</tr>', html, re.S).group(0)
    assert "2.5 s" in row and "auto-approved" in row and "by hand" in row
    assert row.count("<td class=\"added-lag\">–</td>") == 1  # not measured yet: a dash, not 0
    figure = _figure(html, "executors-figure")
    assert [t["name"] for t in figure["data"]] == ["cores running", "recommended", "min 1", "max 8 (knob)"]


def test_audit_trail_filters_by_action_and_actor_and_shows_diffs(client, operator):
    from webapp.proposals.models import AuditEvent

    job = make_job()
    AuditEvent.objects.create(job=job, actor_name="ada", action="policy_changed",
                              before={"max_cores": 8, "mode": "manual"},
                              after={"max_cores": 6, "mode": "manual"})
    AuditEvent.objects.create(job=job, actor_name="system", action="proposed")
    html = client.get(f"/jobs/{job.pk}/history/", {"action": "policy_changed"}).content.decode()
    audit = html[html.index('id="audit"'):]
    assert 'data-action="policy_changed"' in audit and 'data-action="proposed"' not in audit
    assert f'style="background: {ACTION_COLOURS["policy_changed"]}" title="policy_changed">policy changed<' in audit
    row = re.search(r'<tr data-field="max_cores">(.*?)</tr>', audit, re.S).group(1)
    assert '<td class="before">8 cores</td><td class="after"><b>6 cores</b></td>' in row
    assert 'data-field="mode"' not in audit
    assert 'data-action="proposed"' in client.get(f"/jobs/{job.pk}/history/", {"actor": "system"}).content.decode()
    assert 'data-action' not in client.get(f"/jobs/{job.pk}/history/", {"actor": "nobody"}).content.decode()


def test_an_operator_clears_a_suspension_with_a_button_and_a_viewer_cannot(client, operator):
    from webapp.jobs.models import JobPolicy
    from webapp.proposals.models import AuditEvent

    job = make_job()
    JobPolicy.objects.filter(job=job).update(auto_approve_suspended=True, auto_approve_suspended_reason="rollback")
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert 'id="clear-suspension"' in page and "data-confirm=" in page
    client.force_login(make_user("vera", role="viewer"))
    assert 'id="clear-suspension"' not in client.get(f"/jobs/{job.pk}/").content.decode()
    assert client.post(f"/jobs/{job.pk}/suspension/clear/").status_code == 403
    assert JobPolicy.objects.get(job=job).auto_approve_suspended
    client.force_login(operator)
    assert client.post(f"/jobs/{job.pk}/suspension/clear/").status_code == 302
    assert not JobPolicy.objects.get(job=job).auto_approve_suspended
    event = AuditEvent.objects.get(job=job, action="auto_approve_resumed")
    assert (event.actor_user, event.actor_name) == (operator, operator.username)


def test_favicon_is_served_not_404(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"].endswith("favicon.svg")


def test_why_above_the_band_with_a_skewed_stage_names_what_the_plan_cannot_meet(client, operator):
    """What cannot be met, and skew, on the job page: a job at its maximum cores whose
    enrich stage's slowest task is busy 7x its mean task gets no proposal, and the page says why:
    the stage is skewed (more cores cannot help it) and the executors are at their maximum."""
    job = make_job(metric_window_s=45, max_cores=2)
    Job.objects.filter(pk=job.pk).update(config={**job.config, "cores": 2, "source_partitions": 2,
                                                 "enrich_partitions": 2, "state_partitions": 2},
                                         plan_stages=[{**s, "partitions": 2 if s["partitions"] else None}
                                                      for s in PLAN_STAGES])
    job.refresh_from_db()
    # enrich: 2 tasks, 4 s of busy time per 15 s window, its slowest task busy 14 s of it
    make_snapshots(job, enrich_busy_s=4.0, enrich_busy_max_s=14.0, backlog_step=2000, cores=2, tasks=(2, 2, 2))
    evaluation = evaluation_run(job=job)
    plan = evaluation.job_plan
    assert evaluation.decision == "no-change" and plan.load > 1.0, evaluation.plan
    why = why_items(client.get(f"/jobs/{job.pk}/").content.decode())
    assert why["bounds"].startswith(f"{LOAD_NAME} ") and "above the utilization band" in why["bounds"]
    assert [(item.code, item.vertex_id) for item in plan.limits] == [
        (Limit.MAX_EXECUTORS, None), (Limit.BOTTLENECK, "v1"), (Limit.CATCH_UP_UNREACHABLE, None)]
    assert plan.limit(Limit.BOTTLENECK).data["skew"] == 7.0 and plan.limit(Limit.MAX_EXECUTORS).data["cores_max"] == 2
    for item in plan.limits:  # each limit in the plan's words, on the page
        assert escape(reason_text(Reason(item.code, item.vertex_id, item.data))) in why["limits"]


def test_why_out_of_the_band_names_the_stages_not_bound_to_their_knobs(client, operator):
    """A job below the band whose enrich stage ran 3 tasks while its knob says 1 (adaptive execution
    coalescing it, say): nothing can be proposed for that stage, and the page says so instead of
    "already at a bound of the policy"."""
    job = make_job(metric_window_s=45, min_cores=2)
    Job.objects.filter(pk=job.pk).update(config={**job.config, "cores": 2, "source_partitions": 2})
    job.refresh_from_db()
    make_snapshots(job, count=4, tasks=(2, 3, 2), enrich_busy_s=1.0, backlog_step=0, cores=2)
    evaluation = evaluation_run(job=job)
    assert evaluation.decision == "no-change" and evaluation.job_plan.load < 0.4, evaluation.plan
    why = why_items(client.get(f"/jobs/{job.pk}/").content.decode())
    assert why["bounds"].endswith("(stages not bound to their knobs are left as they run)")
    assert why["unbound"] == ("stage 1 (stage 1) and knob &#x27;enrich_partitions&#x27; is not bound (see the "
                              "binding problem under Running configuration): the plan cannot change what Spark "
                              "runs there")
