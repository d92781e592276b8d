from django.templatetags.static import static
from django.urls import path
from django.views.generic.base import RedirectView

from webapp.dashboard import actions, inbox, views

app_name = "dashboard"
urlpatterns = [
    path("", views.jobs, name="jobs"),
    path("jobs/live/", views.jobs_live, name="jobs_live"),
    path("inbox/", inbox.inbox, name="inbox"),
    path("jobs/<int:pk>/", views.job_detail, name="job"),
    path("jobs/<int:pk>/live/", views.job_live, name="job_live"),
    path("jobs/<int:pk>/history/", views.history, name="history"),
    path("jobs/<int:pk>/history/live/", views.history_live, name="history_live"),
    path("jobs/<int:pk>/rescales/", views.rescales, name="rescales"),
    path("jobs/<int:pk>/rate/", actions.set_rate, name="set_rate"),
    path("jobs/<int:pk>/scale-down/apply/", actions.scale_down_apply, name="scale_down_apply"),
    path("jobs/<int:pk>/memory/propose/", actions.memory_propose, name="memory_propose"),
    path("jobs/<int:pk>/scale-up-block/clear/", actions.scale_up_block_release, name="scale_up_block_clear"),
    path("jobs/<int:pk>/suspension/clear/", actions.suspension_clear, name="suspension_clear"),
    path("proposals/<int:pk>/", views.proposal_detail, name="proposal"),
    path("proposals/<int:pk>/live/", views.proposal_live, name="proposal_live"),
    path("proposals/<int:pk>/decide/", actions.proposal_decide, name="proposal_decide"),
    path("proposals/<int:pk>/rollback/", actions.proposal_rollback, name="proposal_rollback"),
    # Browsers ask for /favicon.ico on pages without an icon link (the admin's): no 404 in any console.
    path("favicon.ico", RedirectView.as_view(url=static("favicon.svg"), permanent=True)),
]
