"""A streaming job: what runs, where its Spark UI may be fetched from, its health and its knobs."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models

from sparkclient.contract.spec import Knob, KnobError
from webapp.jobs.knobs import KnobListError, parse_knobs
from webapp.jobs.sparkui import DEFAULT_UI_HOSTS, UiRule, rule_errors


def _default_ui_hosts() -> list[str]:
    return list(DEFAULT_UI_HOSTS)


class Job(models.Model):
    """A Spark Structured Streaming query run by a pipeline runner.

    ``name`` is the runner's job key on Redis (``ss:runner:{name}``). ``config`` is the running
    configuration, ``{knob: int}``; ``knobs`` the pipeline's knob declarations (the pipeline contract,
    :class:`sparkclient.contract.spec.Knob` as dicts); ``plan_stages`` the stages of its physical plan
    (:mod:`sparkclient.contract.binding`), from which each stage is bound to the knob that sets its tasks;
    ``capacity`` the most executors its cluster can give (0: unknown).

    Registration (``webapp.jobs.services.job_register``: the API's ``POST /api/jobs/``,
    ``manage.py register_job``; the admin runs the same ``clean()``): the name, where its Spark UI may
    be read (``spark_ui_url``, or the discovery rule ``spark_ui_hosts`` + ``spark_ui_ports``, see
    ``webapp.jobs.sparkui``), its knobs (``webapp.jobs.knobs``) and its policy.
    """

    class Health(models.TextChoices):
        COLLECTING = "collecting", "collecting metrics"
        RUNNING = "running", "running"
        DEGRADED = "degraded", "degraded"
        DOWN = "down", "down"

    name = models.SlugField(max_length=100, unique=True)
    query_name = models.CharField(max_length=200, blank=True)
    topic = models.CharField(max_length=100, blank=True, help_text="The partitioned log the source reads.")
    config = models.JSONField(default=dict, blank=True, help_text="Running configuration: the value of each knob.")
    knobs = models.JSONField(default=list, blank=True,
                             help_text='The pipeline\'s knobs, a JSON list of {"name", "default", "min", "max", '
                                       '"sets"}: sets is one of executors, shuffle_partitions, state_partitions, '
                                       'source_partitions, repartition, other. The runner reports them too.')
    spark_ui_url = models.CharField(
        max_length=300, blank=True,
        help_text="Fixed Spark UI URL, e.g. http://driver-host:4040: the runner must report exactly this one. "
                  "Leave empty to use the discovery rule below.")
    spark_ui_hosts = models.JSONField(
        default=_default_ui_hosts, blank=True,
        help_text='Discovery rule: hosts the runner may report its UI on, as a JSON list of names, "*.domain", '
                  'IP addresses or networks, e.g. ["127.0.0.1", "*.spark.svc.cluster.local", "10.42.0.0/16"].')
    spark_ui_ports = models.CharField(
        max_length=11, default="4040-4056", blank=True,
        help_text="Discovery rule: the UI port or port range, e.g. 4040-4056 (spark.ui.port and the 16 next "
                  "ones Spark tries, spark.port.maxRetries).")
    plan_stages = models.JSONField(default=list, blank=True,
                                   help_text="The stages of the query's physical plan, as the runner read them.")
    cluster = models.CharField(
        max_length=300, blank=True, db_index=True,
        help_text="The Spark cluster its runner reports (the master URL, or local@<host> in local mode): executions "
                  "are throttled per cluster (webapp.loop.throttle). Empty: not reported yet.")
    capacity = models.PositiveIntegerField(default=0, help_text="Most executors the cluster can give (0: unknown).")
    health = models.CharField(max_length=20, choices=Health.choices, default=Health.COLLECTING)
    last_error = models.TextField(blank=True)
    health_reason = models.JSONField(
        default=dict, blank=True,
        help_text='Structured reason of the health, when the collector refused to read: {"code", "reported", '
                  '"allowed"}; last_error is its text.')
    scaler_state = models.JSONField(default=dict, blank=True,
                                    help_text="The autoscaler's memory between evaluations (FLIP-271 state store): "
                                              "pending delayed scale-downs, applied scalings, measured restart times.")
    config_changed_at = models.DateTimeField(null=True, blank=True,
                                             help_text="When the running configuration last changed; "
                                                       "the metric window starts after it.")
    scale_up_block = models.JSONField(
        default=dict, blank=True,
        help_text="Set when an execution is verified ineffective: {proposal, knobs, since, reason}. Scale-ups of "
                  "those knobs are neither proposed nor approved until a person clears it on the job page.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        """Validate the registration: the UI rule (``webapp.jobs.sparkui.rule_errors``) and the knobs
        (``webapp.jobs.knobs.knob_errors``); errors name the field."""
        errors = rule_errors(spark_ui_url=self.spark_ui_url, spark_ui_hosts=self.spark_ui_hosts,
                             spark_ui_ports=self.spark_ui_ports)
        try:
            self.knobs = [knob.to_dict() for knob in parse_knobs(self.knobs)]  # stored as the runner reports them
        except KnobListError as exc:
            errors["knobs"] = exc.errors
        if errors:
            raise ValidationError(errors)

    def ui_rule(self):
        """The registered ``webapp.jobs.sparkui.UiRule`` (None when there is none)."""
        return UiRule.of(spark_ui_url=self.spark_ui_url, spark_ui_hosts=self.spark_ui_hosts,
                         spark_ui_ports=self.spark_ui_ports)

    @property
    def local_mode(self) -> bool:
        """Whether its runner runs Spark in local mode (``cluster`` ``local@<host>``): one driver JVM
        runs every task, and its cores (``local[N]``) change only with a new driver."""
        return self.cluster.startswith("local")

    def knob_specs(self) -> tuple:
        """The knob declarations as :class:`sparkclient.contract.spec.Knob` values (invalid entries skipped)."""
        out = []
        for item in self.knobs or ():
            try:
                out.append(Knob.from_dict(item))
            except KnobError:
                continue
        return tuple(out)
