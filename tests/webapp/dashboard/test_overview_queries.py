"""The jobs overview reads each table once, whatever the number of jobs: the same SQL queries for 5
jobs as for 50 and for 500 (a page of 50 shown), each job with snapshots, a pending proposal and an
executed one. Its rows are
presented in Python (``webapp.dashboard.overview``), as the template's filters would render them."""

from __future__ import annotations

import pytest
from django.db import connection
from django.template.defaultfilters import floatformat
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from tests.webapp.dashboard_factories import make_succeeded
from tests.webapp.factories import make_job, make_snapshots, make_user
from webapp.dashboard.overview import fixed, pk_url
from webapp.jobs.models import Job
from webapp.loop.evaluate import evaluation_run
from webapp.proposals.models import Proposal

pytestmark = pytest.mark.django_db


def add_jobs(first: int, count: int) -> None:
    """Jobs with 13 snapshots (the backlog trend reads an earlier one), a pending scale-up and an
    executed rescale; every third one still collecting (the overview counts its window)."""
    for i in range(first, first + count):
        job = make_job(f"job-{i:03d}", metric_window_s=45)
        make_snapshots(job, count=13)
        evaluation_run(job=job)
        make_succeeded(job, downtime_s=1.0)
        Job.objects.filter(pk=job.pk).update(health=Job.Health.COLLECTING if i % 3 == 0 else Job.Health.RUNNING)


def overview_queries(client) -> tuple[int, bytes]:
    with CaptureQueriesContext(connection) as captured:
        response = client.get("/")
    assert response.status_code == 200
    return len(captured), response.content


def test_the_overview_of_500_jobs_makes_as_many_queries_as_that_of_50_and_of_5(client):
    client.force_login(make_user("op"))
    add_jobs(0, 5)
    few, _ = overview_queries(client)
    add_jobs(5, 45)
    assert Proposal.objects.filter(status=Proposal.Status.PENDING).count() == 50
    many, html = overview_queries(client)
    assert html.count(b"<tr data-job=") == 50 and html.count(b'class="pending"') == 50
    assert many == few <= 12
    for i in range(450):  # a fleet of 500: the page still shows the first 50
        Proposal.objects.create(job=make_job(f"later-{i:03d}"), status=Proposal.Status.PENDING)
    fleet, html = overview_queries(client)
    assert html.count(b"<tr data-job=") == 50 and b"500 jobs, 500 need attention" in html
    assert fleet == many


@pytest.mark.parametrize("value", [-2.5, -0.5, -0.4, -0.04, 0.0, 0.05, 0.125, 1.005, 2.5, 2.675, 12.345, 1e20,
                                   1234567.891, -98765.4321])
@pytest.mark.parametrize("places", [0, 1, 2])
def test_fixed_rounds_as_floatformat(value, places):
    assert fixed(value, places) == floatformat(value, places)


def test_pk_url_is_reverse():
    for name in ("dashboard:job", "dashboard:proposal"):
        assert [pk_url(name)(pk) for pk in (1, 12, 2_147_480_001)] == [reverse(name, args=[pk])
                                                                      for pk in (1, 12, 2_147_480_001)]
