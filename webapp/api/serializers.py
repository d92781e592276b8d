"""DRF serializers: read-only representations; writes go through services."""


from django.core.validators import RegexValidator
from django.db import models
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from scaling.planner.algorithms import algorithm_names
from scaling.policy.numbers import is_finite_number
from scaling.policy.option_types import Kind
from scaling.policy.options import job_options
from sparkclient.contract.spec import KnobTarget
from webapp.api.plans import FiguresField, PlanField, ReasonsField, RevisionsField
from webapp.jobs.models import Job, JobPolicy, MetricSnapshot, VertexSnapshot
from webapp.jobs.sparkui import PORTS_PATTERN
from webapp.jobs.stages import stage_name
from webapp.outage import OutageCode
from webapp.proposals.codes import Reason
from webapp.proposals.models import AuditEvent, Execution, Proposal
from webapp.proposals.reason_text import reason_text


@extend_schema_field({
    "type": "array", "items": {
        "type": "object", "additionalProperties": False, "required": ["name", "default", "min", "max"],
        "properties": {"name": {"type": "string", "pattern": "^[A-Za-z0-9_]{1,64}$"},
                       "default": {"type": "integer"}, "min": {"type": "integer"}, "max": {"type": "integer"},
                       "sets": {"type": "string", "enum": [k.value for k in KnobTarget], "default": "other"},
                       "description": {"type": "string", "maxLength": 500}}}})
class KnobsField(serializers.JSONField):
    """The pipeline's knob declarations; validated by ``webapp.jobs.knobs.parse_knobs`` (through the
    model's ``clean()``), so the API and the admin accept the same lists."""


@extend_schema_field({"type": "array", "items": {"type": "string", "maxLength": 253},
                      "example": ["127.0.0.1", "*.spark.svc.cluster.local", "10.42.0.0/16"]})
class UiHostsField(serializers.JSONField):
    """Allowed UI host patterns; validated by ``webapp.jobs.sparkui.rule_errors`` (model ``clean()``)."""


@extend_schema_field({"type": "object", "properties": {"code": {"type": "string"}, "reported": {"type": "string"},
                                                       "allowed": {"type": "string"}, "data": {"type": "object"}}})
class HealthReasonField(serializers.JSONField):
    """``{}``, or why the collector refused to read the job's Spark UI (``code``, ``reported``, ``allowed``:
    ``webapp.jobs.sparkui.Refusal``) or refused its answer (``code``, ``data``: ``SparkAnswerRefused.reason``),
    or why its runner is down (``code``, ``data``: ``webapp.jobs.runnerdown.RunnerDown``)."""


#: Registration fields of a job (``webapp.jobs.services.REGISTRATION_FIELDS``) and their API shapes.
_REGISTRATION = ["topic", "query_name", "spark_ui_url", "spark_ui_hosts", "spark_ui_ports", "knobs"]
#: Free text as the schema promises it: no NUL character (DRF refuses them) and, for a required
#: text, at least one character that is neither whitespace nor NUL (DRF trims whitespace; ``\s`` is Python's,
#: as str.strip's).
ANY_TEXT, NON_BLANK_TEXT = r"^[^\x00]*$", r"^[^\x00]*[^\s\x00][^\x00]*$"
#: ``spark_ui_ports`` as the schema states it: a port or ``first-last`` (``webapp.jobs.sparkui``).
_PORTS_KWARGS = {"validators": [RegexValidator(PORTS_PATTERN)]}
#: A registration's free text (``topic``, ``query_name``) as the schema states it: no NUL character. At
#: least one character, so that the schema's two branches (this one, or blank) never both match.
_TEXT_KWARGS = {"validators": [RegexValidator(r"^[^\x00]+$")]}


class JobSerializer(serializers.ModelSerializer):
    mode = serializers.CharField(source="policy.mode", read_only=True)
    spark_ui_hosts = UiHostsField(read_only=True)
    knobs = KnobsField(read_only=True)
    health_reason = HealthReasonField(read_only=True)

    class Meta:
        model = Job
        fields = ["id", "name", "query_name", "topic", "health", "last_error", "health_reason", "config", "knobs",
                  "config_changed_at", "mode", "spark_ui_url", "spark_ui_hosts", "spark_ui_ports"]


