from django.contrib import admin, messages

from webapp.jobs.models import Evaluation, Job, JobPolicy, MetricSnapshot


class JobPolicyInline(admin.StackedInline):
    """The per-job policy, validated as a whole by ``JobPolicy.clean`` (every option's help text
    is shown under it)."""

    model = JobPolicy
    can_delete = False
    readonly_fields = ["auto_approve_suspended_at"]
    fieldsets = [
        ("Mode", {"fields": ["mode"]}),
        ("Scaling algorithm", {"fields": [
            "algorithm", "utilization_target", "utilization_min", "utilization_max", "metric_window_s",
            "catch_up_duration_s", "restart_time_s", "restart_time_tracking_enabled", "restart_time_limit_s",
            "min_cores", "max_cores", "vertex_min_parallelism", "vertex_max_parallelism", "scale_up_max_factor",
            "scale_down_max_factor", "backlog_lag_threshold_s", "scale_down_interval_s", "scaling_sources_enabled",
            "excluded_vertices", "excluded_periods", "alignment", "effectiveness_detection_enabled",
            "effectiveness_threshold", "batch_ratio_scale_up", "batch_ratio_scale_down", "min_parallelism_increase"]}),
        ("Auto-approval guardrails", {"fields": [
            "guard_max_change_factor", "guard_max_executors", "guard_directions", "guard_excluded_periods",
            "auto_approve_suspended", "auto_approve_suspended_reason", "auto_approve_suspended_at"]}),
        ("Proposals, retries and verification", {"fields": [
            "proposal_ttl_s", "revision_min_change", "withdraw_after_evaluations", "restart_strategy",
            "restart_attempts", "restart_delay_s", "restart_max_delay_s",
            "restart_backoff_multiplier", "failure_rate_max_failures", "failure_rate_interval_s",
            "verification_windows", "verification_tolerance"]}),
    ]


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ["name", "health", "mode", "auto_approval", "query_name", "topic", "config_changed_at"]
    inlines = [JobPolicyInline]
    # Cleared on the job page by an operator, with an audit event (issue 13), never edited here.
    readonly_fields = ["scale_up_block"]
    actions = ["resume_auto_approval"]

    def save_related(self, request, form, formsets, change):
        """A job added with its policy left at the defaults still gets its policy row (an unchanged
        inline is not saved); the registration itself is validated by ``Job.clean``."""
        super().save_related(request, form, formsets, change)
        JobPolicy.objects.get_or_create(job=form.instance)

    @admin.display(description="mode")
    def mode(self, job: Job) -> str:
        return job.policy.mode

    @admin.display(description="auto-approval")
    def auto_approval(self, job: Job) -> str:
        return "suspended" if job.policy.auto_approve_suspended else "on"

    @admin.action(description="Re-enable auto-approval (after a rollback suspended it)")
    def resume_auto_approval(self, request, queryset):
        from webapp.proposals.services import auto_approve_resume  # noqa: PLC0415

        for job in queryset.filter(policy__auto_approve_suspended=True):
            auto_approve_resume(job=job, actor=request.user)
            messages.success(request, f"Auto-approval re-enabled for {job.name}.")


@admin.register(MetricSnapshot)
class MetricSnapshotAdmin(admin.ModelAdmin):
    list_display = ["job", "collected_at", "batches", "backlog", "arrival_rate_per_s", "processed_rate_per_s", "cores"]
    list_filter = ["job"]


@admin.register(Evaluation)
class EvaluationAdmin(admin.ModelAdmin):
    list_display = ["job", "created_at", "decision"]
    list_filter = ["job", "decision"]
