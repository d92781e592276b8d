from django.urls import path

from webapp.proposals import views

app_name = "audit"
urlpatterns = [
    path("jobs/<int:pk>.<str:fmt>", views.audit_export, name="export"),
]
