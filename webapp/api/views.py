"""REST API (DRF). Every endpoint requires a token or a session; lists are paginated; query filters
are validated (a malformed one is a 400). Writes go through the workflow's services."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, permissions, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.parsers import JSONParser
from rest_framework.request import Request
from rest_framework.response import Response

from webapp.accounts.access import HasRole
from webapp.api import filters
from webapp.api import serializers as s
from webapp.jobs.memory import job_memory
from webapp.jobs.models import Job, JobPolicy, MetricSnapshot, VertexSnapshot
from webapp.jobs.services import RegistrationError, job_policy_update, job_register, job_update
from webapp.proposals import rollback, services
from webapp.proposals.lifecycle import StaleRevisionError, TransitionError
from webapp.proposals.models import AuditEvent, Execution, Proposal
from webapp.proposals.permissions import CanDecideProposals

#: Object ids in URLs: digits that fit a 64-bit integer (anything else is a 404, not a database error).
ID_PATTERN = r"[0-9]{1,18}"


class CanEditJobs(permissions.BasePermission):
    """DRF: reads for any authenticated user; registering a job and editing its registration or policy
    for the admin role (``jobs.add_job``, ``jobs.change_job``, ``jobs.change_jobpolicy``)."""

    message = "Your role may read jobs but not register or edit them: that needs the admin role."
    REQUIRED = {"create": "jobs.add_job", "partial_update": "jobs.change_job", "policy": "jobs.change_jobpolicy"}

    def has_permission(self, request, view) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        if request.method in permissions.SAFE_METHODS:
            return True
        required = self.REQUIRED.get(getattr(view, "action", None) or "")
        return required is not None and request.user.has_perm(required)


_EDIT_RESPONSES = {400: OpenApiResponse(description="A field is invalid: the body maps each invalid field to its "
                                                    "messages (policy fields under \"policy\")."),
                   403: s.DetailSerializer, 404: s.DetailSerializer}


#: The rules between fields that OpenAPI 3.0 cannot state (the server's: ``webapp.jobs.sparkui.rule_errors``,
#: ``webapp.jobs.policy_mapping.policy_errors``, ``scaling.Policy``); a body that breaks one is a 400.
_UI_RULES = ("Rules between fields: give spark_ui_url, or spark_ui_hosts with spark_ui_ports (a port or "
             "range of at most 32 ports, first ≤ last); spark_ui_ports is checked whenever spark_ui_hosts is "
             "not empty or spark_ui_url is empty.")
_POLICY_RULES = ("Rules between policy fields, checked on the policy as it results from the edit: "
                 "utilization_min ≤ utilization_target ≤ utilization_max (empty edges: target ∓ 0.3, clipped "
                 "to [0, 1]); vertex_min_parallelism ≤ vertex_max_parallelism; batch_ratio_scale_down < "
                 "batch_ratio_scale_up; min_cores ≤ max_cores; with restart_strategy exponential-delay, "
                 "restart_max_delay_s ≥ restart_delay_s. excluded_periods and guard_excluded_periods entries "
                 "are Flink CalendarUtils expressions.")


def _registration_error(exc: RegistrationError) -> ValidationError:
    return ValidationError(exc.errors)


@extend_schema_view(
    create=extend_schema(request=s.JobRegisterSerializer, responses={201: s.JobSerializer, **_EDIT_RESPONSES},
                         description="Register a job (admin role): its name, Spark UI URL or discovery rule, "
                                     "knobs and policy. The name must not be registered yet. "
                                     f"{_UI_RULES} {_POLICY_RULES}"),
    partial_update=extend_schema(request=s.JobUpdateSerializer, responses={200: s.JobSerializer, **_EDIT_RESPONSES},
                                 description=f"Edit a job's registration (admin role); the name stays. {_UI_RULES}"),
)
class JobViewSet(mixins.CreateModelMixin, mixins.UpdateModelMixin, viewsets.ReadOnlyModelViewSet):
    """Streaming jobs with their health, running configuration, registration and policy mode. POST
    registers one, PATCH edits its registration, ``policy`` reads and edits its policy (admin role)."""

    # JSON bodies only: the list and object fields (knobs, UI hosts, policy) have no form encoding.
    parser_classes = [JSONParser]

    lookup_value_regex = ID_PATTERN
    http_method_names = ["get", "post", "patch", "head", "options"]
    permission_classes = [HasRole, CanEditJobs]  # a role to read, admin to edit

    queryset = Job.objects.select_related("policy").order_by("name")
    serializer_class = s.JobSerializer

    def _job_response(self, job: Job, code: int = status.HTTP_200_OK) -> Response:
        job = Job.objects.select_related("policy").get(pk=job.pk)
        return Response(s.JobSerializer(job, context=self.get_serializer_context()).data, status=code)

    def create(self, request: Request, *args, **kwargs) -> Response:
        body = s.JobRegisterSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = dict(body.validated_data)
        policy = data.pop("policy", None)
        try:
            job = job_register(**data, policy=dict(policy) if policy else None, exists_ok=False)
        except RegistrationError as exc:
            raise _registration_error(exc) from None
        return self._job_response(job, status.HTTP_201_CREATED)

    def partial_update(self, request: Request, *args, **kwargs) -> Response:
        job = self.get_object()
        body = s.JobUpdateSerializer(job, data=request.data, partial=True)
        body.is_valid(raise_exception=True)
        try:
            job_update(job=job, changes=dict(body.validated_data), actor=request.user)
        except RegistrationError as exc:
            raise _registration_error(exc) from None
        return self._job_response(job)

    @extend_schema(responses={200: s.JobMemorySerializer, 404: s.DetailSerializer},
                   description="The job's memory over its metric window: GC share, heap at peak, the memory "
                               "pressure gate's finding, the recommend-only heap size (nothing restarts for it), the "
                               "state stores' and non-heap memory, their knobs' recommended sizes, and why none is "
                               "recommended while the window's load says no right-sizing.")
    @action(detail=True, methods=["get"])
    def memory(self, request: Request, pk: str | None = None) -> Response:
        found = job_memory(job=self.get_object())
        empty = {"gc_share": None, "heap_peak_mb": None, "heap_max_mb": None, "heap_usage": None,
                 "pressure": None, "recommendation": None, "apply": None, "state_mb": None, "nonheap_peak_mb": None,
                 "sizes": [], "withheld": None}
        return Response(s.JobMemorySerializer(found.to_json() if found else empty).data)

    @extend_schema(methods=["GET"], responses={200: s.JobPolicySerializer, 404: s.DetailSerializer})
    @extend_schema(methods=["PATCH"], request=s.JobPolicySerializer,
                   responses={200: s.JobPolicySerializer, **_EDIT_RESPONSES},
                   description="Edit the job's policy, mode included (admin role); validated as in the admin. "
                               + _POLICY_RULES)
    @action(detail=True, methods=["get", "patch"])
    def policy(self, request: Request, pk: str | None = None) -> Response:
        job = self.get_object()
        current, _ = JobPolicy.objects.get_or_create(job=job)  # an admin-added job may lack one
        if request.method == "GET":
            return Response(s.JobPolicySerializer(current).data)
        body = s.JobPolicySerializer(current, data=request.data, partial=True)
        body.is_valid(raise_exception=True)
        try:
            policy = job_policy_update(job=job, changes=dict(body.validated_data), actor=request.user)
        except RegistrationError as exc:
            raise _registration_error(exc) from None
        return Response(s.JobPolicySerializer(policy).data)


class VertexViewSet(viewsets.ReadOnlyModelViewSet):
    """Per-vertex (stage) raw sums of each snapshot; filter by job, vertex and time, newest first."""

    lookup_value_regex = ID_PATTERN

    serializer_class = s.VertexSerializer
    filter_backends = [DjangoFilterBackend]
    filterset_class = filters.VertexFilter
    queryset = VertexSnapshot.objects.select_related("snapshot").order_by("-snapshot_id", "position")


class SnapshotViewSet(viewsets.ReadOnlyModelViewSet):
    """Metric snapshots with their vertices; filter by job and time (``since``, ``until``), newest first."""

    lookup_value_regex = ID_PATTERN

    serializer_class = s.SnapshotSerializer
    filter_backends = [DjangoFilterBackend]
    filterset_class = filters.SnapshotFilter
    queryset = MetricSnapshot.objects.prefetch_related("vertices").order_by("-collected_at", "-id")


#: 400, 401, 403 and 404 are added to every operation by ``webapp.api.schema.AutoSchema``.
_DECISION_RESPONSES = {200: s.ProposalSerializer, 409: OpenApiResponse(s.DetailSerializer, "Not in a state that "
                                                                       "allows it (e.g. no longer pending)."),
                       503: OpenApiResponse(s.UnavailableSerializer, "Redis, the task broker, is unreachable: "
                                                                     "nothing was changed; try again later.")}


class ProposalViewSet(viewsets.ReadOnlyModelViewSet):
    """Proposals; filter by job and status. POST ``approve``, ``reject`` (comment required) or
    ``rollback`` (a succeeded one: restores the configuration it replaced)."""

    lookup_value_regex = ID_PATTERN

    serializer_class = s.ProposalSerializer

    def get_permissions(self):
        if self.action in ("approve", "reject", "rollback"):
            return [permissions.IsAuthenticated(), CanDecideProposals()]
        return super().get_permissions()

    filter_backends = [DjangoFilterBackend]
    filterset_class = filters.ProposalFilter
    queryset = Proposal.objects.select_related("execution", "decided_by", "job__policy").order_by("-created_at", "-id")

    def _decide(self, call) -> Response:
        try:
            proposal = call()
        except StaleRevisionError as exc:
            current = Proposal.objects.get(pk=exc.proposal_id)
            return Response({"detail": str(exc), "current_revision": exc.current_revision,
                             "proposal": self.get_serializer(current).data}, status=status.HTTP_409_CONFLICT)
        except TransitionError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        except ValueError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
        except DjangoPermissionDenied as exc:
            raise PermissionDenied(str(exc)) from exc
        proposal.refresh_from_db()
        return Response(self.get_serializer(proposal).data)

    @extend_schema(request=s.ApproveSerializer, responses=_DECISION_RESPONSES,
                   description="Approve a pending proposal. ``revision`` names the revision approved; an outdated "
                               "one gets 409 with ``current_revision`` and the current proposal.")
    @action(detail=True, methods=["post"])
    def approve(self, request: Request, pk: str | None = None) -> Response:
        body = s.ApproveSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        proposal = self.get_object()
        return self._decide(lambda: services.proposal_approve(proposal=proposal, actor=request.user,
                                                              revision=body.validated_data.get("revision"),
                                                              with_memory=body.validated_data["with_memory"]))

    @extend_schema(request=s.RejectSerializer, responses=_DECISION_RESPONSES, examples=[
        OpenApiExample("A reason", value={"comment": "Not during the nightly batch window."}, request_only=True)])
    @action(detail=True, methods=["post"])
    def reject(self, request: Request, pk: str | None = None) -> Response:
        body = s.RejectSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        proposal = self.get_object()
        return self._decide(lambda: services.proposal_reject(proposal=proposal, actor=request.user,
                                                             comment=body.validated_data["comment"]))

    @extend_schema(request=s.RollbackSerializer, responses=_DECISION_RESPONSES, examples=[
        OpenApiExample("A reason", value={"reason": "p99 latency doubled after the change."}, request_only=True)],
                   description="Roll back a succeeded proposal. Returns the rollback proposal, which restores "
                               "the configuration the proposal replaced.")
    @action(detail=True, methods=["post"])
    def rollback(self, request: Request, pk: str | None = None) -> Response:
        body = s.RollbackSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        proposal = self.get_object()
        return self._decide(lambda: rollback.proposal_rollback(proposal=proposal, actor=request.user,
                                                               reason=body.validated_data.get("reason", "")))


class ExecutionViewSet(viewsets.ReadOnlyModelViewSet):
    """Executions of approved proposals, with the measured downtime; filter by job and status."""

    lookup_value_regex = ID_PATTERN

    serializer_class = s.ExecutionSerializer

    filter_backends = [DjangoFilterBackend]
    filterset_class = filters.ExecutionFilter
    queryset = Execution.objects.order_by("-started_at", "-id")


class AuditEventViewSet(viewsets.ReadOnlyModelViewSet):
    """The append-only audit trail; filter by job, proposal and action, newest first."""

    lookup_value_regex = ID_PATTERN

    serializer_class = s.AuditEventSerializer

    filter_backends = [DjangoFilterBackend]
    filterset_class = filters.AuditFilter
    queryset = AuditEvent.objects.order_by("-at", "-id")
