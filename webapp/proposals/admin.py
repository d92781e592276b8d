from django.contrib import admin

from webapp.proposals.models import AuditEvent, Execution, Proposal


@admin.register(Proposal)
class ProposalAdmin(admin.ModelAdmin):
    list_display = ["id", "job", "status", "created_at", "decided_by"]
    list_filter = ["job", "status"]
    readonly_fields = ["status"]


@admin.register(Execution)
class ExecutionAdmin(admin.ModelAdmin):
    list_display = ["id", "proposal", "status", "path", "downtime_s", "started_at", "finished_at"]


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    list_display = ["at", "job", "proposal", "actor", "action", "reason"]
    list_filter = ["job", "action"]

    def has_change_permission(self, request, obj=None):  # append-only
        return False

    def has_delete_permission(self, request, obj=None):
        return False
