"""Access rules shared by pages, the API and ``/metrics``: a signed-in user without a role (viewer,
operator, admin) is refused everywhere except the login and logout pages; ``/metrics`` also takes
a client address from ``METRICS_ALLOWED_IPS``.
"""

from __future__ import annotations

import ipaddress

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden
from django.urls import reverse
from rest_framework.permissions import BasePermission

from webapp.accounts.roles import ROLES

#: Shown to a signed-in user with no role (pages and API).
NO_ROLE_MESSAGE = ("Your account has no role: an admin must give it one (viewer, operator or admin), "
                   "e.g. `manage.py set_role <username> viewer`.")


def has_role(user) -> bool:
    """Whether ``user`` is active, signed in, and a superuser or a member of one of the role groups."""
    if not (user and user.is_authenticated and user.is_active):
        return False
    if user.is_superuser:
        return True
    cached = getattr(user, "_sparkscaler_has_role", None)
    if cached is None:
        cached = user.groups.filter(name__in=ROLES).exists()
        user._sparkscaler_has_role = cached
    return cached


class RoleRequiredMiddleware:
    """Session users: a signed-in user with no role gets 403 on every path but login, logout and
    static files. (API token users are checked by :class:`HasRole`, which DRF runs after its own
    authentication.)"""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated and not has_role(user) and not self._exempt(request.path):
            return HttpResponseForbidden(NO_ROLE_MESSAGE, content_type="text/plain; charset=utf-8")
        return self.get_response(request)

    @staticmethod
    def _exempt(path: str) -> bool:
        return path in (reverse("login"), reverse("logout")) or path.startswith("/" + settings.STATIC_URL.lstrip("/"))


class HasRole(BasePermission):
    """DRF: the request is authenticated (token or session) by a user who has a role."""

    message = NO_ROLE_MESSAGE

    def has_permission(self, request, view) -> bool:
        return has_role(request.user)


def client_ip_allowed(request, allowed: list[str]) -> bool:
    """Whether the client address (``REMOTE_ADDR``; forwarded headers are not trusted) is inside one
    of ``allowed`` (addresses or networks, e.g. ``10.0.0.0/8``).

    Raises:
        ValueError: an entry of ``allowed`` is not an address or network (a settings error).
    """
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    return any(address in ipaddress.ip_network(entry, strict=False) for entry in allowed)


class MetricsAccess(BasePermission):
    """``/metrics``: a token or session of a user with a role, or a client address in
    ``settings.METRICS_ALLOWED_IPS`` (e.g. the Prometheus server's)."""

    message = ("/metrics needs `Authorization: Token <key>` of a user with a role, or a client address "
               "listed in METRICS_ALLOWED_IPS.")

    def has_permission(self, request, view) -> bool:
        return has_role(request.user) or client_ip_allowed(request, settings.METRICS_ALLOWED_IPS)
