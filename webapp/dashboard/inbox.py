"""The inbox page: everything that waits for a person, across jobs (``webapp.inbox.items``)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from webapp.inbox.items import inbox_items


@login_required
def inbox(request: HttpRequest) -> HttpResponse:
    """One row per waiting item: what, which job, since when, and a link to the page to act on it."""
    now = timezone.now()
    return render(request, "dashboard/inbox.html", {"items": inbox_items(now), "now": now})
