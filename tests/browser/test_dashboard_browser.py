"""What an operator sees, in a real browser: Debian's Chromium driven by Playwright against a live
server, with a real Celery worker executing approved proposals (the runner's control channel is
answered by a fake runner thread, so no Spark is needed here; tests/e2e covers Spark)."""

from __future__ import annotations

import re

import pytest

from tests.browser.conftest import screenshot
from tests.repo import ROOT
from tests.webapp.dashboard_factories import make_succeeded
from tests.webapp.factories import make_job, make_snapshots, make_user
from webapp.dashboard.overview import OVERVIEW_PAGE_SIZE
from webapp.jobs.models import Job
from webapp.loop.evaluate import evaluation_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]


def login(page, username: str = "operator") -> None:
    page.goto("/accounts/login/?next=/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", "pw-for-tests")
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/$"))


def job_with_pending_proposal(name: str = "nexmark-bids"):
    """A job whose metric window is full and under-provisioned: a pending scale-up proposal."""
    job = make_job(name, metric_window_s=45)
    make_snapshots(job, count=30)
    Job.objects.filter(pk=job.pk).update(health=Job.Health.RUNNING)
    evaluation_run(job=job)
    return job, job.proposals.get(status="pending")


def test_job_page_dag_has_one_node_per_vertex_coloured_by_utilization(page):
    make_user("operator")
    job, pending = job_with_pending_proposal()
    other = make_job("clickstream")
    make_snapshots(other, count=3, arrival=200.0, enrich_busy_s=2.0)
    login(page)
    rows = page.locator("#jobs-rows tr")
    assert rows.count() == 2
    assert f"#{pending.pk}" in page.locator("tr[data-job=nexmark-bids]").inner_text()
    screenshot(page, "jobs-overview")

    page.click("text=nexmark-bids")
    page.wait_for_selector("#dag g.annotation")
    # Plotly's own copy of the figure: one node per vertex, colour = utilization on the fixed 0..1 scale.
    nodes = page.evaluate("""() => {
        const trace = document.getElementById('dag').data.find(t => t.name === 'vertices');
        return {n: trace.x.length, colour: trace.marker.color, cmin: trace.marker.cmin, cmax: trace.marker.cmax};
    }""")
    assert nodes["n"] == 3
    assert (nodes["cmin"], nodes["cmax"]) == (0, 1)
    assert all(0 <= u <= 1 for u in nodes["colour"])
    # What is drawn: three boxes whose fills follow the utilization (different loads, different colours).
    fills = page.evaluate("""() => Array.from(document.querySelectorAll('#dag g.annotation'))
        .filter(g => g.textContent.includes('utilization'))
        .map(g => ({text: g.textContent, fill: g.querySelector('rect.bg').style.fill}))""")
    assert len(fills) == 3
    by_utilization = sorted(zip(nodes["colour"], [f["fill"] for f in fills]))
    assert by_utilization[0][1] != by_utilization[-1][1], by_utilization
    assert page.locator("#dag .colorbar").count() == 1
    assert any("p 1 → " in f["text"] for f in fills)
    # The charts share one time axis and have a trace per vertex's utilization.
    page.wait_for_selector("#series .scatterlayer")
    names = page.evaluate("() => document.getElementById('series').data.map(t => t.name)")
    assert sum(1 for n in names if n.endswith("utilization")) == 3
    assert page.locator("#proposal").inner_text().count(f"proposal #{pending.pk}") == 1
    screenshot(page, "job-page", also=ROOT / "docs" / "job-page.png")
    assert not page.js_errors, page.js_errors


def test_the_overview_pages_and_filters_and_its_live_refresh_keeps_both(page):
    make_user("operator")
    jobs = [make_job(f"job-{i:03d}") for i in range(OVERVIEW_PAGE_SIZE + 5)]
    Job.objects.update(health=Job.Health.RUNNING)
    Job.objects.filter(pk=jobs[-1].pk).update(health=Job.Health.DOWN)
    login(page)

    def shown() -> list[str]:
        return [row.get_attribute("data-job") for row in page.locator("#jobs-rows tr").all()]

    assert len(shown()) == OVERVIEW_PAGE_SIZE and shown()[0] == jobs[-1].name  # down comes first
    assert page.inner_text("#jobs-summary").startswith(f"{len(jobs)} jobs, 1 needs attention")
    page.click("#jobs-pages a[rel=next]")
    page.wait_for_url("**/?page=2")
    assert shown() == [j.name for j in jobs[OVERVIEW_PAGE_SIZE - 1:-1]]
    Job.objects.filter(pk=jobs[50].pk).update(health=Job.Health.DEGRADED)  # to page 1 at the next refresh
    page.wait_for_selector("tr[data-job=job-050]", state="detached", timeout=15_000)
    assert page.url.endswith("/?page=2") and shown() == ["job-048", "job-049", "job-051", "job-052", "job-053"]
    assert page.inner_text("#jobs-summary").startswith(f"{len(jobs)} jobs, 2 need attention")
    screenshot(page, "jobs-overview-page-2")

    page.fill("#jobs-filter input[name=q]", "job-05")
    page.click("#jobs-filter button[type=submit]")
    page.wait_for_url("**/?q=job-05")
    assert shown() == ["job-054", "job-050", "job-051", "job-052", "job-053"]
    assert page.get_attribute("#jobs-page", "data-live-url") == "/jobs/live/?q=job-05"
    Job.objects.filter(pk=jobs[51].pk).update(health=Job.Health.DOWN)
    page.wait_for_function("() => document.querySelector('#jobs-rows tr').dataset.job === 'job-051'",
                           timeout=15_000)
    assert shown() == ["job-051", "job-054", "job-050", "job-052", "job-053"]  # the refresh kept the filter


