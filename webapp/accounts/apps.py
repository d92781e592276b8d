from django.apps import AppConfig
from django.db.models.signals import post_migrate


class AccountsConfig(AppConfig):
    """Roles (viewer, operator, admin) as groups with permissions, kept in sync after every migrate."""

    name = "webapp.accounts"
    label = "accounts"

    def ready(self) -> None:
        from webapp.accounts.roles import roles_ensure_signal  # noqa: PLC0415 - roles need the auth models loaded

        post_migrate.connect(roles_ensure_signal, dispatch_uid="sparkscaler-roles")
