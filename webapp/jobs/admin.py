"""Admin site for jobs and their policies. The job's internal state (health, the autoscaler's
memory, the running configuration, the last error, when the configuration changed) is written by
the collector and the executions only, so it is read-only here; the policy is validated as a whole
(``JobPolicy.clean``: bounds of every number, the algorithm from the registry), and a new job's
configuration and knobs are checked for their JSON shape."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.urls import reverse
from django.utils.html import format_html

from scaling.planner.algorithms import algorithm_names
from sparkclient.contract.spec import Knob, KnobError, check_knob_set, validate_values
from webapp.jobs.models import Evaluation, Job, JobPolicy, MetricSnapshot
from webapp.jobs.services import RegistrationError, job_policy_update


def knobs_errors(knobs) -> list[str]:
    """Why ``knobs`` is not a pipeline's knob declarations (empty when it is): a JSON list of
    :class:`sparkclient.contract.spec.Knob` objects, checked one by one and as a set."""
    if not isinstance(knobs, list) or len(knobs) > 100:
        return ['must be a JSON list (at most 100) of {"name", "default", "min", "max", "sets", "description"}']
    try:
        check_knob_set([Knob.from_dict(item) for item in knobs])
    except KnobError as exc:
        return [str(exc)]
    return []


def config_errors(config, knobs) -> list[str]:
    """Why ``config`` is not a running configuration of those knobs (empty when it is): a JSON object
    ``{knob: integer}`` naming declared knobs only, each value inside its knob's bounds."""
    if not isinstance(config, dict):
        return [f'must be a JSON object {{"<knob>": <integer>}}, not {type(config).__name__}']
    try:
        validate_values([Knob.from_dict(item) for item in knobs], config, partial=True)
    except KnobError as exc:
        return [str(exc)]
    return []


class JobForm(forms.ModelForm):
    """Checks a new job's configuration against its knobs (the knobs themselves are checked by
    ``Job.clean``)."""

    class Meta:
        model = Job
        fields = "__all__"

    def clean(self):
        data = super().clean()
        if "config" in self.fields and "config" in data:
            knobs = data.get("knobs", self.instance.knobs if self.instance.pk else [])
            if not knobs_errors(knobs):  # invalid knobs: Job.clean names what is wrong with them
                for error in config_errors(data["config"], knobs):
                    self.add_error("config", error)
        return data


class JobPolicyForm(forms.ModelForm):
    """``algorithm`` is a choice among the registry's names (``scaling.planner.algorithms.algorithm_names``)."""

    algorithm = forms.ChoiceField(choices=(), initial=JobPolicy._meta.get_field("algorithm").default,
                                  help_text=JobPolicy._meta.get_field("algorithm").help_text)

    class Meta:
        model = JobPolicy
        fields = "__all__"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["algorithm"].choices = [(name, name) for name in algorithm_names()]


#: The policy page's sections, each collapsed but the first; every field appears once (the fields,
#: their help texts, bounds and defaults come from the option table, ``scaling.policy.options.OPTIONS``).
POLICY_FIELDSETS = [
    ("Mode", {"fields": ["job", "mode", "algorithm"]}),
    ("Targets", {"classes": ["collapse"], "fields": [
        "utilization_target", "utilization_min", "utilization_max", "catch_up_duration_s",
        "backlog_lag_threshold_s", "metric_window_s"]}),
    ("Bounds", {"classes": ["collapse"], "fields": [
        "min_cores", "max_cores", "vertex_min_parallelism", "vertex_max_parallelism", "scale_up_max_factor",
        "scale_down_max_factor", "scale_up_min_efficiency", "scaling_sources_enabled", "excluded_vertices",
        "alignment"]}),
    ("Delays", {"classes": ["collapse"], "fields": [
        "scale_down_interval_s", "activation_evaluations", "scale_down_veto_batch_ratio",
        "scale_down_veto_backlog_growth", "batch_overrun_ratio", "excluded_periods", "restart_time_s",
        "restart_time_tracking_enabled",
        "restart_time_limit_s", "proposal_ttl_s", "revision_min_change", "withdraw_after_evaluations",
        "verification_windows", "verification_tolerance"]}),
    ("Learning from past rescales", {"classes": ["collapse"], "fields": [
        "effectiveness_detection_enabled", "effectiveness_threshold", "observed_scalability_enabled",
        "observed_scalability_min_observations", "observed_scalability_coefficient_min"]}),
    ("Guardrails (auto mode)", {"classes": ["collapse"], "fields": [
        "guard_max_change_factor", "guard_max_executors", "guard_directions", "guard_excluded_periods",
        "auto_approve_standby_wait_s",
        "auto_approve_suspended", "auto_approve_suspended_reason", "auto_approve_suspended_at"]}),
    ("Back-off (failed executions)", {"classes": ["collapse"], "fields": [
        "restart_strategy", "restart_attempts", "restart_delay_s", "restart_max_delay_s",
        "restart_backoff_multiplier", "failure_rate_max_failures", "failure_rate_interval_s"]}),
    ("Other algorithms", {"classes": ["collapse"], "fields": [
        "batch_ratio_scale_up", "batch_ratio_scale_down", "min_parallelism_increase"]}),
    ("Memory", {"classes": ["collapse"], "fields": [
        "memory_gc_pressure_threshold", "memory_heap_usage_threshold", "memory_tuning_overhead",
        "memory_pressure_growth", "memory_min_mb",
        "memory_max_mb", "memory_apply"]}),
]