def test_approve_a_proposal_and_watch_the_execution_succeed_without_reload(page, worker):
    make_user("operator")
    job, pending = job_with_pending_proposal()
    runner = worker(job.name)
    login(page)
    page.goto(f"/proposals/{pending.pk}/")
    assert page.locator("#status").get_attribute("data-status") == "pending"
    assert page.locator("#vertex-table tbody tr").count() == 3
    downtime = page.locator("#downtime").inner_text()
    assert "measured" in downtime or "configured" in downtime
    screenshot(page, "proposal-page")

    page.click("#approve")
    with page.expect_navigation():
        page.click("#confirm-ok")  # the confirmation dialog sends the form
    page.wait_for_url(f"**/proposals/{pending.pk}/")
    # From here on the page must update itself: mark the document, then wait for the live refresh.
    page.evaluate("() => { window.__sameDocument = 'yes'; }")
    page.wait_for_selector("#execution[data-status=succeeded]", timeout=60_000)
    assert page.evaluate("() => window.__sameDocument") == "yes", "the page was reloaded"
    assert page.locator("#status").get_attribute("data-status") == "succeeded"
    assert "downtime 1.2 s" in page.locator("#execution").inner_text()
    assert len(runner.commands) == 1 and runner.commands[0]["config"]["cores"] == pending.proposed_config["cores"]
    screenshot(page, "proposal-succeeded")
    pending.refresh_from_db()
    assert pending.status == "succeeded"
    assert not page.js_errors, page.js_errors


@pytest.mark.parametrize("where", ["proposal", "job"])
def test_the_proposal_and_job_pages_roll_back_only_once_confirmed(page, where):
    """The history page's Roll back, with its confirmation, on the proposal's page and the job page:
    cancelled, nothing happens; confirmed, the rollback starts and the page it came from says so."""
    make_user("operator")
    job = make_job("rollback-here", metric_window_s=45)
    make_snapshots(job, count=4)
    done = make_succeeded(job, cores_from=1, cores_to=2)
    here = f"/proposals/{done.pk}/" if where == "proposal" else f"/jobs/{job.pk}/"
    login(page)
    page.goto(here)
    page.click(f"#rollback-{done.pk}")
    page.wait_for_selector("#confirm-dialog[open]")
    assert page.locator("#confirm-text").inner_text() == (
        f"Roll back proposal #{done.pk}? The job restarts with the configuration it replaced (cores 2 → 1), "
        "and auto-approval is suspended until a person turns it back on.")
    page.click("#confirm-cancel")
    page.wait_for_timeout(1000)
    assert page.locator("#confirm-dialog[open]").count() == 0 and job.proposals.count() == 1
    page.click(f"#rollback-{done.pk}")
    with page.expect_navigation():
        page.click("#confirm-ok")
    page.wait_for_url(f"**{here}")
    assert f"Rolling back proposal {done.pk}" in page.locator("#messages").inner_text()
    done.refresh_from_db()
    assert done.status == "rolling_back" and job.proposals.filter(kind="rollback").count() == 1


def test_history_page_rolls_back_only_once_confirmed(page, worker):
    """Rollback without confirming does nothing; with confirming, it rolls back."""
    make_user("operator")
    job = make_job("rollback-me", metric_window_s=45)
    make_snapshots(job, count=4)
    done = make_succeeded(job, cores_from=1, cores_to=2)
    runner = worker(job.name)
    login(page)
    page.goto(f"/jobs/{job.pk}/history/")
    row = page.locator(f"#executions tr[data-proposal='{done.pk}']")
    assert "1.5 s" in row.inner_text()
    page.click(f"#rollback-{done.pk}")
    page.wait_for_selector("#confirm-dialog[open]")
    assert "Roll back proposal" in page.locator("#confirm-text").inner_text()
    screenshot(page, "history-rollback-confirm")
    page.click("#confirm-cancel")
    page.wait_for_timeout(1500)
    assert page.locator("#confirm-dialog[open]").count() == 0
    assert job.proposals.count() == 1 and not runner.commands  # cancelled: nothing was sent
    page.click(f"#rollback-{done.pk}")
    with page.expect_navigation():
        page.click("#confirm-ok")
    page.wait_for_url(f"**/jobs/{job.pk}/history/")
    page.evaluate("() => { window.__sameDocument = 'yes'; }")
    # The original proposal ends rolled back once the rollback's execution succeeds (live refresh).
    page.wait_for_function(
        f"() => (document.querySelector(\"#executions tr[data-proposal='{done.pk}']\") || {{}}).innerText"
        f"?.includes('rolled back')", timeout=60_000)
    assert page.evaluate("() => window.__sameDocument") == "yes"
    assert page.locator(".suspended").count() >= 1  # auto-approval suspended, and the page says so
    assert runner.commands and runner.commands[-1]["config"]["cores"] == 1
    screenshot(page, "history-rolled-back")
    done.refresh_from_db()
    assert done.status == "rolled_back"
    job.refresh_from_db()
    assert job.config["cores"] == 1