class FiniteFloatField(serializers.FloatField):
    """A float that is a number (NaN and infinities are refused, as the admin's form does)."""

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if not is_finite_number(value):
            self.fail("invalid")
        return value


@extend_schema_field({"type": "array", "items": {"type": "string", "maxLength": 200}})
class StringListField(serializers.JSONField):
    """A JSON list of strings (vertex ids, excluded periods); its entries are validated by the model's
    ``clean()``. The schema says ``array`` (so not null), which is what the model accepts."""


def _option_bounds() -> dict[str, dict]:
    """``min_value``/``max_value`` of every bounded policy option, from the option table
    (``scaling.policy.options.OPTIONS``), so the schema states them; the model validates them again."""
    return {o.name: {"min_value": o.bounds[0], "max_value": o.bounds[1]}
            for o in job_options() if o.bounds is not None and o.kind in (Kind.NUMBER, Kind.INTEGER)}


class JobPolicySerializer(serializers.ModelSerializer):
    """A job's policy, mode included. Writes (PATCH, admin role) are validated by ``JobPolicy.full_clean``
    (``webapp.jobs.services.job_policy_update``), as in the admin. The suspension fields are read-only:
    an operator clears a suspension with the resume action. Each option's bounds and choices are the
    option table's (``scaling.policy.options``), ``algorithm``'s the registry's (``scaling.planner.algorithms``)."""

    serializer_field_mapping = {**serializers.ModelSerializer.serializer_field_mapping,
                                models.FloatField: FiniteFloatField, models.JSONField: StringListField}
    algorithm = serializers.ChoiceField(choices=algorithm_names(), required=False,
                                        help_text=JobPolicy._meta.get_field("algorithm").help_text)

    class Meta:
        model = JobPolicy
        exclude = ["id", "job"]
        read_only_fields = ["auto_approve_suspended", "auto_approve_suspended_reason", "auto_approve_suspended_at"]
        extra_kwargs = _option_bounds()


class JobRegisterSerializer(serializers.ModelSerializer):
    """``POST /api/jobs/`` (admin role): register a job. ``PATCH /api/jobs/{id}/``: edit its registration
    (the name stays). Validated by ``webapp.jobs.services.job_register`` / ``job_update`` (the models'
    ``full_clean()``, as in the admin); a 400 names the field, policy fields under ``policy``."""

    spark_ui_hosts = UiHostsField(required=False, help_text=Job._meta.get_field("spark_ui_hosts").help_text)
    knobs = KnobsField(required=False, help_text=Job._meta.get_field("knobs").help_text)
    policy = JobPolicySerializer(required=False, help_text="Policy fields to set (the others keep their "
                                                           "defaults); mode is one of them.")

    class Meta:
        model = Job
        fields = ["name", *_REGISTRATION, "policy"]
        extra_kwargs = {"name": {"help_text": "The runner's --job name (letters, digits, - and _)."},
                        "spark_ui_ports": _PORTS_KWARGS, "topic": _TEXT_KWARGS, "query_name": _TEXT_KWARGS}


class JobUpdateSerializer(serializers.ModelSerializer):
    """``PATCH /api/jobs/{id}/`` (admin role): the registration fields to change (the name stays; the
    policy has its own endpoint, ``/api/jobs/{id}/policy/``)."""

    spark_ui_hosts = UiHostsField(required=False, help_text=Job._meta.get_field("spark_ui_hosts").help_text)
    knobs = KnobsField(required=False, help_text=Job._meta.get_field("knobs").help_text)

    class Meta:
        model = Job
        fields = _REGISTRATION
        extra_kwargs = {"spark_ui_ports": _PORTS_KWARGS, "topic": _TEXT_KWARGS, "query_name": _TEXT_KWARGS}


