"""The heap recommendation on the proposals (``scaling.memory``, ``webapp.jobs.memory``): what the approve
form offers to add to a pending proposal, the proposal's configuration and plan with it, and the refusal
of a scale-down while the job is under memory pressure. The services that act on them are in
``webapp.proposals.services``."""

from __future__ import annotations

from dataclasses import replace

from scaling.memory import MemoryDecision, with_memory
from scaling.plan import JobPlan
from scaling.reason_text import reason_text
from scaling.reasons import Decision, Reason
from webapp.jobs.memory import executors_after, heap_decision, job_memory, memory_knob
from webapp.jobs.models import Job
from webapp.jobs.plans import reasons_json
from webapp.proposals.codes import AuditReason
from webapp.proposals.codes import Reason as AuditReasonValue
from webapp.proposals.lifecycle import TransitionError
from webapp.proposals.models import Proposal

__all__ = ["MemoryPressureRefusal", "memory_fields", "memory_offer", "memory_only", "memory_request",
           "refuse_under_pressure"]


class MemoryPressureRefusal(TransitionError):
    """A scale-down asked for while the job is under memory pressure; ``reason`` is the
    ``memory-pressure`` reason (code and figures), the message its words."""

    def __init__(self, job: Job, reason: Reason) -> None:
        super().__init__(f"job {job.name} is under {reason_text(reason)}")
        self.reason = reason


def refuse_under_pressure(job: Job) -> None:
    """Raise :class:`MemoryPressureRefusal` when ``job`` is under memory pressure over its metric window."""
    memory = job_memory(job=job)
    if memory is not None and memory.pressure is not None:
        raise MemoryPressureRefusal(job, memory.pressure.reason())


def memory_request(job: Job, plan: JobPlan | None = None) -> MemoryDecision | None:
    """The heap change a person may ask for now (the job page's "Propose this heap size", the approve
    form's box with the proposal's ``plan``): the job's recommendation on its memory knob when it
    changes it (a decrease never under memory pressure; on the executors ``plan`` runs on); None otherwise."""
    decision = heap_decision(job=job, memory=job_memory(job=job), requested=True,
                             executors_after=executors_after(job, plan))
    return decision if decision is not None and decision.changes else None


def memory_offer(proposal: Proposal) -> MemoryDecision | None:
    """What the approve form of a pending ``proposal`` offers to add: :func:`memory_request`, unless the
    proposal changes the memory knob already (or is not a pending scale proposal)."""
    if proposal.status != Proposal.Status.PENDING or proposal.kind != Proposal.Kind.SCALE:
        return None
    knob = memory_knob(proposal.job)
    if knob is None or proposal.proposed_config.get(knob.name) != proposal.current_config.get(knob.name):
        return None
    return memory_request(proposal.job, proposal.job_plan)


def memory_fields(proposal: Proposal, decision: MemoryDecision) -> tuple[dict, AuditReasonValue]:
    """The fields of ``proposal`` with the heap ``decision`` added (``proposed_config``, ``plan``,
    ``reasons``) and the approval's audit reason (``memory_added``)."""
    plan = proposal.job_plan or JobPlan(decision=Decision.SCALE, reasons=(), vertices=())
    plan = with_memory(replace(plan, decision=Decision.SCALE), decision)
    config = {**proposal.proposed_config, decision.knob: decision.proposed_mb}
    fields = {"proposed_config": config, "plan": plan.to_json(), "reasons": reasons_json(plan.reasons)}
    return fields, AuditReasonValue(AuditReason.MEMORY_ADDED, {
        "knob": decision.knob, "from_mb": decision.current_mb, "to_mb": decision.proposed_mb,
        "reason": decision.reason().to_json()})


def memory_only(proposal: Proposal) -> bool:
    """Whether ``proposal`` changes the memory knob of its job and nothing else."""
    knob = memory_knob(proposal.job)
    changed = {k for k, v in proposal.proposed_config.items() if proposal.current_config.get(k) != v}
    return knob is not None and changed == {knob.name}
