from django.apps import AppConfig


class ProposalsConfig(AppConfig):
    name = "webapp.proposals"
    label = "proposals"
    verbose_name = "Proposals and executions"

    def ready(self) -> None:
        from webapp.proposals import signals  # noqa: F401, PLC0415 - receivers connect once the models are loaded
