"""Admin site for proposals, executions and the audit trail (read-only: status changes go through the
services), and the jobs admin's decision on proposals: re-enable auto-approval after a rollback."""

from django.contrib import admin, messages

from webapp.jobs.admin import JobAdmin
from webapp.jobs.models import Job
from webapp.proposals.models import AuditEvent, Execution, Proposal
from webapp.proposals.services import auto_approve_resume


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
    list_display = ["id", "job", "kind", "status", "created_at", "decided_by", "verification", "hold_text"]
    list_filter = ["job", "status", "kind", "verification"]


@admin.register(Execution)
class ExecutionAdmin(ReadOnlyAdmin):
    list_display = ["id", "proposal", "status", "attempts", "attempt_state", "path", "downtime_s", "started_at",
                    "finished_at", "lease_expires_at"]


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = ["at", "job", "proposal", "actor_name", "action", "reason_text"]
    list_filter = ["job", "action"]


@admin.action(description="Re-enable auto-approval (after a rollback suspended it)")
def resume_auto_approval(modeladmin, request, queryset):
    """A person turns auto-approval back on for the selected jobs whose auto-approval a rollback
    suspended (``auto_approve_resume``, audited)."""
    for job in queryset.filter(policy__auto_approve_suspended=True):
        auto_approve_resume(job=job, actor=request.user)
        messages.success(request, f"Auto-approval re-enabled for {job.name}.")


class JobDecisionsAdmin(JobAdmin):
    """The jobs admin (``webapp.jobs.admin.JobAdmin``) with its action that decides on proposals."""

    actions = [resume_auto_approval]


admin.site.unregister(Job)
admin.site.register(Job, JobDecisionsAdmin)
