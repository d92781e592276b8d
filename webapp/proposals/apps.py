from django.apps import AppConfig


class ProposalsConfig(AppConfig):
    name = "webapp.proposals"
    label = "proposals"
    verbose_name = "Proposals and executions"

    def ready(self) -> None:
        from webapp.proposals import receivers  # noqa: PLC0415, F401 - receivers connect once the models are loaded
