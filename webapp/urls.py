from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/", include("webapp.api.urls")),
    path("audit/", include("webapp.proposals.urls")),
    path("", include("webapp.dashboard.urls")),
]
