"""The API's list filters (django-filter ``FilterSet``s, one per list endpoint). A malformed value is
a 400 naming the filter; so is a filter given with no value (``?status=`` is not "no filter")."""

from __future__ import annotations

import django_filters
from django import forms
from django.core.validators import RegexValidator
from drf_spectacular.utils import extend_schema_field

from webapp.jobs.models import MetricSnapshot, VertexSnapshot
from webapp.proposals.models import AuditEvent, Execution, Proposal

#: Largest id a filter accepts (a 64-bit signed integer: SQLite and PostgreSQL bigint).
MAX_ID = 2**63 - 1


@extend_schema_field({"type": "integer", "minimum": 1, "maximum": MAX_ID, "description": "An object id."})
class IdFilter(django_filters.NumberFilter):
    """An object id: an integer in 1 .. 2**63 - 1."""

    field_class = forms.IntegerField

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, min_value=1, max_value=MAX_ID, **kwargs)


@extend_schema_field({"type": "string", "format": "date-time"})
class TimeFilter(django_filters.IsoDateTimeFilter):
    """An ISO 8601 time."""


@extend_schema_field({"type": "string", "minLength": 1, "maxLength": 200, "pattern": r"^[^\x00]*$"})
class VertexIdFilter(django_filters.CharFilter):
    """A vertex (stage) id, 1 to 200 characters, none of them NUL (Django's form field refuses them;
    an empty id is refused by :class:`StrictFilterSet`)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, max_length=200, **kwargs)


#: An audit action: snake_case, at most 50 characters (a JSON Schema pattern: ``$`` is the end of the text).
ACTION_PATTERN = r"^[a-z][a-z0-9_]*$"


@extend_schema_field({"type": "string", "pattern": ACTION_PATTERN, "maxLength": 50})
class ActionFilter(django_filters.CharFilter):
    """An audit action (snake_case), e.g. ``approved``: exactly what :data:`ACTION_PATTERN` accepts
    (not stripped; Python's ``$`` would also take a final newline, ``\\Z`` does not)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, max_length=50, strip=False,
                         validators=[RegexValidator(ACTION_PATTERN.removesuffix("$") + r"\Z")], **kwargs)


def action_filter(help_text: str) -> django_filters.Filter:
    """The audit ``action`` filter, following ``AuditEvent.action``: over the field's choices when it has
    them (the schema's enum and the validation are that one list), else :class:`ActionFilter`."""
    choices = AuditEvent._meta.get_field("action").choices
    if choices:
        return django_filters.ChoiceFilter(choices=choices, help_text=help_text)
    return ActionFilter(help_text=help_text)


class StrictFilterSet(django_filters.FilterSet):
    """A filter present in the query without a value is an error, not an absent filter."""

    def is_valid(self) -> bool:
        valid = super().is_valid()
        for name in self.filters:
            if name in self.data and self.data.get(name) == "":
                self.form.add_error(name, "This filter was given without a value: give one, or leave it out.")
                valid = False
        return valid


class SnapshotFilter(StrictFilterSet):
    job = IdFilter(field_name="job_id", help_text="Only this job (id).")
    since = TimeFilter(field_name="collected_at", lookup_expr="gte",
                                             help_text="Collected at or after this ISO 8601 time.")
    until = TimeFilter(field_name="collected_at", lookup_expr="lte",
                                             help_text="Collected at or before this ISO 8601 time.")

    class Meta:
        model = MetricSnapshot
        fields = ["job", "since", "until"]


class VertexFilter(StrictFilterSet):
    job = IdFilter(field_name="snapshot__job_id", help_text="Only this job (id).")
    vertex_id = VertexIdFilter(help_text="Only this vertex id.")
    since = TimeFilter(field_name="snapshot__collected_at", lookup_expr="gte",
                                             help_text="Collected at or after this ISO 8601 time.")
    until = TimeFilter(field_name="snapshot__collected_at", lookup_expr="lte",
                                             help_text="Collected at or before this ISO 8601 time.")

    class Meta:
        model = VertexSnapshot
        fields = ["job", "vertex_id", "since", "until"]


class ProposalFilter(StrictFilterSet):
    job = IdFilter(field_name="job_id", help_text="Only this job (id).")
    status = django_filters.ChoiceFilter(choices=Proposal.Status.choices, help_text="Only this status.")

    class Meta:
        model = Proposal
        fields = ["job", "status"]


class ExecutionFilter(StrictFilterSet):
    job = IdFilter(field_name="proposal__job_id", help_text="Only this job (id).")
    status = django_filters.ChoiceFilter(choices=Execution.Status.choices, help_text="Only this outcome.")

    class Meta:
        model = Execution
        fields = ["job", "status"]


class AuditFilter(StrictFilterSet):
    job = IdFilter(field_name="job_id", help_text="Only this job (id).")
    proposal = IdFilter(field_name="proposal_id", help_text="Only events of this proposal (id).")
    action = action_filter("Only this action, e.g. approved.")

    class Meta:
        model = AuditEvent
        fields = ["job", "proposal", "action"]
