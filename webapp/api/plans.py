"""A proposal's plan and reasons as the API returns them: the stored JSON (``JobPlan.to_json``,
``Reason.to_json``: each reason's code, vertex and data) with each reason's words beside it, from
``scaling.words.reason_text`` (the one place a reason becomes text)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from scaling.values.plan import JobPlan
from scaling.values.reasons import Reason
from scaling.words.reason_text import reason_text
from webapp.jobs.figures import plan_figures
from webapp.jobs.plans import reason_json, stored_reasons
from webapp.loop.bounds import effective_max_cores

#: The API's shape of one reason.
REASON_SCHEMA = {
    "type": "object", "required": ["code", "vertex_id", "data", "text"],
    "properties": {"code": {"type": "string", "description": "PlanReason, VertexReason or Limit code"},
                   "vertex_id": {"type": "string", "nullable": True},
                   "data": {"type": "object", "additionalProperties": {},
                            "description": "Numbers, words or null, per code (an infinite number is null)"},
                   "text": {"type": "string", "description": "The reason in words (scaling.words.reason_text)"}}}


def plan_json(plan: JobPlan | None) -> dict:
    """``plan.to_json()`` with an infinite number as null and ``text`` beside each reason (the plan's,
    each vertex's, each limit's); ``{}`` when there is no plan."""
    if plan is None:
        return {}
    out = plan.to_json(infinity_as_null=True)
    out["reasons"] = [reason_json(r) for r in plan.reasons]
    for row, vertex in zip(out["vertices"], plan.vertices, strict=True):
        row["reason"] = reason_json(vertex.reason) if vertex.reason is not None else None
    out["limits"] = [{**row, "text": reason_text(Reason(limit.code, limit.vertex_id, limit.data))}
                     for limit, row in zip(plan.limits, out["limits"], strict=True)]
    return out


@extend_schema_field({"type": "array", "items": REASON_SCHEMA})
class ReasonsField(serializers.Field):
    """A proposal's reasons (``Proposal.reason_values``), each with its code, data and words."""

    def __init__(self, **kwargs):
        super().__init__(source="reason_values", read_only=True, **kwargs)

    def to_representation(self, value) -> list[dict]:
        return [reason_json(r) for r in value]


@extend_schema_field({"type": "object", "description": "The plan (JobPlan.to_json, format 2), each reason with "
                                                       "its text; {} for a rollback",
                      "properties": {"format": {"type": "integer"},
                                     "reasons": {"type": "array", "items": REASON_SCHEMA}}})
class PlanField(serializers.Field):
    """A proposal's plan (``Proposal.job_plan``) as :func:`plan_json`."""

    def __init__(self, **kwargs):
        super().__init__(source="*", read_only=True, **kwargs)

    def to_representation(self, value) -> dict:
        return plan_json(value.job_plan)


@extend_schema_field({"type": "array", "items": {
    "type": "object",
    "properties": {"revision": {"type": "integer"}, "reasons": {"type": "array", "items": REASON_SCHEMA}}}})
class RevisionsField(serializers.JSONField):
    """Earlier revisions (``Proposal.revisions``), each one's reasons with their words."""

    def __init__(self, **kwargs):
        super().__init__(read_only=True, **kwargs)

    def to_representation(self, value) -> list[dict]:
        return [{**revision, "reasons": [reason_json(r) for r in stored_reasons(revision["reasons"])]}
                for revision in value or ()]


@extend_schema_field({"type": "object", "nullable": True, "description": (
    "The plan's figures as the job, proposal and Rescales pages state them (webapp.jobs.figures): capacity "
    "now and expected (source records/s), the needed utilization (load, named load_name) and the band it was "
    "compared with, the cores needed with the cap that holds them; null for a rollback"),
    "properties": {"capacity_now_per_s": {"type": "number", "nullable": True},
                   "capacity_expected_per_s": {"type": "number", "nullable": True},
                   "load": {"type": "number", "nullable": True}, "load_name": {"type": "string"},
                   "load_definition": {"type": "string"},
                   "band": {"type": "array", "items": {"type": "number"}}, "band_text": {"type": "string"},
                   "cores_needed": {"type": "object", "nullable": True}}})
class FiguresField(serializers.Field):
    """A proposal's figures (``webapp.jobs.figures.plan_figures`` of its plan), or None without a plan."""

    def __init__(self, **kwargs):
        super().__init__(source="*", read_only=True, **kwargs)

    def to_representation(self, value) -> dict | None:
        figures = plan_figures(value.job_plan, job=value.job, bound=effective_max_cores(value.job))
        return figures.to_dict() if figures is not None else None
