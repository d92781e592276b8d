"""Who may decide proposals. Roles are groups (``webapp.accounts.roles``): a viewer reads, an
operator approves, rejects and rolls back, an admin also edits jobs and policies."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from rest_framework.permissions import SAFE_METHODS, BasePermission

from webapp.accounts.access import has_role

#: The permission behind approve, reject and roll back.
DECIDE_PERMISSION = "proposals.decide_proposal"


def can_approve(user) -> bool:
    """Whether ``user`` may approve, reject and roll back proposals (operators and admins)."""
    return bool(user and user.is_authenticated and user.is_active and user.has_perm(DECIDE_PERMISSION))


def actor_name(actor) -> str:
    """The audit trail's name for ``actor``: a user's username, or the string given (``"system"``)."""
    return actor if isinstance(actor, str) else actor.get_username()


def require_operator(actor) -> None:
    """Raises ``PermissionDenied`` (naming the role needed) unless ``actor`` may decide proposals."""
    if not can_approve(actor):
        raise PermissionDenied(f"{actor_name(actor)} may read but not decide proposals "
                               f"(approve, reject and roll back need the operator role)")


class CanDecideProposals(BasePermission):
    """DRF: reads for any user with a role; writes (approve, reject, roll back) for operators."""

    message = "Your role may read but not decide proposals: approving, rejecting and rolling back need an operator."

    def has_permission(self, request, view) -> bool:
        if not has_role(request.user):
            return False
        return request.method in SAFE_METHODS or can_approve(request.user)


def workflow_context(request) -> dict:
    """Template context processor: ``can_decide_proposals`` for the signed-in user."""
    user = getattr(request, "user", None)
    return {"can_decide_proposals": can_approve(user)}
