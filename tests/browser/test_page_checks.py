"""The operator's pages tell one story, in Chromium: the history, proposal, job and Rescales pages of
a job after an approval (executed, verified), a rollback, an auto-approval and an inconclusive
verification (``tests/browser/pagestates.py``), at a 1,400 px wide window, each screenshotted to
``test-artifacts/pagechecks-{state}-{page}.png`` and checked:

- **repr**: no Python repr in the visible text (``{'``, ``['``, ``None``, ``True``/``False``);
- **width**: the page is not wider than the window;
- **zero-batches**: no number computed from zero batches (the status line of a window without a
  batch says "no batch yet", never "capacity 0 rec/s" or "R 0.00"; a realized figure from a
  verification of 0 batches is not "0 %" or "0 rec/s");
- **catch-up**: the catch-up figures of one execution on one page (``[data-figure=catch-up]``)
  agree: the same duration from the same origin, or all "not caught up yet".

Each state is built and its four pages are read once per session (the ``observed`` fixture); each
(state, page, check) is then its own test, so a check that fails on a page bug being fixed is
marked ``xfail(strict=True)`` on its own and turns into a failure the day the fix lands.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from tests.browser.catch_up import CatchUp, disagree, read_catch_up
from tests.browser.conftest import screenshot, watch_width
from tests.browser.pagestates import STATES
from tests.browser.test_dashboard_browser import login
from tests.webapp.factories import make_job, make_user
from webapp.jobs.models import Job, MetricSnapshot
from webapp.proposals.models import Proposal

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

PAGES = ("history", "proposal", "job", "rescales")
CHECKS = ("repr", "width", "zero-batches", "catch-up")


@dataclass
class Observed:
    """What Chromium rendered of one page of one state."""

    text: str
    scroll_width: int
    window_width: int
    figures: list[dict]
    zero_batch_figures: list[str]
    status: str = ""
    facts: dict = field(default_factory=dict)


#: Every catch-up figure on the page: the element's text, its row's label (the ``th`` of its row,
#: which may state the origin) and the execution it is about (its own ``data-proposal``, the nearest
#: ancestor's, else the page's proposal).
FIGURES_JS = """() => Array.from(document.querySelectorAll('[data-figure="catch-up"]')).map(el => {
    const holder = el.closest('[data-proposal]');
    const label = el.closest('tr') ? el.closest('tr').querySelector('th') : null;
    return {text: el.innerText.trim(), label: label ? label.innerText.trim() : '',
            proposal: holder ? holder.dataset.proposal : 'page'}; })"""

#: The realized figures a verification states (the proposal page's realized column, the history's
#: verification tables, the Rescales page's capacity column), by proposal.
REALIZED_JS = """(pk) => {
    const cells = [...document.querySelectorAll('#predicted-realized td.realized')];
    for (const row of document.querySelectorAll(`#audit tr[data-action^="verification_"][data-proposal="${pk}"]`))
        cells.push(...row.querySelectorAll('tr[data-field] td.after'));
    cells.push(...document.querySelectorAll(`#rescales tr[data-proposal="${pk}"] td`));
    return cells.map(c => c.innerText.trim()); }"""

#: Words that would be a Python value printed into the page: a dict or list repr, None, True, False
#: ("None of ..." is prose).
REPR = re.compile(r"\{'|\['|\bNone\b(?! of\b)|\b(?:True|False)\b")


def _read(page, url: str, name: str, proposal: Proposal) -> Observed:
    page.goto(url)
    page.wait_for_selector("main")
    page.wait_for_load_state("networkidle")
    if page.locator(".plot").count():
        page.wait_for_function("() => [...document.querySelectorAll('.plot')].every(d => "
                               "d.querySelector('.main-svg') || !d.data)")
    screenshot(page, name)
    status = page.locator("#status").inner_text() if page.locator("#status").count() else ""
    return Observed(text=page.evaluate("() => document.body.innerText"),
                    scroll_width=page.evaluate("() => document.documentElement.scrollWidth"),
                    window_width=page.evaluate("() => window.innerWidth"), figures=page.evaluate(FIGURES_JS),
                    zero_batch_figures=page.evaluate(REALIZED_JS, proposal.pk), status=status)


def _urls(job, proposal) -> dict[str, str]:
    return {"history": f"/jobs/{job.pk}/history/", "proposal": f"/proposals/{proposal.pk}/",
            "job": f"/jobs/{job.pk}/", "rescales": f"/jobs/{job.pk}/rescales/"}


@pytest.fixture(scope="session")
def observed(chromium, live_server, django_db_setup, django_db_blocker):
    """``observe(state)``: build the state (once per session), open its four pages in Chromium and
    return ``{page: Observed}``; the database is flushed again afterwards."""
    cache: dict[str, dict[str, Observed]] = {}

    def observe(state: str) -> dict[str, Observed]:
        if state in cache:
            return cache[state]
        with django_db_blocker.unblock():
            try:
                job, proposal = STATES[state]()
                facts = {"batches_ever": job.snapshots.filter(batches__gt=0).exists(), "proposal": proposal.pk,
                         "verified_batches": (proposal.verification_detail or {}).get("batches"),
                         "executed": hasattr(proposal, "execution")}
                context = chromium.new_context(base_url=live_server.url, viewport={"width": 1400, "height": 1000})
                context.set_default_timeout(15_000)
                too_wide = watch_width(context)
                page = context.new_page()
                page.goto("/accounts/login/?next=/")
                page.fill("input[name=username]", "operator")
                page.fill("input[name=password]", "pw-for-tests")
                page.click("button[type=submit]")
                page.wait_for_url(re.compile(r"/$"))
                pages = {name: _read(page, url, f"pagechecks-{state}-{name}", proposal)
                         for name, url in _urls(job, proposal).items()}
                for seen in pages.values():
                    seen.facts = facts
                context.close()
                assert not too_wide, too_wide
            finally:
                call_command("flush", interactive=False, verbosity=0)
        cache[state] = pages
        return pages

    return observe


# --- the checks ------------------------------------------------------------------------------------

def check_repr(seen: Observed) -> None:
    found = [seen.text[max(0, m.start() - 60):m.end() + 60] for m in REPR.finditer(seen.text)]
    assert not found, f"Python values in the page's text: {found}"


def check_width(seen: Observed) -> None:
    assert seen.scroll_width <= seen.window_width, f"the page is {seen.scroll_width} px wide in a " \
                                                   f"{seen.window_width} px window"


ZERO_STATUS = re.compile(r"capacity 0 rec/s|R 0\.00|batch 0\.00 s")
ZERO_REALIZED = re.compile(r"^0 %|^0 rec/s|→ 0 rec/s|^0\.00$")


def check_zero_batches(seen: Observed, page: str) -> None:
    assert not ZERO_STATUS.search(seen.status), seen.status
    if page == "job" and not seen.facts["batches_ever"]:
        assert "no batch yet" in seen.status.lower(), f"no window has a batch yet: {seen.status!r}"
    if seen.facts["verified_batches"] == 0:
        zeros = [text for text in seen.zero_batch_figures if ZERO_REALIZED.search(text)]
        assert not zeros, f"figures of a verification of 0 batches: {zeros}"


#: The fewest catch-up figures each page shows of an executed proposal (its execution's): the
#: proposal page's execution line and realized column, the Rescales row, the history's execution row.
MIN_FIGURES = {"proposal": 2, "rescales": 1, "history": 1, "job": 0}


def check_catch_up(seen: Observed, page: str) -> None:
    by_proposal: dict[str, list[tuple[str, CatchUp | None]]] = {}
    for figure in seen.figures:
        proposal = str(seen.facts["proposal"]) if figure["proposal"] == "page" else figure["proposal"]
        by_proposal.setdefault(proposal, []).append((figure["text"], read_catch_up(figure["text"], figure["label"])))
    if seen.facts["executed"]:
        mine = by_proposal.get(str(seen.facts["proposal"]), [])
        assert len(mine) >= MIN_FIGURES[page], f"catch-up figures marked data-figure=catch-up: {seen.figures}"
    for proposal, figures in by_proposal.items():
        unreadable = [text for text, value in figures if value is None]
        assert not unreadable, f"proposal {proposal}: catch-up figures without a value: {unreadable}"
        pairs = [(a.text, b.text) for i, (_t, a) in enumerate(figures) for _u, b in figures[i + 1:] if disagree(a, b)]
        assert not pairs, f"proposal {proposal}: catch-up figures disagree: {pairs}"


def run_check(seen: Observed, page: str, check: str) -> None:
    {"repr": lambda: check_repr(seen), "width": lambda: check_width(seen),
     "zero-batches": lambda: check_zero_batches(seen, page), "catch-up": lambda: check_catch_up(seen, page)}[check]()


#: (state, page, check) that fail on today's pages because of a bug another change fixes:
#: strict, so each turns into a failure once its fix lands and the mark must go.
KNOWN: dict[tuple[str, str, str], str] = {}


def _cases():
    for state in STATES:
        for page in PAGES:
            for check in CHECKS:
                reason = KNOWN.get((state, page, check))
                marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
                yield pytest.param(state, page, check, marks=marks, id=f"{state}-{page}-{check}")


@pytest.mark.parametrize("state, page, check", list(_cases()))
def test_page_tells_one_story(observed, state, page, check):
    run_check(observed(state)[page], page, check)


@pytest.mark.django_db(transaction=True)
def test_before_the_first_batch_the_status_line_says_no_batch_yet(page):
    """A job whose query has started but completed no micro-batch yet: three windows of no batch."""
    make_user("operator")
    job = make_job("first-batch", metric_window_s=45)
    now = timezone.now()
    for i in range(3):
        MetricSnapshot.objects.create(job=job, collected_at=now - timedelta(seconds=15 * (2 - i)), run_id="run-1",
                                      config=job.config, window_s=15.0, batches=0, executors=1, cores=1)
    Job.objects.filter(pk=job.pk).update(health=Job.Health.COLLECTING)
    login(page)
    page.goto(f"/jobs/{job.pk}/")
    page.wait_for_selector("#status")
    screenshot(page, "pagechecks-before-the-first-batch-job")
    status = page.locator("#status").inner_text()
    assert "no batch yet" in status.lower(), status
    assert not ZERO_STATUS.search(status), status
