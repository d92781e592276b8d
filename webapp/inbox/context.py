"""The navigation bar's inbox count, for every page (a template context processor)."""

from __future__ import annotations

from django.http import HttpRequest

from webapp.accounts.access import has_role
from webapp.inbox.items import inbox_count


class _LazyCount:
    """Counted when a template first reads it (two aggregate queries), at most once per request: a
    fragment that does not show the navigation bar costs nothing."""

    def __init__(self) -> None:
        self._value: int | None = None

    def __call__(self) -> int:
        if self._value is None:
            self._value = inbox_count()
        return self._value


def inbox_context(request: HttpRequest) -> dict:
    """``inbox_count``: how many items wait in the inbox (only for a signed-in user with a role)."""
    user = getattr(request, "user", None)
    return {"inbox_count": _LazyCount()} if has_role(user) else {}