class StageNameField(serializers.CharField):
    """The stage's short name, as the dashboard's graph, proposal and charts show it
    (``webapp.jobs.stages.stage_name``; the dashboard appends the vertex id when two stages of
    one job share a name)."""

    def __init__(self, **kwargs):
        super().__init__(source="*", read_only=True, **kwargs)

    def to_representation(self, vertex) -> str:
        return stage_name(vertex.name, vertex.vertex_id)


class VertexSnapshotSerializer(serializers.ModelSerializer):
    stage = StageNameField(help_text="Short stage name, as the dashboard shows it.")

    class Meta:
        model = VertexSnapshot
        fields = ["vertex_id", "stage", "name", "position", "is_source", "tasks", "busy_s", "busy_max_s",
                  "records_in", "records_out", "spill_bytes", "upstream"]


class VertexSerializer(serializers.ModelSerializer):
    """One vertex (stage) in one snapshot, with the snapshot's job, time and window."""

    job = serializers.IntegerField(source="snapshot.job_id", read_only=True)
    collected_at = serializers.DateTimeField(source="snapshot.collected_at", read_only=True)
    window_s = serializers.FloatField(source="snapshot.window_s", read_only=True)
    stage = StageNameField(help_text="Short stage name, as the dashboard shows it.")

    class Meta:
        model = VertexSnapshot
        fields = ["id", "snapshot", "job", "collected_at", "window_s", "vertex_id", "stage", "name", "position",
                  "is_source", "tasks", "busy_s", "busy_max_s", "records_in", "records_out", "spill_bytes",
                  "upstream"]


class SnapshotSerializer(serializers.ModelSerializer):
    vertices = VertexSnapshotSerializer(many=True, read_only=True)

    class Meta:
        model = MetricSnapshot
        exclude = ["config"]


class ExecutionSerializer(serializers.ModelSerializer):
    class Meta:
        model = Execution
        fields = ["id", "proposal", "status", "path", "downtime_s", "pause_s", "time_to_effect_s", "added_lag_s",
                  "catch_up_s", "started_at", "finished_at", "error", "result", "attempts", "applied_attempt",
                  "attempt_state", "attempt_log"]


class ReasonSerializer(serializers.Serializer):
    """A coded reason: ``code`` (``webapp.proposals.codes``), its ``data``, and ``text``, the sentence
    rendered from them (``webapp.proposals.reason_text``); null when there is none."""

    code = serializers.CharField(help_text="Stable code: a HoldCode, ThrottleCode, GuardrailCode, AuditReason, "
                                           "WithdrawReason or scaling.forecast.prediction.VerdictReason value, "
                                           "or legacy-text.")
    data = serializers.DictField(help_text="The reason's numbers and names, by key.")
    text = serializers.CharField(help_text="The reason in words, rendered from code and data.")

    def to_representation(self, instance):
        reason = Reason.from_json(instance)
        if reason is None:
            return None
        return {"code": reason.code, "data": reason.data, "text": reason_text(reason)}


class ProposalSerializer(serializers.ModelSerializer):
    execution = ExecutionSerializer(read_only=True, allow_null=True)
    hold_reason = ReasonSerializer(read_only=True, allow_null=True,
                                   help_text="auto mode: why the policy held it for a person; null when not held.")
    waiting = ReasonSerializer(read_only=True, allow_null=True,
                               help_text="approved: why its execution waits for a slot on its Spark cluster (a "
                                         "ThrottleCode); null when it does not.")
    reasons = ReasonsField()
    plan = PlanField()
    figures = FiguresField()
    revisions = RevisionsField()
    decided_by = serializers.CharField(source="decided_by.username", read_only=True, default=None, allow_null=True)

    class Meta:
        model = Proposal
        fields = ["id", "job", "status", "current_config", "proposed_config", "reasons", "plan", "figures",
                  "created_at", "decided_at", "decided_by", "comment", "execution",
                  "kind", "rollback_of", "expires_at", "hold_reason", "waiting", "verification", "verification_detail",
                  "verified_at", "revision", "revisions", "prediction", "withdrawal"]