@admin.register(JobPolicy)
class JobPolicyAdmin(admin.ModelAdmin):
    """A job's policy on its own page, validated as a whole by ``JobPolicy.clean`` (every option's help
    text under it). Edits go through ``webapp.jobs.services.job_policy_update``, so each one is
    audited (``policy_changed``) like an API edit."""

    form = JobPolicyForm
    fieldsets = POLICY_FIELDSETS
    list_display = ["job", "mode", "algorithm", "min_cores", "max_cores", "auto_approve_suspended"]
    list_filter = ["mode", "auto_approve_suspended"]
    # Set by rollbacks; cleared on the job page by an operator (audited), never edited here.
    readonly_fields = ["job", "auto_approve_suspended", "auto_approve_suspended_reason", "auto_approve_suspended_at"]

    def has_add_permission(self, request):
        return False  # a policy is created with its job

    def has_delete_permission(self, request, obj=None):
        return False

    def save_model(self, request, obj, form, change):
        changes = {field: form.cleaned_data[field] for field in form.changed_data}
        if not changes:
            return
        try:
            job_policy_update(job=obj.job, changes=changes, actor=request.user)
        except RegistrationError as exc:  # pragma: no cover - the form ran the same clean() already
            messages.error(request, f"Nothing was saved: {exc}")


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    form = JobForm
    #: Written by the collector, the runner and the executions only.
    internal_fields = ["health", "last_error", "health_reason", "scaler_state", "plan_stages", "capacity",
                       "config_changed_at"]
    list_display = ["name", "health", "mode", "auto_approval", "query_name", "topic", "config_changed_at"]
    # Cleared on the job page by an operator, with an audit event, never edited here.
    readonly_fields = ["policy_link", "scale_up_block"]
    fieldsets = [
        (None, {"fields": ["name", "query_name", "topic", "policy_link"]}),
        ("Spark UI", {"fields": ["spark_ui_url", "spark_ui_hosts", "spark_ui_ports"]}),
        ("Knobs and running configuration", {"classes": ["collapse"], "fields": ["knobs", "config"]}),
        ("Internal state (read-only)", {"classes": ["collapse"], "fields": [
            "health", "last_error", "health_reason", "capacity", "config_changed_at", "scale_up_block",
            "plan_stages", "scaler_state"]}),
    ]

    def save_related(self, request, form, formsets, change):
        """A new job gets its policy row at the defaults (edited on the policy's own page); the
        registration itself is validated by ``Job.clean``."""
        super().save_related(request, form, formsets, change)
        JobPolicy.objects.get_or_create(job=form.instance)

    def get_readonly_fields(self, request, obj=None):
        """The internal fields always; the running configuration once the job exists (it changes
        through approved proposals, which the runner applies)."""
        return [*self.readonly_fields, *self.internal_fields, *(["config"] if obj is not None else [])]

    @admin.display(description="policy")
    def policy_link(self, job: Job) -> str:
        policy = JobPolicy.objects.filter(job=job).first() if job.pk else None
        if policy is None:
            return "created with the job, at the defaults; edit it on its own page afterwards"
        return format_html('<a href="{}">{} mode, {} to {} cores: edit the policy →</a>',
                           reverse("admin:jobs_jobpolicy_change", args=[policy.pk]), policy.mode,
                           policy.min_cores, policy.max_cores)

    @admin.display(description="mode")
    def mode(self, job: Job) -> str:
        return job.policy.mode

    @admin.display(description="auto-approval")
    def auto_approval(self, job: Job) -> str:
        return "suspended" if job.policy.auto_approve_suspended else "on"


@admin.register(MetricSnapshot)
class MetricSnapshotAdmin(admin.ModelAdmin):
    list_display = ["job", "collected_at", "batches", "backlog", "arrival_rate_per_s", "processed_rate_per_s", "cores"]
    list_filter = ["job"]


@admin.register(Evaluation)
class EvaluationAdmin(admin.ModelAdmin):
    list_display = ["job", "created_at", "decision"]
    list_filter = ["job", "decision"]
