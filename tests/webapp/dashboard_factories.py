"""Helpers for the dashboard, API and browser tests: users with a role, evaluations, executions."""

from __future__ import annotations

from django.utils import timezone

from sparkclient.contract.control import RescalePath, RescaleResult, ResultStatus
from tests.webapp.factories import make_user
from webapp.jobs.models import Evaluation, Job
from webapp.proposals.models import AuditEvent, Execution, Proposal, result_json


def make_role_user(username: str = "operator", role: str = "operator"):
    """A user with ``role`` (viewer, operator, admin)."""
    return make_user(username, role=role)


def make_evaluation(job: Job, *, decision: str = "no-change", reasons=(), **plan) -> Evaluation:
    """A stored evaluation with a plan JSON like ``plan_as_json`` writes."""
    body = {"decision": decision, "reasons": list(reasons), "vertices": [], "mode": "micro-batch",
            "executable": True, "load": 0.5, "utilization": 0.5, "executors_current": 1, "executors_proposed": 1,
            "cores_per_executor": 1}
    body.update(plan)
    return Evaluation.objects.create(job=job, decision=decision, reasons=list(reasons), plan=body,
                                     proposed_config=dict(job.config), window_s=45.0)


def make_succeeded(job: Job, *, cores_from: int = 1, cores_to: int = 2, downtime_s: float = 1.5,
                   path: str = "driver-restart", finished_at=None) -> Proposal:
    """A proposal that was approved and executed successfully, with its execution and audit events."""
    current = dict(job.config, cores=cores_from)
    proposed = dict(job.config, cores=cores_to)
    proposal = Proposal.objects.create(job=job, status=Proposal.Status.SUCCEEDED, current_config=current,
                                       proposed_config=proposed, reasons=["load 1.50 above the band"],
                                       decided_at=timezone.now())
    Execution.objects.create(proposal=proposal, status=Execution.Status.SUCCEEDED, path=path,
                             downtime_s=downtime_s, finished_at=finished_at or timezone.now(),
                             result=result_json(RescaleResult(id=f"proposal-{proposal.pk}-attempt-1",
                                                              status=ResultStatus.SUCCEEDED, path=RescalePath(path or "none"),
                                                              downtime_s=downtime_s, knobs=proposed)))
    for action in ("proposed", "approved", "executing", "succeeded"):
        AuditEvent.objects.create(job=job, proposal=proposal, actor_name="system", action=action)
    Job.objects.filter(pk=job.pk).update(config=proposed)
    return proposal
