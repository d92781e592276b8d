"""DRF serializers: read-only representations; writes go through services."""

from rest_framework import serializers

from webapp.jobs.models import Job, MetricSnapshot, VertexSnapshot
from webapp.proposals.models import AuditEvent, Execution, Proposal


def _present(model, names: tuple[str, ...]) -> list[str]:
    """The fields of ``names`` that ``model`` has (the workflow adds some as it grows)."""
    return [name for name in names if hasattr(model, name)]


class JobSerializer(serializers.ModelSerializer):
    mode = serializers.CharField(source="policy.mode", read_only=True)

    class Meta:
        model = Job
        fields = ["id", "name", "query_name", "topic", "health", "last_error", "config", "knobs",
                  "config_changed_at", "mode"]


class VertexSnapshotSerializer(serializers.ModelSerializer):
    class Meta:
        model = VertexSnapshot
        fields = ["vertex_id", "name", "position", "is_source", "tasks", "busy_s", "records_in",
                  "records_out", "spill_bytes", "upstream"]


class VertexSerializer(serializers.ModelSerializer):
    """One vertex (stage) in one snapshot, with the snapshot's job, time and window."""

    job = serializers.IntegerField(source="snapshot.job_id", read_only=True)
    collected_at = serializers.DateTimeField(source="snapshot.collected_at", read_only=True)
    window_s = serializers.FloatField(source="snapshot.window_s", read_only=True)

    class Meta:
        model = VertexSnapshot
        fields = ["id", "snapshot", "job", "collected_at", "window_s", "vertex_id", "name", "position",
                  "is_source", "tasks", "busy_s", "records_in", "records_out", "spill_bytes", "upstream"]


class SnapshotSerializer(serializers.ModelSerializer):
    vertices = VertexSnapshotSerializer(many=True, read_only=True)

    class Meta:
        model = MetricSnapshot
        exclude = ["config"]


class ExecutionSerializer(serializers.ModelSerializer):
    class Meta:
        model = Execution
        fields = ["id", "proposal", "status", "path", "downtime_s", "started_at", "finished_at", "error",
                  "result", *_present(Execution, ("attempts", "attempt_state", "attempt_log"))]


class ProposalSerializer(serializers.ModelSerializer):
    execution = ExecutionSerializer(read_only=True)
    decided_by = serializers.CharField(source="decided_by.username", read_only=True, default=None)

    class Meta:
        model = Proposal
        fields = ["id", "job", "status", "current_config", "proposed_config", "reasons", "plan", "created_at",
                  "decided_at", "decided_by", "comment", "execution",
                  *_present(Proposal, ("kind", "rollback_of", "expires_at", "hold_reason", "verification",
                                       "verification_detail", "verified_at", "revision", "revisions", "prediction",
                                       "withdrawal"))]


class ApproveSerializer(serializers.Serializer):
    revision = serializers.IntegerField(required=False, min_value=1, max_value=2**63 - 1,
                                        help_text="The revision approved (409 with the current one when outdated).")


class RejectSerializer(serializers.Serializer):
    comment = serializers.CharField(allow_blank=False, trim_whitespace=True, max_length=2000)


class RollbackSerializer(serializers.Serializer):
    reason = serializers.CharField(required=False, allow_blank=True, trim_whitespace=True, max_length=2000,
                                   default="")


class AuditEventSerializer(serializers.ModelSerializer):
    class Meta:
        model = AuditEvent
        fields = ["id", "job", "proposal", "at", "actor", "action", "before", "after", "reason"]


class DetailSerializer(serializers.Serializer):
    """An error body: ``{"detail": "..."}``."""

    detail = serializers.CharField()


# --- query filters (validated: a malformed filter is a 400, never a 500) ---------------------------

#: Largest id a filter accepts (a 64-bit signed integer: SQLite and PostgreSQL bigint).
MAX_ID = 2**63 - 1


class JobFilter(serializers.Serializer):
    job = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID, help_text="Only this job (id).")


class TimeFilter(JobFilter):
    since = serializers.DateTimeField(required=False, help_text="Collected at or after this ISO 8601 time.")
    until = serializers.DateTimeField(required=False, help_text="Collected at or before this ISO 8601 time.")


class VertexFilter(TimeFilter):
    vertex_id = serializers.CharField(required=False, max_length=200, help_text="Only this vertex id.")


class ProposalFilter(JobFilter):
    status = serializers.ChoiceField(choices=Proposal.Status.choices, required=False)


class ExecutionFilter(JobFilter):
    status = serializers.ChoiceField(choices=Execution.Status.choices, required=False)


class AuditFilter(JobFilter):
    proposal = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID,
                                        help_text="Only events of this proposal (id).")
    action = serializers.CharField(required=False, max_length=50, help_text="Only this action, e.g. approved.")
