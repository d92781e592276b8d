from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.routers import DefaultRouter

from webapp.accounts.access import HasRole
from webapp.api import inbox, views

router = DefaultRouter()
router.register("jobs", views.JobViewSet)
router.register("vertices", views.VertexViewSet, basename="vertex")
router.register("snapshots", views.SnapshotViewSet, basename="snapshot")
router.register("proposals", views.ProposalViewSet, basename="proposal")
router.register("executions", views.ExecutionViewSet, basename="execution")
router.register("audit-events", views.AuditEventViewSet, basename="auditevent")
urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(permission_classes=[HasRole]), name="schema"),
    path("inbox/", inbox.InboxView.as_view(), name="inbox"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="schema", permission_classes=[HasRole]), name="swagger-ui"),
    *router.urls,
]
