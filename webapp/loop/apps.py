from django.apps import AppConfig


class LoopConfig(AppConfig):
    """The live loop: collect, evaluate, propose, execute, reconcile, verify, and their Celery tasks.
    An app without models, installed so that Celery's autodiscovery imports ``webapp.loop.tasks``."""

    name = "webapp.loop"
    label = "loop"
    verbose_name = "Live loop"

    def ready(self) -> None:
        from webapp.loop import standby  # noqa: PLC0415, F401 - its receiver connects once the models are loaded
