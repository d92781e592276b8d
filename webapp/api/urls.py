from rest_framework.routers import DefaultRouter

from webapp.api import views

router = DefaultRouter()
router.register("jobs", views.JobViewSet)
router.register("snapshots", views.SnapshotViewSet, basename="snapshot")
router.register("proposals", views.ProposalViewSet, basename="proposal")
router.register("executions", views.ExecutionViewSet)
router.register("audit-events", views.AuditEventViewSet, basename="auditevent")
urlpatterns = router.urls
