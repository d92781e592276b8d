"""``GET /api/inbox/``: the inbox (``webapp.inbox.items``) as JSON, what ``/inbox/`` shows."""

from __future__ import annotations

from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from webapp.api.schema import VALIDATION_ERROR
from webapp.inbox.items import inbox_items
from webapp.inbox.kinds import ItemKind


class InboxItemSerializer(serializers.Serializer):
    """One thing that waits for a person."""

    kind = serializers.ChoiceField(choices=ItemKind.choices, help_text="What waits (webapp.inbox.kinds.ItemKind).")
    job = serializers.IntegerField(source="job_id")
    job_name = serializers.CharField()
    since = serializers.DateTimeField(allow_null=True, help_text="Since when it waits; null when unknown "
                                                                 "(a job down that never sent metrics).")
    text = serializers.CharField(help_text="The item in words, rendered from kind and data.")
    path = serializers.CharField(help_text="The page to act on it (a proposal's or a job's).")
    data = serializers.DictField(help_text="The kind's data: pending_proposal {proposal, revision, waited_s, "
                                           "changes, hold}; inconclusive_verification {proposal, reason}; "
                                           "auto_approval_suspended {reason}; scale_up_blocked {knobs, proposal}; "
                                           "job_down {error}.")


class InboxQuerySerializer(serializers.Serializer):
    """The inbox's filters (each optional; a malformed one is a 400)."""

    kind = serializers.ChoiceField(choices=ItemKind.choices, required=False, help_text="Only items of this kind.")
    job = serializers.IntegerField(min_value=0, max_value=2**63 - 1, required=False, help_text="Only this job's items.")


class InboxSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    items = InboxItemSerializer(many=True)


class InboxView(APIView):
    """Everything that waits for a person across jobs: pending proposals (how long they waited),
    inconclusive verifications nobody looked at, suspended auto-approval, blocked scale-ups, jobs down."""

    @extend_schema(parameters=[InboxQuerySerializer], operation_id="inbox_list",
                   responses={200: InboxSerializer,
                              400: OpenApiResponse(VALIDATION_ERROR, "A malformed filter (kind, job).")})
    def get(self, request: Request) -> Response:
        # A plain dict, not the QueryDict: DRF reads a blank form field as absent, "?kind=" is a 400.
        query = InboxQuerySerializer(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        kind, job = query.validated_data.get("kind"), query.validated_data.get("job")
        items = [i for i in inbox_items(timezone.now())
                 if (kind is None or i.kind == kind) and (job is None or i.job_id == job)]
        return Response(InboxSerializer({"count": len(items), "items": items}).data)
