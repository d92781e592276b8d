"""The jobs overview's rows as the page shows them: every link, number and word of a row computed in
Python, once, so that the template only places them. A fleet has hundreds of rows, and Django's
``{% url %}`` tag and ``floatformat`` filter per row cost more than the overview's queries.

The overview shows :data:`OVERVIEW_PAGE_SIZE` jobs a page, those that need a person first (the
database orders and slices, so a page costs the same at any fleet size).

:func:`fixed` rounds as ``floatformat`` does (half up, from the float's shortest decimal form, no
negative zero); :func:`pk_url` reverses a URL once per page and fills in each primary key.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

from django.core.paginator import Page, Paginator
from django.urls import reverse
from django.utils import timezone
from django.utils.functional import cached_property
from django.utils.http import urlencode

from webapp.dashboard.templatetags.knobs import knob_changes
from webapp.proposals.reason_text import health_note
from webapp.proposals.selectors import JobRow, jobs_overview, overview_counts, overview_jobs

#: Jobs per page of the overview.
OVERVIEW_PAGE_SIZE = 50
#: The longest name filter (``?q=``) read; a job's name is at most 100 characters.
_Q_MAX = 100

_PK = 2_147_480_001  # a primary key no URL pattern part repeats


def fixed(value: float, places: int) -> str:
    """``value`` with ``places`` decimals, as Django's ``floatformat:places`` renders it."""
    rounded = Decimal(repr(float(value))).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)
    return f"{abs(rounded) if rounded == 0 else rounded:f}"


def pk_url(name: str) -> Callable[[int], str]:
    """``pk -> reverse(name, args=[pk])`` for a URL with one integer argument, reversed once."""
    prefix, suffix = reverse(name, args=[_PK]).split(str(_PK))
    return lambda pk: f"{prefix}{int(pk)}{suffix}"


def _plural(count: int) -> str:
    return "" if count == 1 else "s"


@dataclass(frozen=True)
class OverviewRow:
    """One row of the overview, ready to place. Empty strings are "not shown"; ``backlog_state`` is
    ``none`` (no snapshot), ``no_data`` (the newest window had no batch) or ``value``."""

    name: str
    url: str
    health: str
    health_text: str
    health_note: str
    window_left: str
    config: str
    pending_url: str
    pending_text: str
    backlog_state: str
    collected_at: str
    backlog: int | None
    trend: str
    trend_title: str
    trend_arrow: str
    batch_ratio: str
    last_url: str
    last_colour: str
    last_text: str
    downtime: str
    mode: str


def _last(row: JobRow, proposal_url: Callable[[int], str]) -> dict[str, str]:
    last = row.last
    if last is None:
        return {"last_url": "", "last_colour": "", "last_text": "", "downtime": ""}
    execution = getattr(last, "execution", None)  # None when it has none (the reverse one-to-one raises)
    downtime = execution.downtime_s if execution is not None else None
    return {"last_url": proposal_url(last.pk), "last_colour": last.colour,
            "last_text": f"#{last.pk} {last.get_status_display()}",
            "downtime": fixed(downtime, 1) if downtime is not None else ""}


def overview_row(row: JobRow, *, job_url: Callable[[int], str], proposal_url: Callable[[int], str]) -> OverviewRow:
    """The :class:`OverviewRow` of one :class:`~webapp.proposals.selectors.JobRow`."""
    job, snap, trend = row.job, row.snapshot, row.backlog_trend_per_s
    running = snap is not None and bool(snap.batches)
    return OverviewRow(
        name=job.name, url=job_url(job.pk), health=job.health, health_text=job.get_health_display(),
        health_note=health_note(job.health_reason),
        window_left=fixed(row.window_left_s, 0) if row.window_left_s else "",
        config=(f"{snap.cores} core{_plural(snap.cores)} · {snap.executors} executor{_plural(snap.executors)}"
                if running else ""),
        pending_url=proposal_url(row.pending.pk) if row.pending else "",
        pending_text=f"#{row.pending.pk}: {knob_changes(row.pending)}" if row.pending else "",
        backlog_state="none" if snap is None else ("value" if snap.batches else "no_data"),
        collected_at=timezone.localtime(snap.collected_at).strftime("%H:%M:%S") if snap is not None else "",
        backlog=snap.backlog if snap is not None else None,
        trend=fixed(trend, 0) if trend is not None else "", trend_title=fixed(trend, 1) if trend is not None else "",
        trend_arrow=row.trend_arrow, batch_ratio=fixed(snap.batch_ratio, 2) if running else "",
        mode=job.policy.mode, **_last(row, proposal_url))


def overview_rows(rows: list[JobRow]) -> list[OverviewRow]:
    """The overview's rows, in order."""
    job_url, proposal_url = pk_url("dashboard:job"), pk_url("dashboard:proposal")
    return [overview_row(row, job_url=job_url, proposal_url=proposal_url) for row in rows]


class _CountedPaginator(Paginator):
    """A :class:`Paginator` whose count is known already (from :func:`overview_counts`): no COUNT query."""

    def __init__(self, object_list, per_page: int, *, count: int) -> None:
        super().__init__(object_list, per_page)
        self._known = count

    @cached_property
    def count(self) -> int:
        return self._known


def _summary(counts: dict[str, int], q: str) -> str:
    jobs, attention = counts["jobs"], counts["attention"]
    text = f"{jobs} job{_plural(jobs)}, {attention} need{'s' if attention == 1 else ''} attention"
    return f"{text}; {counts['matching']} match “{q}”" if q else text


def overview_page(params) -> dict:
    """The overview's context for the query ``params`` (``page``, ``q``: a name filter): ``rows`` (one
    page of :class:`OverviewRow`), ``page`` (Django's :class:`Page`; any page number made valid),
    ``links`` (``{"number", "url", "current"}`` per page link, ``{"gap": True}`` where pages are elided),
    ``previous_url`` and ``next_url`` ("" at the ends), ``summary`` ("500 jobs, 3 need attention"),
    ``q`` and ``live_url`` (the live fragment of the same page and filter). Four queries at any fleet size."""
    q = params.get("q", "").strip()[:_Q_MAX]
    counts = overview_counts(q=q)
    paginator = _CountedPaginator(overview_jobs(q=q), OVERVIEW_PAGE_SIZE, count=counts["matching"])
    page: Page = paginator.get_page(params.get("page"))
    keep = {"q": q} if q else {}

    def url(number: int) -> str:
        return f"?{urlencode({**keep, 'page': number})}"

    links = [{"gap": True} if n == Paginator.ELLIPSIS else {"number": n, "url": url(n), "current": n == page.number}
             for n in paginator.get_elided_page_range(page.number, on_each_side=2, on_ends=1)]
    here = {**keep, **({"page": page.number} if page.number > 1 else {})}
    return {"rows": overview_rows(jobs_overview(list(page.object_list))), "page": page, "q": q,
            "summary": _summary(counts, q), "links": links if paginator.num_pages > 1 else [],
            "previous_url": url(page.previous_page_number()) if page.has_previous() else "",
            "next_url": url(page.next_page_number()) if page.has_next() else "",
            "live_url": reverse("dashboard:jobs_live") + (f"?{urlencode(here)}" if here else "")}