class ApproveSerializer(serializers.Serializer):
    revision = serializers.IntegerField(required=False, min_value=1, max_value=2**63 - 1,
                                        help_text="The revision approved (409 with the current one when outdated).")
    with_memory = serializers.BooleanField(
        required=False, default=False,
        help_text="Also set the memory knob to the job's heap recommendation (GET /api/jobs/{id}/memory/); 409 "
                  "when there is none to add or the proposal changes the memory knob already.")




class TextField(serializers.RegexField):
    """A :class:`~rest_framework.serializers.RegexField` that takes only a JSON string: DRF's
    CharField turns a number into text, which the schema (``type: string``) does not allow."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            raise serializers.ValidationError("Not a valid string.", code="invalid")
        return super().to_internal_value(data)


class RejectSerializer(serializers.Serializer):
    comment = TextField(NON_BLANK_TEXT, allow_blank=False, trim_whitespace=True, max_length=2000)


class RollbackSerializer(serializers.Serializer):
    reason = TextField(ANY_TEXT, required=False, allow_blank=True, trim_whitespace=True, max_length=2000, default="")


class AuditEventSerializer(serializers.ModelSerializer):
    actor = serializers.CharField(source="actor_name", read_only=True,
                                  help_text='Who acted: a username, "policy:<name>" or "system[:<part>]".')
    reason = ReasonSerializer(read_only=True, allow_null=True)

    class Meta:
        model = AuditEvent
        fields = ["id", "job", "proposal", "at", "actor", "actor_user", "action", "before", "after", "reason"]


class JobMemorySerializer(serializers.Serializer):
    """``GET /api/jobs/{id}/memory/``: the job's memory over its metric window (``webapp.jobs.memory.JobMemory``);
    every field null when no snapshot measured memory."""

    gc_share = serializers.FloatField(allow_null=True, help_text="Newest share of task time spent in GC, 0..1.")
    heap_peak_mb = serializers.FloatField(allow_null=True, help_text="Heap used at its peak in the window, MB.")
    heap_max_mb = serializers.FloatField(allow_null=True, help_text="The heap maximum, MB.")
    heap_usage = serializers.FloatField(allow_null=True, help_text="heap_peak_mb / heap_max_mb.")
    pressure = serializers.JSONField(allow_null=True, help_text="The memory-pressure reason ({code, vertex_id, "
                                     "data}: gc_share, gc_threshold, heap_usage, heap_threshold, heap_peak_mb, "
                                     "heap_max_mb) while the job is under memory pressure, else null.")
    recommendation = serializers.JSONField(allow_null=True, help_text="The recommended heap per executor "
                                           "({kind: heap, current_mb, recommended_mb, peak_mb, overhead, executors, "
                                           "saves_mb}), or null; recommend-only unless apply is on.")
    apply = serializers.BooleanField(allow_null=True, help_text="The policy's memory_apply.")
    state_mb = serializers.FloatField(allow_null=True,
                                      help_text="The state stores' memory of each JVM at its peak in the window, MB.")
    nonheap_peak_mb = serializers.FloatField(allow_null=True, help_text="The most an executor used "
                                             "beyond its heap at peak (off-heap, direct, mapped, Python), MB.")
    sizes = serializers.JSONField(help_text="The recommendations of the other memories the pipeline "
                                  "has a knob for ([{kind: overhead|state, current_mb, recommended_mb, peak_mb, "
                                  "overhead, executors, saves_mb}]), each when it differs from the running value.")
    withheld = serializers.JSONField(allow_null=True, help_text="The memory-withheld reason ({code, vertex_id, data}: "
                                     "cause no-batch, not-ready or not-keeping-up, and its figures) while the "
                                     "window's load says no right-sizing (no sizes then, and a heap only to "
                                     "relieve memory pressure), else null.")


class DetailSerializer(serializers.Serializer):
    """An error body: ``{"detail": "..."}``."""

    detail = serializers.CharField()


class UnavailableSerializer(serializers.Serializer):
    """A 503 body (``webapp.outage``): Redis is unreachable and nothing was changed."""

    code = serializers.ChoiceField(choices=[c.value for c in OutageCode])
    detail = serializers.CharField()
