"""The dashboard with 100 jobs × 24 h of 15 s snapshots (576,000 snapshots, 1,728,000 vertex rows):
every page renders and shows what it should. Their server time is measured by the benchmark
``python -m tests.webapp.dashboard.bench_dashboard`` (target 300 ms), never asserted here."""

from __future__ import annotations

import pytest
from django.utils import timezone

from tests.webapp.dashboard.bench_dashboard import JOBS, PAGES, SNAPSHOTS_PER_JOB, make_fleet
from tests.webapp.factories import make_user
from webapp.jobs.models import MetricSnapshot

pytestmark = [pytest.mark.perf, pytest.mark.django_db, pytest.mark.timeout(600)]


def test_every_page_renders_the_fleet_of_100_jobs_of_24_h(client):
    jobs = make_fleet(timezone.now())
    assert MetricSnapshot.objects.count() == JOBS * SNAPSHOTS_PER_JOB
    client.force_login(make_user("fleet"))
    job = jobs[JOBS // 2]
    for _name, url in PAGES:
        response = client.get(url.format(job=job.pk))
        assert response.status_code == 200, url
    overview = client.get("/").content.decode() + client.get("/?page=2").content.decode()  # 50 jobs a page
    assert all(f'data-job="{j.name}"' in overview for j in jobs), "a job is missing"
    assert f"{JOBS} jobs, 0 need attention" in overview
    page = client.get(f"/jobs/{job.pk}/?range=24h").content.decode()
    assert job.name in page and "plotly" in page.lower()
    history = client.get(f"/jobs/{job.pk}/history/").content.decode()
    assert history.count("driver-restart") == 2  # the two rescales of the day
    live = client.get(f"/jobs/{job.pk}/live/").json()
    assert live
