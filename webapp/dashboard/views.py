"""Dashboard views: thin; reads come from selectors, writes go through services."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.views.decorators.http import require_POST

from webapp.dashboard.figures import dag_figure, series_figure
from webapp.jobs import selectors
from webapp.jobs.models import Job
from webapp.jobs.redis import get_redis
from webapp.proposals.models import Proposal
from webapp.proposals.services import TransitionError, proposal_approve, proposal_reject


@login_required
def jobs(request: HttpRequest) -> HttpResponse:
    """All jobs, one row each."""
    rows = []
    for job in Job.objects.select_related("policy").order_by("name"):
        snapshot = job.snapshots.order_by("-collected_at").first()
        pending = job.proposals.filter(status=Proposal.Status.PENDING).first()
        last = job.proposals.exclude(status=Proposal.Status.PENDING).first()
        rows.append({"job": job, "snapshot": snapshot, "pending": pending, "last": last})
    return render(request, "dashboard/jobs.html", {"rows": rows})


def _job_context(job: Job) -> dict:
    pending = job.proposals.filter(status=Proposal.Status.PENDING).first()
    proposals = list(job.proposals.select_related("execution", "decided_by")[:10])
    return {
        "job": job, "policy": job.policy, "snapshot": selectors.latest_snapshot(job=job),
        "evaluation": selectors.latest_evaluation(job=job), "pending": pending, "proposals": proposals,
    }


def _figures(job: Job, pending: Proposal | None) -> dict:
    vertices = selectors.dag_vertices(job=job, proposal_plan=pending.plan if pending else None)
    rescales = [{"at": p.execution.finished_at.isoformat(),
                 "label": f"proposal {p.pk}: {p.current_config} → {p.proposed_config}"}
                for p in job.proposals.filter(execution__finished_at__isnull=False).select_related("execution")[:20]]
    return {"dag": dag_figure(vertices).to_plotly_json() if vertices else None,
            "series": series_figure(selectors.job_series(job=job), rescales).to_plotly_json(),
            "vertices": vertices}


@login_required
def job_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """The job page: DAG, charts, the pending proposal and the execution history."""
    job = get_object_or_404(Job.objects.select_related("policy"), pk=pk)
    return render(request, "dashboard/job.html", _job_context(job))


@login_required
def job_live(request: HttpRequest, pk: int) -> JsonResponse:
    """Live update of the job page: figures as Plotly JSON and the status panel as HTML."""
    job = get_object_or_404(Job.objects.select_related("policy"), pk=pk)
    context = _job_context(job)
    figures = _figures(job, context["pending"])
    panel = render_to_string("dashboard/_job_panel.html", context, request=request)
    from plotly.utils import PlotlyJSONEncoder  # noqa: PLC0415

    return JsonResponse({"panel": panel, "dag": figures["dag"], "series": figures["series"],
                         "vertices": figures["vertices"]}, encoder=PlotlyJSONEncoder)


@login_required
@require_POST
def proposal_decide(request: HttpRequest, pk: int) -> HttpResponse:
    """Approve or reject a proposal from the job page."""
    proposal = get_object_or_404(Proposal.objects.select_related("job__policy"), pk=pk)
    try:
        if request.POST.get("action") == "approve":
            proposal_approve(proposal=proposal, actor=request.user)
            messages.success(request, f"Proposal {pk} approved; executing.")
        else:
            proposal_reject(proposal=proposal, actor=request.user, comment=request.POST.get("comment", ""))
            messages.info(request, f"Proposal {pk} rejected.")
    except (TransitionError, ValueError) as exc:
        messages.error(request, str(exc))
    return redirect("dashboard:job", pk=proposal.job_id)


@login_required
@require_POST
def set_rate(request: HttpRequest, pk: int) -> HttpResponse:
    """Demo control: set the event generator's rate (events/s) for the job's topic."""
    from sparkclient.generator import set_rate as generator_set_rate  # noqa: PLC0415

    job = get_object_or_404(Job, pk=pk)
    try:
        rate = float(request.POST.get("rate", ""))
        if rate < 0:
            raise ValueError
    except ValueError:
        messages.error(request, "The rate must be a number of events per second, 0 or more.")
    else:
        generator_set_rate(get_redis(), job.topic, rate)
        messages.success(request, f"Generator rate for {job.topic} set to {rate:g} events/s.")
    return redirect("dashboard:job", pk=pk)
