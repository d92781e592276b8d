from django.urls import path

from webapp.dashboard import views

app_name = "dashboard"
urlpatterns = [
    path("", views.jobs, name="jobs"),
    path("jobs/<int:pk>/", views.job_detail, name="job"),
    path("jobs/<int:pk>/live/", views.job_live, name="job_live"),
    path("jobs/<int:pk>/rate/", views.set_rate, name="set_rate"),
    path("proposals/<int:pk>/decide/", views.proposal_decide, name="proposal_decide"),
]
