from django.apps import AppConfig


class ProposalsConfig(AppConfig):
    name = "webapp.proposals"
    label = "proposals"
    verbose_name = "Proposals and executions"
