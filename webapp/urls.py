from django.contrib import admin
from django.urls import include, path

from webapp.api.metrics import metrics

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/", include("webapp.api.urls")),
    path("audit/", include("webapp.proposals.urls")),
    path("metrics", metrics, name="metrics"),
    path("", include("webapp.dashboard.urls")),
]

handler404 = "webapp.api.schema.not_found"
