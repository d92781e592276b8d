"""One definition per number, in Chromium: the job page, the proposal page and the Rescales page of one
overloaded job (arrival above capacity, batches overrunning the trigger, 90 % of each batch overhead)
state one capacity, one band and one "cores needed"; the DAG shows the overhead as its own box."""

from __future__ import annotations

import re

import pytest

from tests.browser.conftest import screenshot
from tests.browser.test_dashboard_browser import login
from tests.browser.test_dashboard_states import assert_no_label_overlaps
from tests.webapp.factories import make_job, make_snapshots, make_user
from webapp.jobs.models import Job, MetricSnapshot
from webapp.loop.evaluate import evaluation_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]

#: The figures of one page: ``{figure: [text of each element]}`` (``[data-figure]`` in ``#figures``).
FIGURES_JS = """() => {
    const out = {};
    for (const el of document.querySelectorAll('#figures [data-figure]'))
        (out[el.dataset.figure] = out[el.dataset.figure] || []).push(el.innerText.trim());
    return out; }"""

#: Every "N cores needed" and every "needed utilization X" the page's visible text states.
CORES_NEEDED = re.compile(r"(\d+) cores? needed")
BAND = re.compile(r"utilization band (\[\d\.\d\d, \d\.\d\d\])")


def _overloaded() -> tuple[Job, object]:
    """The demo's overload: arrival 900 rec/s, twice what the job reads, batches of 5 s on a 2 s trigger,
    4.5 s of each batch overhead (planning, commit, the Python workers' start); evaluated once."""
    job = make_job("overloaded", metric_window_s=45)
    make_snapshots(job, count=30, batch_duration_s=5.0)
    MetricSnapshot.objects.filter(job=job).update(batch_overhead_s=4.5)
    Job.objects.filter(pk=job.pk).update(health=Job.Health.RUNNING)
    evaluation_run(job=job)
    return job, job.proposals.get(status="pending")


def _read(page, url: str, name: str) -> tuple[dict, str]:
    page.goto(url)
    page.wait_for_selector("#figures [data-figure=capacity]")
    screenshot(page, f"one-figure-{name}")
    return page.evaluate(FIGURES_JS), page.locator("body").inner_text()


def test_the_job_proposal_and_rescales_pages_state_one_capacity_band_and_cores_needed(page):
    make_user("operator")
    job, pending = _overloaded()
    login(page)
    pages = {"job": _read(page, f"/jobs/{job.pk}/", "job")}
    boxes = [b["text"] for b in assert_no_label_overlaps(page)]  # the overhead's box overlaps no stage's
    overhead = [b for b in boxes if "batch overhead" in b]
    assert len(overhead) == 1 and "90% of each batch" in overhead[0], boxes
    assert len([b for b in boxes if "utilization" in b]) == 3  # the stages' boxes, beside it
    assert "arrival" in page.locator("#status").inner_text()
    pages["proposal"] = _read(page, f"/proposals/{pending.pk}/", "proposal")
    job_capacity = page.get_attribute("#job-capacity", "data-now")
    predicted = page.locator("#predicted-realized td#capacity").inner_text()
    expected = page.get_attribute("#job-capacity", "data-expected")
    reasons = page.locator("#reasons").inner_text()
    pages["rescales"] = _read(page, f"/jobs/{job.pk}/rescales/", "rescales")

    figures = {name: figures for name, (figures, _text) in pages.items()}
    for name, one in figures.items():  # one element per figure on each page
        assert {key: len(texts) for key, texts in one.items()} == {"capacity": 1, "load": 1, "band": 1,
                                                                    "cores-needed": 1}, (name, one)
    assert figures["job"] == figures["proposal"] == figures["rescales"], figures
    capacity = figures["job"]["capacity"][0]
    assert capacity.isdigit() and capacity == job_capacity  # the per-stage table's job capacity
    # The frozen prediction: the same function on the proposed configuration (rounded apart by at most 1).
    assert predicted.endswith(" rec/s") and abs(int(predicted.split()[0].replace(",", "")) - int(expected)) <= 1
    band = figures["job"]["band"][0]
    cores_needed = CORES_NEEDED.search(figures["job"]["cores-needed"][0]).group(1)
    for name, (_figures, text) in pages.items():
        assert set(BAND.findall(text)) <= {band}, name  # no other band on the page
        assert set(CORES_NEEDED.findall(text)) == {cores_needed}, name  # no other "cores needed"
        assert "busy cores per second" not in text, name
    assert band in reasons and "needed utilization" in reasons and "load" not in reasons
    assert not page.js_errors, page.js_errors
