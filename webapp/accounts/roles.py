"""The three roles, each a Django group with permissions:

- **viewer**: read only (view jobs, snapshots, evaluations, proposals, executions, audit events);
- **operator**: a viewer who may also approve, reject and roll back proposals
  (``proposals.decide_proposal``) and re-enable auto-approval;
- **admin**: an operator who also edits jobs and their policies (and may use the admin site).
"""

from __future__ import annotations

from django.contrib.auth.models import Group, Permission
from django.db import transaction

VIEWER, OPERATOR, ADMIN = "viewer", "operator", "admin"
ROLES = (VIEWER, OPERATOR, ADMIN)

_VIEW = [f"{app}.view_{model}" for app, model in [
    ("jobs", "job"), ("jobs", "jobpolicy"), ("jobs", "metricsnapshot"), ("jobs", "vertexsnapshot"),
    ("jobs", "evaluation"), ("proposals", "proposal"), ("proposals", "execution"), ("proposals", "auditevent")]]
_DECIDE = ["proposals.decide_proposal"]
_EDIT = [f"jobs.{verb}_{model}" for model in ("job", "jobpolicy") for verb in ("add", "change", "delete")]

#: Permissions of each role ("app_label.codename").
ROLE_PERMISSIONS: dict[str, list[str]] = {
    VIEWER: _VIEW,
    OPERATOR: _VIEW + _DECIDE,
    ADMIN: _VIEW + _DECIDE + _EDIT,
}


def roles_ensure() -> dict[str, Group]:
    """Create or update the role groups so each has exactly its permissions."""
    groups = {}
    with transaction.atomic():
        for role, perms in ROLE_PERMISSIONS.items():
            group, _ = Group.objects.get_or_create(name=role)
            wanted = []
            for perm in perms:
                app_label, codename = perm.split(".")
                wanted.extend(Permission.objects.filter(content_type__app_label=app_label, codename=codename))
            group.permissions.set(wanted)
            groups[role] = group
    return groups


def roles_ensure_signal(sender, **kwargs) -> None:
    """post_migrate: once the proposals app has migrated (its permissions exist), sync the groups."""
    if getattr(sender, "label", None) in ("accounts", "proposals", "jobs"):
        try:
            roles_ensure()
        except Exception:  # noqa: BLE001 - a partial migrate (tables missing) syncs on the next one
            pass


def user_set_role(*, user, role: str):
    """Give ``user`` exactly one role. An admin is also staff, so the admin site lets them in.

    Raises:
        ValueError: unknown role.
    """
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}: choose one of {', '.join(ROLES)}")
    groups = roles_ensure()
    with transaction.atomic():
        user.groups.remove(*[groups[r] for r in ROLES if r != role])
        user.groups.add(groups[role])
        if user.is_staff != (role == ADMIN) and not user.is_superuser:
            user.is_staff = role == ADMIN
            user.save(update_fields=["is_staff"])
    # has_perm caches per user object
    for cache in ("_perm_cache", "_user_perm_cache", "_group_perm_cache"):
        if hasattr(user, cache):
            delattr(user, cache)
    return user
