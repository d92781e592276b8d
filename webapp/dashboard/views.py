"""Dashboard views: thin; reads come from selectors, writes go through services.

Pages: the jobs overview, the job page (DAG, charts, "why no proposal?"), the proposal page, the
rescales page (Flink's Web UI "Rescales" and Dataflow's autoscaling tab) and the history page. Each
page has a ``…/live/`` twin that the page polls (``static/js/live.js``) to refresh its numbers
without a reload. The POST actions (approve, reject, roll back, …) are in ``actions.py``.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode

from scaling.forecast.job_figures import plan_band
from scaling.values.reasons import PlanReason
from scaling.words.reason_text import LOAD_NAME, band_text
from sparkclient.contract.binding import BindingStatus, MismatchReason, PinReason, StageInput
from sparkclient.contract.spec import ADAPTIVE_COALESCE_CONF
from webapp.dashboard import numbers, present, reads
from webapp.dashboard.figures import dag_figure, executors_figure, parallelism_label, series_figure
from webapp.dashboard.history import audit_page
from webapp.dashboard.overview import overview_page
from webapp.dashboard.proposal_page import proposal_context
from webapp.dashboard.templatetags.knobs import knob_changes
from webapp.dashboard.why import why_no_proposal
from webapp.jobs import selectors
from webapp.jobs.bindings import stage_bindings
from webapp.jobs.figures import current_plan, plan_figures
from webapp.jobs.memory import job_memory, memory_knob
from webapp.jobs.models import Job
from webapp.jobs.plans import stored_plan
from webapp.loop.bounds import effective_max_cores
from webapp.proposals import selectors as proposal_selectors
from webapp.proposals.holds import held_scale_down
from webapp.proposals.memory import memory_request
from webapp.proposals.models import Execution, Proposal
from webapp.proposals.permissions import can_approve
from webapp.proposals.reason_text import health_text, path_text, reason_text


def can_decide(user) -> bool:
    """Whether ``user`` may approve, reject and roll back (operators and admins)."""
    return can_approve(user)


def _require_decider(request: HttpRequest) -> None:
    if not can_decide(request.user):
        raise PermissionDenied("Your role may read but not decide proposals.")


# --- jobs overview ----------------------------------------------------------------------------

@login_required
def jobs(request: HttpRequest) -> HttpResponse:
    """The jobs, a page at a time and those that need a person first, one row each: health, configuration,
    pending proposal, backlog and trend, batch ratio, last action and policy mode; ``?q=`` filters by name."""
    return render(request, "dashboard/jobs.html", overview_page(request.GET))


@login_required
def jobs_live(request: HttpRequest) -> HttpResponse:
    """The jobs overview's page (HTML fragment: summary, rows, page links) for the live refresh, same
    ``?page=`` and ``?q=``."""
    return render(request, "dashboard/_jobs_rows.html", overview_page(request.GET))


# --- job page ---------------------------------------------------------------------------------

def _busy_proposal(job: Job) -> Proposal | None:
    return job.proposals.filter(status__in=[Proposal.Status.APPROVED, Proposal.Status.EXECUTING]).first()


def _job_context(request: HttpRequest, job: Job) -> dict:
    pending = job.proposals.filter(status=Proposal.Status.PENDING).first()
    snapshot = selectors.latest_snapshot(job=job)
    last_good = snapshot if snapshot is not None and snapshot.batches > 0 else reads.last_good_snapshot(job=job)
    evaluation = selectors.latest_evaluation(job=job)
    busy = _busy_proposal(job)
    stale = reads.staleness(job=job, newest=snapshot, last_good=last_good, busy=busy is not None)
    shown = last_good if stale is not None and last_good is not None else snapshot
    by_id = reads.stage_names_of(shown)
    names = {v.position: by_id[v.vertex_id] for v in shown.vertices.all()} if shown else {}
    stages = present.knob_stages(job=job, names=names)
    context = {"job": job, "policy": job.policy, "snapshot": shown, "evaluation": evaluation, "stale": stale,
               "pending": pending, "proposals": list(job.proposals.select_related("execution", "decided_by")[:10]),
               "can_decide": can_decide(request.user), "why": [], "held": held_scale_down(job=job),
               "health_text": health_text(job.health_reason, job.last_error),
               "scale_up_block": job.scale_up_block or None,
               "scale_up_block_reason": reason_text((job.scale_up_block or {}).get("reason")),
               "config_rows": present.knob_rows(current=job.config,
                                                proposed=pending.proposed_config if pending else None,
                                                stages=stages, pins=present.knob_pins(job=job),
                                                units=present.knob_units(job=job))}
    context["proposals_decided_by"] = [(p, present.decided_by(p)) for p in context["proposals"]]
    context["not_ready"] = [r for r in (evaluation.reason_values if evaluation else ())
                            if r.code == PlanReason.SAMPLES_NOT_READY]
    context["bound"] = effective_max_cores(job)
    context["job_figures"] = plan_figures(current_plan(job, evaluation), job=job, bound=context["bound"])
    context["memory"] = job_memory(job=job)
    context["memory_knob"] = memory_knob(job)
    context["memory_request"] = memory_request(job)
    if context["held"] is not None:
        context["held_in_min"] = math.ceil(context["held"]["in_s"] / 60)
        context["held_interval_min"] = round(context["held"]["interval_s"] / 60)
    bindings = stage_bindings(job=job, snapshot=snapshot) if snapshot is not None else ()
    problems = [b for b in bindings if b.problem]
    if pending is None:
        context["why"] = why_no_proposal(job=job, snapshot=snapshot, evaluation=evaluation, busy=busy,
                                         unbound=problems, stage_names=names, bound=context["bound"])
    else:
        context["pending_changes"] = [(k, pending.current_config.get(k), v) for k, v in pending.proposed_config.items()
                                      if pending.current_config.get(k) != v]
    if snapshot is not None:
        context["binding_problems"] = [
            {"position": b.position, "status": b.status.value, "knob": b.knob or "",
             "text": binding_text(b, names.get(b.position, f"stage {b.position}"))}
            for b in bindings if b.problem or _unsized(b)]
    return context


def _unsized(binding) -> bool:
    """Whether a pinned stage is one no knob sizes that the job page names: a shuffle on the session's
    ``spark.sql.shuffle.partitions``, or a stage of the ``foreachBatch`` function."""
    return binding.status is BindingStatus.PINNED and (
        binding.pin is PinReason.SHUFFLE_DEFAULT or binding.input is StageInput.BATCH_FUNCTION)


def binding_text(binding, stage_name: str) -> str:
    """A stage's binding problem, or why no knob sizes it (:func:`_unsized`), in words (rendered from
    the structured :class:`StageBinding`)."""
    reason = binding.reason
    stage = f"stage {binding.position} ({stage_name})"
    tasks = f"{binding.tasks_ran} task" + ("" if binding.tasks_ran == 1 else "s")
    if binding.pin is PinReason.SHUFFLE_DEFAULT:
        count = binding.plan_partitions if binding.plan_partitions is not None else binding.tasks_ran
        runs = "runs its partitions" if count is None else f"runs {count} partition" + ("" if count == 1 else "s")
        return (f"{stage}: {runs}, the session's spark.sql.shuffle.partitions "
                "(Spark's default is 200), and no knob sets them; nothing is proposed for it. Declare a "
                "state-partitions knob (STATE_PARTITIONS; SHUFFLE_PARTITIONS for a query without state) for the "
                "autoscaler to size it, or set spark.sql.shuffle.partitions for a new checkpoint")
    if binding.input is StageInput.BATCH_FUNCTION and binding.status is BindingStatus.PINNED:
        return (f"{stage}: a stage the foreachBatch function runs ({tasks}), and no knob sets its tasks; nothing "
                "is proposed for it. Declare a SHUFFLE_PARTITIONS (or STATE_PARTITIONS) knob: the function's "
                "shuffles run spark.sql.shuffle.partitions")
    if reason is MismatchReason.BATCH_FUNCTION:
        return (f"{stage}: a stage the foreachBatch function runs; it ran {tasks}, not the {binding.knob_value} of "
                f"knob {binding.knob!r} (a repartition(n), or a scan of the function's own); nothing is proposed "
                "for this stage")
    if reason is MismatchReason.NO_PLAN:
        return (f"{stage}: not bound to a knob yet, the runner has not published the query's plan; "
                "nothing is proposed for it")
    if reason is MismatchReason.STAGE_COUNT:
        return (f"{stage}: the plan's stages and the batch's stages differ in number (the query changed?); "
                "nothing is proposed for it")
    if reason is MismatchReason.PLAN_PARTITIONS:
        return (f"{stage} and knob {binding.knob!r} disagree: the knob is {binding.knob_value} but the plan has "
                f"{binding.plan_partitions} partitions; nothing is proposed for this stage")
    if reason is MismatchReason.COALESCED:
        return (f"{stage}: Spark's adaptive execution coalesced the shuffle into {tasks}, so knob "
                f"{binding.knob!r} ({binding.knob_value}) does not set them; nothing is proposed for this stage. "
                f"Remove --conf {ADAPTIVE_COALESCE_CONF}=true from the runner to let the knob set the tasks")
    return (f"{stage} and knob {binding.knob!r} disagree: the knob is {binding.knob_value} but Spark ran "
            f"{binding.tasks_ran} tasks; nothing is proposed for this stage")


def _chart_range(request: HttpRequest) -> str:
    wanted = request.GET.get("range", "1h")
    return wanted if wanted in reads.CHART_RANGES_S else "1h"


def _figures(job: Job, pending: Proposal | None, evaluation, range_key: str) -> dict:
    vertices = reads.dag_vertices(job=job, proposal_plan=pending.job_plan if pending else None, evaluation=evaluation)
    chart = reads.chart_data(job=job, range_s=reads.CHART_RANGES_S[range_key])
    since = datetime.fromisoformat(chart.t[0]) if chart.t else timezone.now() - timedelta(seconds=chart.range_s)
    markers = []
    for execution in proposal_selectors.rescales(job=job, since=since):
        p = execution.proposal
        changes = knob_changes(p)
        downtime = f"{execution.downtime_s:.1f} s" if execution.downtime_s is not None else "–"
        markers.append({"at": execution.finished_at.isoformat(),
                        "label": f"proposal #{p.pk} ({execution.status}): {changes}; downtime {downtime}"})
    for v in vertices:
        v["label"] = parallelism_label(v)
    overhead = reads.dag_overhead(job=job)
    return {"dag": dag_figure(vertices, overhead=overhead) if vertices else None,
            "series": None if chart.empty else series_figure(chart, markers), "vertices": vertices,
            "overhead": overhead}


@login_required
def job_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """The job page: DAG, charts, the pending proposal or why there is none, recent proposals."""
    job = get_object_or_404(Job.objects.select_related("policy"), pk=pk)
    context = _job_context(request, job)
    range_key = _chart_range(request)
    figures = _figures(job, context["pending"], context["evaluation"], range_key)
    context.update(figures=figures, range_key=range_key, ranges=list(reads.CHART_RANGES_S),
                   live_url=f"{reverse('dashboard:job_live', args=[job.pk])}?range={range_key}",
                   spark_ui=present.spark_ui_link(job), generator_rate=present.generator_rate(job))
    return render(request, "dashboard/job.html", context)


@login_required
def job_live(request: HttpRequest, pk: int) -> JsonResponse:
    """Live update of the job page: figures as Plotly JSON and the status panel as HTML."""
    job = get_object_or_404(Job.objects.select_related("policy"), pk=pk)
    context = _job_context(request, job)
    figures = _figures(job, context["pending"], context["evaluation"], _chart_range(request))
    panel = render_to_string("dashboard/_job_panel.html", context, request=request)
    stale = render_to_string("dashboard/_stale.html", context, request=request)
    return JsonResponse({"panel": panel, "stale": stale, "dag": figures["dag"], "series": figures["series"],
                         "vertices": figures["vertices"], "overhead": figures["overhead"]})


# --- proposal page ------------------------------------------------------------------------------

def _proposal_context(request: HttpRequest, proposal: Proposal, error: str = "") -> dict:
    return proposal_context(proposal, can_decide=can_decide(request.user), error=error)


@login_required
def proposal_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """The proposal page: per-vertex table, executors, frozen predictions (and, once verified, what
    was realized), revisions, Approve / Reject."""
    proposal = get_object_or_404(Proposal.objects.select_related("job__policy", "decided_by"), pk=pk)
    return render(request, "dashboard/proposal.html", _proposal_context(request, proposal))


@login_required
def proposal_live(request: HttpRequest, pk: int) -> HttpResponse:
    """The status panel of the proposal page (HTML fragment) for the live refresh."""
    proposal = get_object_or_404(Proposal.objects.select_related("job__policy", "decided_by"), pk=pk)
    return render(request, "dashboard/_proposal_status.html", _proposal_context(request, proposal))


#: The decide form's ``action`` values (anything else is a 400).
DECIDE_ACTIONS = ("approve", "reject")



def _history_context(request: HttpRequest, job: Job) -> dict:
    rows = [{**row, "decided_by": present.decided_by(row["proposal"])}
            for row in proposal_selectors.execution_rows(job=job)]
    names = reads.job_stage_names(job=job)
    knob_stages = present.knob_stages(job=job, names=dict(enumerate(names.values())))
    audit = audit_page(job=job, query=request.GET, knob_stages=knob_stages, stage_names=names,
                       knob_units=present.knob_units(job=job))
    return {"job": job, "policy": job.policy, "rows": rows, "can_decide": can_decide(request.user),
            **audit, "filter_query": urlencode(audit["audit_filter"].query()),
            "suspended": job.policy.auto_approve_suspended,
            "suspended_reason": job.policy.auto_approve_suspended_reason}


@login_required
def history(request: HttpRequest, pk: int) -> HttpResponse:
    """Executions with their measured downtime and verification, the audit events (filtered by
    ``?action=`` and ``?actor=``, each shown as the fields it changed), and rollback."""
    job = get_object_or_404(Job.objects.select_related("policy"), pk=pk)
    return render(request, "dashboard/history.html", _history_context(request, job))


@login_required
def history_live(request: HttpRequest, pk: int) -> HttpResponse:
    job = get_object_or_404(Job.objects.select_related("policy"), pk=pk)
    return render(request, "dashboard/_history_body.html", _history_context(request, job))


# --- rescales page --------------------------------------------------------------------------------

#: Execution statuses counted on the rescales page.
RESCALE_COUNTS = ("succeeded", "failed", "rolled back")


def _trigger(proposal: Proposal) -> str:
    """What triggered a rescale, from structured fields: a rollback, a person (no evaluation: a held
    scale-down applied now, or made by hand), or the evaluation's direction with its needed utilization
    and the band it was compared with."""
    if proposal.kind == Proposal.Kind.ROLLBACK:
        return f"rollback of #{proposal.rollback_of_id}" if proposal.rollback_of_id else "rollback"
    evaluation = proposal.evaluation
    if evaluation is None:
        return "by hand"
    plan = evaluation.job_plan
    if plan is not None and plan.load is not None:
        band = band_text(*plan_band(plan, selectors.policy_band(proposal.job.policy)))
        return f"{evaluation.get_direction_display()}: {LOAD_NAME} {plan.load:.2f}, band {band}"
    return evaluation.get_direction_display()


def _rescale_points(job: Job, since: datetime) -> dict:
    """The rescales chart's series: the cores running, as the job page's chart has them
    (``reads.chart_data`` from ``since``: the cores of the newest snapshot, or minute's roll-up,
    with a completed batch per point; no point while a batch was running, None where no batch
    completed for longer); the cores each evaluation recommended (its proposed configuration's
    executors knob; the plan's executors when the job declares no such knob)."""
    knob = next((k.name for k in job.knob_specs() if k.sets == "executors"), None)
    chart = reads.chart_data(job=job, range_s=max(1, math.ceil((timezone.now() - since).total_seconds())))
    evaluations = list(job.evaluations.filter(created_at__gte=since).order_by("created_at")
                       .values_list("created_at", "proposed_config", "plan"))
    rec_t, recommended = [], []
    for at, proposed, stored in evaluations:
        value = (proposed or {}).get(knob) if knob else None
        plan = stored_plan(stored) if value is None else None
        if plan is not None and plan.executors_proposed is not None:
            value = plan.executors_proposed * (plan.cores_per_executor or 1)
        if isinstance(value, int):
            rec_t.append(at.isoformat())
            recommended.append(value)
    return {"t": chart.t, "cores": chart.cores, "rec_t": rec_t, "recommended": recommended}


@login_required
def rescales(request: HttpRequest, pk: int) -> HttpResponse:
    """The rescales page (Flink 2.3 Web UI "Rescales"; Dataflow's autoscaling tab): counts of
    succeeded, failed and rolled-back executions; each execution with its trigger, who decided it,
    path, pause, time to effect, added lag, catch-up and predicted against realized; and the cores over time against
    the recommendation and the policy's min and max."""
    job = get_object_or_404(Job.objects.select_related("policy"), pk=pk)
    executions = list(Execution.objects.filter(proposal__job=job)
                      .select_related("proposal__decided_by", "proposal__evaluation", "proposal__job__policy")
                      .order_by("-started_at")[:100])
    rows, counts = [], dict.fromkeys(RESCALE_COUNTS, 0)
    for e in executions:
        p = e.proposal
        if p.status == Proposal.Status.ROLLED_BACK:
            counts["rolled back"] += 1
        elif e.status in ("succeeded", "failed"):
            counts[e.status] += 1
        rows.append({"e": e, "p": p, "trigger": _trigger(p), "decided_by": present.decided_by(p),
                     "path": path_text(e.path), "catch_up": numbers.catch_up(e),
                     "added_lag": numbers.added_lag(e), "time_to_effect": numbers.measured_time_to_effect(e),
                     "capacity": _capacity_cell(p),
                     "predicted_catch_up": (p.prediction or {}).get("catch_up_s")})
    first = executions[-1].started_at if executions else timezone.now() - timedelta(hours=1)
    since = min(first - timedelta(minutes=5), timezone.now() - timedelta(hours=1))
    bound = effective_max_cores(job)
    figure = executors_figure(_rescale_points(job, since), job.policy.min_cores, bound.cores, str(bound.source))
    evaluation = selectors.latest_evaluation(job=job)
    job_figures = plan_figures(current_plan(job, evaluation), job=job, bound=bound)
    return render(request, "dashboard/rescales.html", {"job": job, "policy": job.policy, "rows": rows,
                                                       "counts": counts, "figure": figure, "bound": bound,
                                                       "evaluation": evaluation, "job_figures": job_figures,
                                                       "can_decide": can_decide(request.user)})


def _capacity_cell(proposal: Proposal) -> str:
    """The rescales row's capacity, predicted → realized (records/s); ``"–"`` for a proposal that
    predicted nothing (a rollback restores a configuration), and nothing realized from zero batches."""
    detail = proposal.verification_detail or {}
    predicted = (proposal.prediction or {}).get("capacity_per_s")
    realized = (detail.get("realized") or {}).get("capacity_per_s") if detail.get("batches") != 0 else None
    if predicted is None and realized is None:
        return "–"
    return " → ".join(f"{v:,.0f}" if v is not None else "–" for v in (predicted, realized)) + " rec/s"
