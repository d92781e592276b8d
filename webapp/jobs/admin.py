from django.contrib import admin

from webapp.jobs.models import Evaluation, Job, JobPolicy, MetricSnapshot


class JobPolicyInline(admin.StackedInline):
    model = JobPolicy
    can_delete = False


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ["name", "health", "query_name", "topic", "config_changed_at"]
    inlines = [JobPolicyInline]


@admin.register(MetricSnapshot)
class MetricSnapshotAdmin(admin.ModelAdmin):
    list_display = ["job", "collected_at", "batches", "backlog", "arrival_rate_per_s", "processed_rate_per_s", "cores"]
    list_filter = ["job"]


@admin.register(Evaluation)
class EvaluationAdmin(admin.ModelAdmin):
    list_display = ["job", "created_at", "decision"]
    list_filter = ["job", "decision"]
