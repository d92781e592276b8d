"""REST API (DRF). Every endpoint requires a token or a session; lists are paginated."""

from __future__ import annotations

from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from webapp.api.serializers import (AuditEventSerializer, ExecutionSerializer, JobSerializer,
                                    ProposalSerializer, RejectSerializer, SnapshotSerializer)
from webapp.jobs.models import Job, MetricSnapshot
from webapp.proposals.models import AuditEvent, Execution, Proposal
from webapp.proposals.services import TransitionError, proposal_approve, proposal_reject


class JobViewSet(viewsets.ReadOnlyModelViewSet):
    queryset = Job.objects.select_related("policy").order_by("name")
    serializer_class = JobSerializer


class SnapshotViewSet(viewsets.ReadOnlyModelViewSet):
    """Metric snapshots; filter with ``?job=<id>&since=<ISO time>``."""

    serializer_class = SnapshotSerializer

    def get_queryset(self):
        qs = MetricSnapshot.objects.prefetch_related("vertices").order_by("-collected_at")
        if job := self.request.query_params.get("job"):
            qs = qs.filter(job_id=job)
        if since := self.request.query_params.get("since"):
            qs = qs.filter(collected_at__gte=since)
        return qs


class ProposalViewSet(viewsets.ReadOnlyModelViewSet):
    """Proposals; filter with ``?job=<id>&status=<status>``. POST ``approve`` / ``reject``."""

    serializer_class = ProposalSerializer

    def get_queryset(self):
        qs = Proposal.objects.select_related("execution", "decided_by", "job__policy").order_by("-created_at")
        if job := self.request.query_params.get("job"):
            qs = qs.filter(job_id=job)
        if wanted := self.request.query_params.get("status"):
            qs = qs.filter(status=wanted)
        return qs

    @action(detail=True, methods=["post"])
    def approve(self, request: Request, pk: str | None = None) -> Response:
        try:
            proposal = proposal_approve(proposal=self.get_object(), actor=request.user)
        except TransitionError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        return Response(self.get_serializer(proposal).data)

    @action(detail=True, methods=["post"])
    def reject(self, request: Request, pk: str | None = None) -> Response:
        body = RejectSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            proposal = proposal_reject(proposal=self.get_object(), actor=request.user,
                                       comment=body.validated_data["comment"])
        except TransitionError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        return Response(self.get_serializer(proposal).data)


class ExecutionViewSet(viewsets.ReadOnlyModelViewSet):
    queryset = Execution.objects.order_by("-started_at")
    serializer_class = ExecutionSerializer


class AuditEventViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = AuditEventSerializer

    def get_queryset(self):
        qs = AuditEvent.objects.order_by("-at", "-id")
        if job := self.request.query_params.get("job"):
            qs = qs.filter(job_id=job)
        return qs
