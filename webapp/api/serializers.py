"""DRF serializers: read-only representations; writes go through services."""

from rest_framework import serializers

from webapp.jobs.models import Job, MetricSnapshot, VertexSnapshot
from webapp.proposals.models import AuditEvent, Execution, Proposal


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


class SnapshotSerializer(serializers.ModelSerializer):
    vertices = VertexSnapshotSerializer(many=True, read_only=True)

    class Meta:
        model = MetricSnapshot
        exclude = ["config"]


class ExecutionSerializer(serializers.ModelSerializer):
    class Meta:
        model = Execution
        fields = ["id", "proposal", "status", "path", "downtime_s", "started_at", "finished_at", "error", "result"]


class ProposalSerializer(serializers.ModelSerializer):
    execution = ExecutionSerializer(read_only=True)
    decided_by = serializers.CharField(source="decided_by.username", read_only=True, default=None)

    class Meta:
        model = Proposal
        fields = ["id", "job", "status", "current_config", "proposed_config", "reasons", "plan", "created_at",
                  "decided_at", "decided_by", "comment", "execution"]


class RejectSerializer(serializers.Serializer):
    comment = serializers.CharField(allow_blank=False, trim_whitespace=True)


class AuditEventSerializer(serializers.ModelSerializer):
    class Meta:
        model = AuditEvent
        fields = ["id", "job", "proposal", "at", "actor", "action", "before", "after", "reason"]
