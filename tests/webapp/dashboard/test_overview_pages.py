"""The jobs overview a page at a time: :data:`OVERVIEW_PAGE_SIZE` jobs a page, those that need a person
first (down, degraded, a pending proposal, a rescale in flight; then by name), the fleet's counts, a
name filter, and a live refresh of the same page and filter."""

from __future__ import annotations

import re

import pytest

from tests.webapp.factories import make_job
from webapp.dashboard.overview import OVERVIEW_PAGE_SIZE
from webapp.jobs.models import Job
from webapp.proposals.models import Proposal
from webapp.proposals.selectors import Attention, overview_counts, overview_jobs

pytestmark = pytest.mark.django_db


def names(html: bytes | str) -> list[str]:
    """The jobs of the overview's rows, in page order."""
    return re.findall(r'<tr data-job="([^"]+)">', html if isinstance(html, str) else html.decode())


def propose(job: Job, status: str) -> Proposal:
    return Proposal.objects.create(job=job, status=status, current_config=job.config,
                                   proposed_config=dict(job.config, cores=job.config.get("cores", 1) + 1))


def fleet(count: int, prefix: str = "job") -> list[Job]:
    """``count`` running jobs named ``{prefix}-000``…"""
    jobs = [make_job(f"{prefix}-{i:03d}") for i in range(count)]
    Job.objects.filter(pk__in=[j.pk for j in jobs]).update(health=Job.Health.RUNNING)
    return jobs


def test_jobs_that_need_a_person_come_first_then_by_name(client, operator):
    quiet, flight, pending, degraded, down, collecting = (make_job(n) for n in (
        "a-quiet", "b-in-flight", "c-pending", "d-degraded", "e-down", "f-collecting"))
    health = {quiet: Job.Health.RUNNING, flight: Job.Health.RUNNING, pending: Job.Health.RUNNING,
              degraded: Job.Health.DEGRADED, down: Job.Health.DOWN, collecting: Job.Health.COLLECTING}
    for job, value in health.items():
        Job.objects.filter(pk=job.pk).update(health=value)
    propose(flight, Proposal.Status.EXECUTING)
    propose(pending, Proposal.Status.PENDING)
    propose(down, Proposal.Status.PENDING)  # down outranks its pending proposal
    propose(quiet, Proposal.Status.SUCCEEDED)  # a decided one waits for nobody
    assert [(j.name, j.attention) for j in overview_jobs()] == [
        ("e-down", Attention.DOWN), ("d-degraded", Attention.DEGRADED), ("c-pending", Attention.PENDING),
        ("b-in-flight", Attention.IN_FLIGHT), ("a-quiet", Attention.NONE), ("f-collecting", Attention.NONE)]
    html = client.get("/").content.decode()
    assert names(html) == ["e-down", "d-degraded", "c-pending", "b-in-flight", "a-quiet", "f-collecting"]
    assert '<p id="jobs-summary">6 jobs, 4 need attention' in html
    assert 'id="jobs-pages"' not in html  # one page: no page links


def test_a_fleet_is_shown_a_page_at_a_time_with_links_and_counts(client, operator):
    jobs = fleet(OVERVIEW_PAGE_SIZE + 12)
    propose(jobs[-1], Proposal.Status.PENDING)
    first = client.get("/").content.decode()
    shown = names(first)
    assert len(shown) == OVERVIEW_PAGE_SIZE and shown[0] == jobs[-1].name  # attention first, on page 1
    assert shown[1:] == [j.name for j in jobs[:OVERVIEW_PAGE_SIZE - 1]]
    assert f"{OVERVIEW_PAGE_SIZE + 12} jobs, 1 needs attention" in first and "showing 1–50" in first
    assert 'href="?page=2" rel="next"' in first and 'aria-current="page">1<' in first
    second = client.get("/?page=2").content.decode()
    assert names(second) == [j.name for j in jobs[OVERVIEW_PAGE_SIZE - 1:-1]]
    assert 'href="?page=1" rel="prev"' in second and "page 2 of 2" in second
    assert names(client.get("/?page=99").content) == names(second)  # past the end: the last page
    assert names(client.get("/?page=x").content) == shown  # not a number: the first


def test_the_name_filter_keeps_to_matching_jobs_and_the_fleet_count(client, operator):
    fleet(OVERVIEW_PAGE_SIZE + 5, prefix="bids")
    clicks = fleet(3, prefix="Clicks")
    Job.objects.filter(pk=clicks[2].pk).update(health=Job.Health.DOWN)
    html = client.get("/", {"q": " clicks "}).content.decode()
    assert names(html) == [clicks[2].name, clicks[0].name, clicks[1].name]  # any case; down first
    assert f"{OVERVIEW_PAGE_SIZE + 8} jobs, 1 needs attention; 3 match “clicks”" in html
    assert 'name="q" value="clicks"' in html and "clear filter" in html
    assert 'data-live-url="/jobs/live/?q=clicks"' in html
    assert names(client.get("/", {"q": "nothing-like-it"}).content) == []
    assert "No job name contains “nothing-like-it”" in client.get("/", {"q": "nothing-like-it"}).content.decode()
    bids = client.get("/", {"q": "bids", "page": 2}).content.decode()
    assert len(names(bids)) == 5 and 'href="?q=bids&amp;page=1" rel="prev"' in bids
    assert overview_counts(q="bids") == {"jobs": OVERVIEW_PAGE_SIZE + 8, "attention": 1,
                                         "matching": OVERVIEW_PAGE_SIZE + 5}


def test_the_live_refresh_keeps_the_page_and_the_filter(client, operator):
    jobs = fleet(OVERVIEW_PAGE_SIZE + 3)
    page = client.get("/", {"page": 2}).content.decode()
    assert 'data-live-url="/jobs/live/?page=2"' in page
    live = client.get("/jobs/live/", {"page": 2}).content.decode()
    assert names(live) == [j.name for j in jobs[OVERVIEW_PAGE_SIZE:]]
    assert '<p id="jobs-summary">' in live and 'id="jobs-pages"' in live and "<html" not in live
    filtered = client.get("/jobs/live/", {"q": "job-05"}).content.decode()
    assert names(filtered) == [j.name for j in jobs if j.name.startswith("job-05")]
