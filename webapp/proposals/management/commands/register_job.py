"""Register a streaming job: its name, where its Spark UI may be read, its knobs and its policy.

    manage.py register_job --name NAME [--spark-ui-url URL | --spark-ui-host HOST ... --spark-ui-ports RANGE]
                           [--knobs JSON] [--mode advisor|manual|auto] [--policy JSON] [--topic T] [--query-name Q]

The same path as ``POST /api/jobs/`` (``webapp.jobs.services.job_register``), with the admin's validation;
then the pending proposals of an earlier run expire (``webapp.proposals.lifecycle.expire_pending``),
which is why the command lives with the proposals.
"""

import json

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from webapp.jobs.models import JobPolicy
from webapp.jobs.services import RegistrationError, job_register
from webapp.proposals.lifecycle import expire_pending


def _json(value: str, what: str):
    def refuse(constant: str):
        raise ValueError(f"{constant} is not a number")

    try:
        return json.loads(value, parse_constant=refuse)
    except ValueError as exc:
        raise CommandError(f"--{what} is not valid JSON ({exc}); e.g. {_EXAMPLES[what]}") from None


_EXAMPLES = {
    "knobs": """'[{"name": "enrich_partitions", "default": 4, "min": 1, "max": 64, "sets": "repartition"}]'""",
    "policy": """'{"max_cores": 8, "utilization_target": 0.7}'""",
}


def _flatten(errors: dict, prefix: str = "") -> list[str]:
    lines = []
    for field, messages in errors.items():
        if isinstance(messages, dict):
            lines.extend(_flatten(messages, f"{prefix}{field}."))
        else:
            lines.extend(f"{prefix}{field}: {m}" for m in messages)
    return lines


class Command(BaseCommand):
    help = ("Register (or update) a job: its Spark UI URL or discovery rule, its knobs and its policy. "
            "Pending proposals of an earlier run expire.")

    def add_arguments(self, parser):
        parser.add_argument("--name", required=True, help="The runner's --job name.")
        parser.add_argument("--topic", default="", help="The log topic its source reads.")
        parser.add_argument("--query-name", default="")
        parser.add_argument("--spark-ui-url", default=None,
                            help="Fixed Spark UI URL, e.g. http://driver-host:4040 (the runner must report it).")
        parser.add_argument("--spark-ui-host", action="append", default=None, dest="spark_ui_hosts",
                            help="Discovery rule: a host the runner may report its UI on (repeat for more): a name, "
                                 "*.domain, an IP address or a network (10.42.0.0/16). Default: 127.0.0.1, localhost.")
        parser.add_argument("--spark-ui-ports", default=None,
                            help="Discovery rule: the UI port or range, e.g. 4040-4056 (the default).")
        parser.add_argument("--knobs", default=None,
                            help="The pipeline's knobs (sparkclient.contract.spec.Knob) as a JSON list, "
                                 f"e.g. {_EXAMPLES['knobs']}.")
        parser.add_argument("--mode", choices=[m.value for m in JobPolicy.Mode], default=None,
                            help="Policy mode (a new job starts in manual).")
        parser.add_argument("--policy", default=None,
                            help=f"Policy fields as a JSON object, e.g. {_EXAMPLES['policy']}.")

    def handle(self, *args, name: str, topic: str, query_name: str, spark_ui_url, spark_ui_hosts, spark_ui_ports,
               knobs, mode, policy, **options):
        policy_values = _json(policy, "policy") if policy is not None else {}
        if not isinstance(policy_values, dict):
            raise CommandError(f"--policy must be a JSON object, e.g. {_EXAMPLES['policy']}")
        if mode:
            policy_values["mode"] = mode
        try:
            job = job_register(name=name, topic=topic, query_name=query_name, spark_ui_url=spark_ui_url,
                               spark_ui_hosts=spark_ui_hosts, spark_ui_ports=spark_ui_ports,
                               knobs=_json(knobs, "knobs") if knobs is not None else None,
                               policy=policy_values or None)
        except RegistrationError as exc:
            raise CommandError(f"job {name!r} was not registered:\n  " + "\n  ".join(_flatten(exc.errors))) from None
        expire_pending(job=job, now=timezone.now())
        self.stdout.write(f"Job {job.name!r} registered (id {job.pk}); Spark UI: {job.ui_rule().describe()}.")
