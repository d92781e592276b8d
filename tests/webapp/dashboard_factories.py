"""Helpers for the dashboard, API and browser tests: evaluations and executions."""

from __future__ import annotations

from django.utils import timezone

from scaling.values.plan import JobPlan, VertexPlan
from scaling.values.reasons import Decision, PlanReason, Reason
from sparkclient.contract.messages import RescalePath, RescaleResult, ResultStatus
from webapp.jobs.models import Evaluation, Job
from webapp.jobs.plans import reasons_json
from webapp.proposals.models import AuditEvent, Execution, Proposal, result_json

#: VertexPlan fields a test may leave out of ``make_evaluation``'s vertices.
_VERTEX_DEFAULTS = {"current": 1, "proposed": 1, "true_processing_rate": 1000.0, "true_output_rate": 1000.0,
                    "selectivity": 1.0, "target_data_rate": 500.0, "catch_up_data_rate": 0.0, "ideal_parallelism": 1,
                    "utilization": 0.5, "busy_core_s_per_s": 0.5, "adjustable": True}


def make_evaluation(job: Job, *, decision: str = "no-change", reasons: tuple[Reason, ...] = (), vertices=(),
                    **plan) -> Evaluation:
    """A stored evaluation whose plan is a ``JobPlan`` (``to_json``, as the live loop stores it) of
    ``reasons``, ``vertices`` (``VertexPlan`` fields; the rates default to :data:`_VERTEX_DEFAULTS`)
    and the other ``JobPlan`` fields in ``plan`` (a micro-batch plan at load 0.5 on 1 core by default)."""
    fields = {"load": 0.5, "utilization": 0.5, "executors_current": 1, "executors_proposed": 1,
              "cores_per_executor": 1, **plan}
    job_plan = JobPlan(decision=Decision(decision), reasons=tuple(reasons),
                       vertices=tuple(VertexPlan(**{**_VERTEX_DEFAULTS, **v}) for v in vertices), **fields)
    return Evaluation.objects.create(job=job, decision=decision, reasons=reasons_json(job_plan.reasons),
                                     plan=job_plan.to_json(), proposed_config=dict(job.config), window_s=45.0)


def make_succeeded(job: Job, *, cores_from: int = 1, cores_to: int = 2, downtime_s: float = 1.5,
                   path: str = "driver-restart", finished_at=None) -> Proposal:
    """A proposal that was approved and executed successfully, with its execution and audit events."""
    current = dict(job.config, cores=cores_from)
    proposed = dict(job.config, cores=cores_to)
    proposal = Proposal.objects.create(job=job, status=Proposal.Status.SUCCEEDED, current_config=current,
                                       proposed_config=proposed, reasons=reasons_json([Reason(
                                           PlanReason.LOAD_ABOVE_BAND, data={"load": 1.5, "low": 0.4, "high": 1.0,
                                                                             "need": 1.5, "cores": cores_from,
                                                                             "overhead": 0.1})]),
                                       decided_at=timezone.now())
    Execution.objects.create(proposal=proposal, status=Execution.Status.SUCCEEDED, path=path,
                             downtime_s=downtime_s, finished_at=finished_at or timezone.now(),
                             result=result_json(RescaleResult(id=f"proposal-{proposal.pk}-attempt-1",
                                                              status=ResultStatus.SUCCEEDED,
                                                              path=RescalePath(path or "none"),
                                                              downtime_s=downtime_s, knobs=proposed)))
    for action in ("proposed", "approved", "executing", "succeeded"):
        AuditEvent.objects.create(job=job, proposal=proposal, actor_name="system", action=action)
    Job.objects.filter(pk=job.pk).update(config=proposed)
    return proposal
