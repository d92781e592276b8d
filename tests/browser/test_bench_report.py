"""``bench-report.html`` opens in Chromium with no network access and renders
one Plotly panel per workload (the quick benchmark's)."""

from __future__ import annotations

import pytest

from scaling.bench.acceptance import acceptance_notes
from scaling.bench.report import write_report
from scaling.bench.run import QUICK, run_bench


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    result = run_bench(quick=True, seed=7)
    path = tmp_path_factory.mktemp("bench") / "bench-report.html"
    return write_report(result, path, notes=acceptance_notes(result.rows, result.policy))


def test_bench_report_renders_one_panel_per_workload_offline(chromium, report):
    context = chromium.new_context(offline=True, viewport={"width": 1400, "height": 1000})
    requests: list[str] = []
    context.route("**/*", lambda route: (requests.append(route.request.url), route.continue_() if
                                         route.request.url.startswith("file:") else route.abort()))
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        page.goto(report.as_uri())
        page.wait_for_function("document.querySelectorAll('section.panel .main-svg').length >= "
                               f"{len(QUICK)}", timeout=30_000)
        panels = page.locator("section.panel")
        assert panels.count() == len(QUICK)
        assert sorted(panels.nth(i).get_attribute("data-workload") for i in range(panels.count())) == \
            sorted(w.name for w in QUICK)
        for i in range(panels.count()):
            panel = panels.nth(i)
            assert panel.locator(".js-plotly-plot .main-svg").count() >= 1
            # load, and per policy a capacity and a backlog line
            assert panel.locator(".scatterlayer .trace").count() >= 1 + 2 * 5
        assert page.evaluate("typeof window.Plotly") == "object"
        assert page.locator("#bench-table tbody tr").count() == sum(6 if w.mode == "micro-batch" else 5 for w in QUICK)
        assert errors == []
        assert [url for url in requests if not url.startswith("file:")] == []
    finally:
        context.close()
