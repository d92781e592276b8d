from django.apps import AppConfig


class InboxConfig(AppConfig):
    name = "webapp.inbox"
    label = "inbox"
    verbose_name = "Inbox and notifications"

    def ready(self) -> None:
        from webapp.inbox import receivers  # noqa: PLC0415, F401 - receivers connect once the models are loaded
