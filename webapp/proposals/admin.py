from django.contrib import admin

from webapp.proposals.models import AuditEvent, Execution, Proposal


class ReadOnlyAdmin(admin.ModelAdmin):
    """Status changes go through the services (conditional UPDATEs with audit), never the admin."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Proposal)
class ProposalAdmin(ReadOnlyAdmin):
    list_display = ["id", "job", "kind", "status", "created_at", "decided_by", "verification", "hold_reason"]
    list_filter = ["job", "status", "kind", "verification"]


@admin.register(Execution)
class ExecutionAdmin(ReadOnlyAdmin):
    list_display = ["id", "proposal", "status", "attempts", "attempt_state", "path", "downtime_s", "started_at",
                    "finished_at", "lease_expires_at"]


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = ["at", "job", "proposal", "actor", "action", "reason"]
    list_filter = ["job", "action"]
