"""Every page in every state an operator meets, in Chromium.

States (set up through the database and services, no Spark): healthy; overloaded with a pending
proposal; restarting; suspended; held scale-down. For each, the overview, job, proposal (when there
is one), history and rescales pages are opened, checked for what they must show, screenshotted to
``test-artifacts/{state}-{page}.png``, and must log no console error, page error or failed request
(the favicon included). Each job page's DAG labels are compared by bounding box: none overlaps.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.browser.conftest import screenshot
from tests.browser.test_dashboard_browser import job_with_pending_proposal, login
from tests.webapp.dashboard_factories import make_succeeded
from tests.webapp.factories import PLAN_STAGES, make_job, make_snapshots, make_user
from webapp.jobs.models import Job, JobPolicy, MetricSnapshot, VertexSnapshot
from webapp.loop.evaluate import evaluation_run
from webapp.proposals.models import AuditEvent, Execution, Proposal

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]

#: Spark's operator chains of the demo pipeline's stages (their short names: MicroBatchScan, MapInPandas,
#: StateStoreSave).
SPARK_NAMES = {"v0": "MicroBatchScan → Filter → Project → Project",
               "v1": "MapInPandas → Project → EventTimeWatermark → Filter → Project → HashAggregate",
               "v2": "HashAggregate → StateStoreRestore → HashAggregate → StateStoreSave → HashAggregate"}

#: Boxes (x, y, width, height) of the DAG's labels, with their text, as Chromium laid them out.
DAG_LABELS_JS = """() => Array.from(document.querySelectorAll('#dag g.annotation'))
    .filter(g => g.textContent.trim())
    .map(g => { const r = g.querySelector('.annotation-text-g').getBoundingClientRect();
                return {text: g.textContent, x: r.x, y: r.y, w: r.width, h: r.height}; })"""


def assert_no_label_overlaps(page) -> list[dict]:
    page.wait_for_selector("#dag g.annotation")
    boxes = page.evaluate(DAG_LABELS_JS)
    assert boxes
    for i, a in enumerate(boxes):
        assert a["w"] > 0 and a["h"] > 0, a
        for b in boxes[i + 1:]:
            overlap_x = min(a["x"] + a["w"], b["x"] + b["w"]) - max(a["x"], b["x"])
            overlap_y = min(a["y"] + a["h"], b["y"] + b["h"]) - max(a["y"], b["y"])
            assert overlap_x <= 0 or overlap_y <= 0, f"DAG labels overlap: {a['text']!r} and {b['text']!r}"
    return boxes


def visit(page, url: str, name: str, *, ready: str = "main") -> None:
    page.goto(url)
    page.wait_for_selector(ready)
    page.wait_for_load_state("networkidle")
    screenshot(page, name)


def assert_clean(page) -> None:
    assert page.problems == [], page.problems


def open_common_pages(page, job: Job, state: str) -> None:
    """Overview, history and rescales of ``job``: what every state shows there."""
    visit(page, "/", f"{state}-overview", ready="#jobs-rows")
    assert page.locator(f"tr[data-job='{job.name}']").count() == 1
    visit(page, f"/jobs/{job.pk}/history/", f"{state}-history", ready="#audit")
    assert page.locator("#audit-filter select[name=action]").count() == 1
    trail = page.locator("#audit").inner_text()
    assert "{'" not in trail and not re.search(r"\b(None|True|False)\b", trail), trail
    assert page.evaluate("document.documentElement.scrollWidth") <= page.viewport_size["width"]
    visit(page, f"/jobs/{job.pk}/rescales/", f"{state}-rescales", ready="#executors-chart .main-svg")
    counts = {el.get_attribute("data-count"): el.inner_text() for el in page.locator(".count").all()}
    assert set(counts) == {"succeeded", "failed", "rolled back"}
    traces = page.evaluate("() => document.getElementById('executors-chart').data.map(t => t.name)")
    assert traces[:2] == ["cores running", "recommended"] and any(t.startswith("min ") for t in traces) \
        and any(t.startswith("max ") for t in traces)


def test_healthy(page, redis_server, settings):
    from sparkclient.contract.load import set_rate
    from webapp.jobs.redis import get_redis

    settings.REDIS_URL = redis_server.url
    make_user("operator")
    job = make_job("healthy", metric_window_s=45)
    Job.objects.filter(pk=job.pk).update(spark_ui_url="http://driver-host:4040")
    snapshots = make_snapshots(job, count=30, arrival=200.0, enrich_busy_s=3.0, backlog_step=0,
                               batch_duration_s=1.0)
    Job.objects.filter(pk=job.pk).update(health=Job.Health.RUNNING, plan_stages=[*PLAN_STAGES, {
        "input": "shuffle", "partitions": 2, "stateful": False, "operators": ["BroadcastHashJoin"]}])
    evaluation_run(job=job)
    assert not job.proposals.exists()  # healthy: inside the band, nothing to propose
    # Spark's real operator chains, and a fourth stage beside the second (two nodes in one layer).
    for vertex_id, name in SPARK_NAMES.items():
        VertexSnapshot.objects.filter(snapshot__job=job, vertex_id=vertex_id).update(name=name)
    VertexSnapshot.objects.bulk_create([
        VertexSnapshot(snapshot=s, vertex_id="v3", name="BroadcastHashJoin → Project → Project", position=3,
                       tasks=2, busy_s=2.0, records_in=1500, records_out=1500, upstream=["v0"]) for s in snapshots])
    done = make_succeeded(job, cores_from=1, cores_to=1, finished_at=timezone.now() - timedelta(seconds=30))
    Execution.objects.filter(proposal=done).update(pause_s=1.2, added_lag_s=3.4, catch_up_s=20.0)
    set_rate(get_redis(), job.topic, 200.0)
    other = make_job("no-generator")
    Job.objects.filter(pk=other.pk).update(topic="")
    login(page)

    visit(page, f"/jobs/{job.pk}/", "healthy-job", ready="#dag g.annotation")
    boxes = assert_no_label_overlaps(page)
    nodes = {b["text"].split("p ")[0]: b for b in boxes if "utilization" in b["text"]}
    assert set(nodes) == {"MicroBatchScan", "MapInPandas", "StateStoreSave", "BroadcastHashJoin"}, nodes
    assert abs(nodes["MapInPandas"]["y"] - nodes["BroadcastHashJoin"]["y"]) < 1  # side by side, not overlapping
    assert page.locator("#stale").count() == 0
    assert page.locator("#demo-load").count() == 1 and page.locator("#generator-rate").inner_text() == "200"
    assert page.get_attribute("#spark-ui-link", "href").startswith("http://driver-host:4040/")
    assert page.locator("#config tr[data-knob=cores] td.current").inner_text() == "1"
    assert "processed" not in page.locator("#status").inner_text()
    assert "capacity" in page.locator("#status").inner_text()
    visit(page, f"/jobs/{other.pk}/", "healthy-job-without-generator")
    assert page.locator("#demo-load").count() == 0  # no generator for this job: no demo control
    visit(page, f"/proposals/{done.pk}/", "healthy-proposal", ready="#config-change")
    assert page.locator("#decided-by").inner_text() == "Decided by auto-approved" or \
        "auto-approved" in page.locator("#decided-by").inner_text()
    open_common_pages(page, job, "healthy")
    row = page.locator(f"#rescales tr[data-proposal='{done.pk}']")
    assert (row.locator(".pause").inner_text(), row.locator(".added-lag").inner_text()) == ("1.2 s", "3.4 s")
    assert row.locator(".catch-up").inner_text().startswith("20 s from the start of the rescale")
    assert page.locator(".count[data-count=succeeded] b").inner_text() == "1"
    assert_clean(page)


def test_overloaded_with_a_pending_proposal(page):
    make_user("operator")
    job, pending = job_with_pending_proposal("overloaded")
    login(page)
    visit(page, f"/jobs/{job.pk}/", "overloaded-job", ready="#dag g.annotation")
    boxes = assert_no_label_overlaps(page)
    assert any(re.search(r"p 1 → \d", box["text"]) for box in boxes), boxes  # p → p' on a node
    assert all("utilization" in b["text"] and "true rate" in b["text"] for b in boxes if "p " in b["text"])
    assert page.locator("#config tr.changed").count() >= 1  # the knobs the proposal changes, highlighted
    assert f"proposal #{pending.pk}" in page.locator("#proposal").inner_text()
    # Stage names are the same in the graph, the charts and the proposal page.
    graph = set(page.evaluate("() => document.getElementById('dag').data[0].text"))
    series = page.evaluate("() => document.getElementById('series').data.map(t => t.name)")
    charts = {n.removesuffix(" utilization") for n in series if n.endswith("utilization")}
    assert graph == charts == {"stage 0", "stage 1", "stage 2"}
    visit(page, f"/proposals/{pending.pk}/", "overloaded-proposal", ready="#vertex-table")
    assert set(page.locator("#vertex-table td.stage").all_inner_texts()) <= {"stage 0", "stage 1", "stage 2",
                                                                              "stage 1 ⚠", "stage 0 ⚠", "stage 2 ⚠"}
    assert page.locator("#config-change tr.changed").count() >= 1
    assert "{" not in page.locator("#decision").inner_text()  # no raw dict
    # Approve asks first; cancelling sends nothing.
    page.click("#approve")
    page.wait_for_selector("#confirm-dialog[open]")
    assert "Approve revision" in page.locator("#confirm-text").inner_text()
    page.click("#confirm-cancel")
    page.wait_for_timeout(300)
    assert Proposal.objects.get(pk=pending.pk).status == "pending"
    open_common_pages(page, job, "overloaded")
    assert_clean(page)


def test_restarting_keeps_the_last_good_dag_marked_stale_and_charts_have_gaps(page):
    make_user("operator")
    job = make_job("restarting", metric_window_s=45)
    now = timezone.now()
    good = make_snapshots(job, count=6, end=now - timedelta(seconds=120))
    last_good = good[-1].collected_at
    for i in range(5):  # the runner restarts: Spark answers, no micro-batch completes, rates read 0
        MetricSnapshot.objects.create(job=job, collected_at=now - timedelta(seconds=75 - 15 * i), run_id="run-2",
                                      config=job.config, window_s=15.0, batches=0)
    Job.objects.filter(pk=job.pk).update(health=Job.Health.DEGRADED,
                                         last_error="no micro-batch completed in the last window")
    executing = Proposal.objects.create(job=job, status=Proposal.Status.EXECUTING, current_config=job.config,
                                        proposed_config=dict(job.config, cores=2), decided_at=now)
    Execution.objects.create(proposal=executing, path="driver-restart")
    login(page)
    visit(page, f"/jobs/{job.pk}/", "restarting-job", ready="#dag g.annotation")
    assert_no_label_overlaps(page)
    badge = page.locator("#dag-stale #stale").inner_text()
    assert badge == f"stale since {timezone.localtime(last_good):%H:%M:%S} (restarting)", badge
    assert page.locator("#status #stale").count() == 1
    assert page.locator("#backlog").inner_text() == str(good[-1].backlog)  # the last measured, not 0
    page.wait_for_selector("#series .scatterlayer")
    # No chart point after the last good window is a number: gaps (null), never 0.
    traces = page.evaluate("() => document.getElementById('series').data"
                           ".filter(t => t.name !== 'rescale').map(t => ({name: t.name, x: t.x, y: t.y}))")
    cut = last_good.isoformat()
    after = [(t["name"], y) for t in traces for x, y in zip(t["x"], t["y"]) if x > cut]
    assert after and all(y is None for _name, y in after), after
    assert all(0 not in [y for x, y in zip(t["x"], t["y"]) if x > cut] for t in traces)
    # The live refresh keeps the badge and the graph.
    page.evaluate("() => { window.__sameDocument = 'yes'; }")
    page.wait_for_timeout(5600)
    assert page.locator("#dag-stale #stale").count() == 1 and page.locator("#dag g.annotation").count() >= 3
    visit(page, f"/proposals/{executing.pk}/", "restarting-proposal", ready="#decision")
    open_common_pages(page, job, "restarting")
    assert_clean(page)


def test_suspended_and_an_operator_turns_auto_approval_back_on(page):
    make_user("operator")
    job = make_job("suspended", metric_window_s=45, mode="auto")
    make_snapshots(job, count=4)
    Job.objects.filter(pk=job.pk).update(health=Job.Health.RUNNING)
    done = make_succeeded(job, cores_from=1, cores_to=2)
    Proposal.objects.filter(pk=done.pk).update(status=Proposal.Status.ROLLED_BACK)
    rollback = Proposal.objects.create(job=job, kind=Proposal.Kind.ROLLBACK, rollback_of=done,
                                       status=Proposal.Status.SUCCEEDED, current_config=dict(job.config, cores=2),
                                       proposed_config=dict(job.config, cores=1), decided_at=timezone.now())
    Execution.objects.create(proposal=rollback, status="succeeded", path="driver-restart", downtime_s=1.1,
                             finished_at=timezone.now())
    JobPolicy.objects.filter(job=job).update(auto_approve_suspended=True, auto_approve_suspended_at=timezone.now(),
                                             auto_approve_suspended_reason=f"rollback of proposal {done.pk}")
    AuditEvent.objects.create(job=job, actor_name="system", action="auto_approve_suspended",
                              before={"auto_approve_suspended": False}, after={"auto_approve_suspended": True})
    login(page)
    visit(page, f"/jobs/{job.pk}/", "suspended-job", ready="#dag g.annotation")
    assert_no_label_overlaps(page)
    banner, mode = page.locator("#suspension").bounding_box(), page.locator("#mode-line").bounding_box()
    assert banner["y"] >= mode["y"] + mode["height"], (banner, mode)  # below the mode line, not over it
    visit(page, f"/proposals/{rollback.pk}/", "suspended-proposal", ready="#decision")
    assert f"rollback of #{done.pk}" in page.locator("#decided-by").inner_text()
    open_common_pages(page, job, "suspended")
    assert page.locator(".count[data-count='rolled back'] b").inner_text() == "1"
    assert page.locator(f"#rescales tr[data-proposal='{rollback.pk}'] .decided-by").inner_text() == \
        f"rollback of #{done.pk}"
    # History: filter the audit trail by action; each event shows its changes, not dicts.
    page.goto(f"/jobs/{job.pk}/history/")
    page.select_option("#filter-action", "auto_approve_suspended")
    page.click("#audit-filter button[type=submit]")
    page.wait_for_url(re.compile(r"action=auto_approve_suspended"))
    assert set(page.locator("#audit > tbody > tr").evaluate_all("rows => rows.map(r => r.dataset.action)")) == \
        {"auto_approve_suspended"}
    change = page.locator("#audit tr[data-field=auto_approve_suspended]").first
    assert (change.locator("th").inner_text(), change.locator("td.before").inner_text(),
            change.locator("td.after").inner_text()) == ("auto-approval suspended", "no", "yes")
    screenshot(page, "suspended-history-filtered")
    # The operator clears the suspension with a button (confirmed), and it is audited.
    page.goto(f"/jobs/{job.pk}/")
    page.click("#clear-suspension")
    with page.expect_navigation():
        page.click("#confirm-ok")
    page.wait_for_selector(".msg.success")
    assert page.locator("#suspension").count() == 0
    assert not JobPolicy.objects.get(job=job).auto_approve_suspended
    assert AuditEvent.objects.filter(job=job, action="auto_approve_resumed", actor_name="operator").count() == 1
    screenshot(page, "suspended-cleared-job")
    assert_clean(page)


def test_held_scale_down(page):
    make_user("operator")
    job = make_job("held", metric_window_s=45, scale_down_interval_s=600)
    Job.objects.filter(pk=job.pk).update(config={**job.config, "cores": 6, "source_partitions": 6,
                                                 "enrich_partitions": 6})
    job.refresh_from_db()
    t0 = timezone.now()
    make_snapshots(job, count=30, enrich_busy_s=3.0, backlog_step=0, cores=6, tasks=(6, 6, 2), batch_duration_s=0.6,
                   keeping_up=True, end=t0)
    held = evaluation_run(job=job, now=t0)
    assert held.decision == "blocked" and not job.proposals.exists(), held.reasons
    Job.objects.filter(pk=job.pk).update(health=Job.Health.RUNNING)
    login(page)
    visit(page, f"/jobs/{job.pk}/", "held-job", ready="#dag g.annotation")
    assert_no_label_overlaps(page)
    held = page.locator("#held").inner_text()
    assert re.search(r"held until \d\d:\d\d \(in 10 min\)", held), held
    assert page.locator("#apply-scale-down").count() == 1
    assert page.locator("#config tr[data-knob=cores] td.current").inner_text() == "6"
    open_common_pages(page, job, "held")
    assert_clean(page)


#: What Spark names a Python data source's stream by (a Java object's repr): one word of 130 characters.
JAVA_REPR = ("org.apache.spark.sql.execution.datasources.v2.python.PythonMicroBatchStreamWithAdmissionControl@4a0760e2"
             "RateStreamV2[rowsPerSecond=100,rampUpTimeSeconds=0,numPartitions=2]")


def test_a_long_identifier_wraps_on_every_page_that_shows_it(page):
    """"Why no proposal?" with a Java object's repr in the job's last error: the page stays as wide as the
    window (the fixture's width watch checks every page visited, this one too)."""
    make_user("operator")
    job = make_job("long-names")
    Job.objects.filter(pk=job.pk).update(health=Job.Health.DOWN, last_error=f"the query stopped: {JAVA_REPR}")
    login(page)
    visit(page, f"/jobs/{job.pk}/", "long-identifier-job", ready="#why-none")
    assert JAVA_REPR in page.inner_text("#why-none").replace("\n", "")
    assert page.evaluate("document.documentElement.scrollWidth") <= page.viewport_size["width"]
    for name, url in (("overview", "/"), ("history", f"/jobs/{job.pk}/history/"),
                      ("rescales", f"/jobs/{job.pk}/rescales/")):
        visit(page, url, f"long-identifier-{name}")
    assert page.too_wide == [], page.too_wide
    assert_clean(page)


def test_the_admin_pages_are_clean(page):
    """The admin's job and policy pages (their own favicon request included)."""
    make_user("site-admin", role="admin")
    job = make_job("admin-view")
    login(page, "site-admin")
    visit(page, f"/admin/jobs/job/{job.pk}/change/", "admin-job")
    assert page.locator("a[href*='/admin/jobs/jobpolicy/']").count() >= 1
    visit(page, f"/admin/jobs/jobpolicy/{job.policy.pk}/change/", "admin-policy")
    assert page.locator("fieldset.collapse, details").count() >= 6
    height = page.evaluate("() => document.documentElement.scrollHeight")
    assert height < 2500, height  # the old job page with the policy inline was about 5,100 px
    screenshot(page, "admin-policy")
    page.goto("/favicon.ico")
    assert_clean(page)
