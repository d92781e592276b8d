from django.apps import AppConfig


class DemoConfig(AppConfig):
    """The demo's and the benchmarks' tooling on the web app's side: ``manage.py demo_load`` and
    ``manage.py bench_fleet`` (:mod:`webapp.demo.fleetbench`). An app without models, outside the
    product's rooms: it may import the demo (``sparkclient.demo``), and nothing of the product imports it."""

    name = "webapp.demo"
    label = "demo"
    verbose_name = "Demo and benchmarks"
