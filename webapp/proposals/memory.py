"""The memory recommendations on the proposals (``scaling.planner.door``, ``webapp.jobs.memory``): what a person
may ask for (the heap, and the other memories the pipeline has a knob for), what the approve form offers
to add to a pending proposal, the proposal's configuration and plan with it, and the refusal of a
scale-down while the job is under memory pressure. The services that act on them are in
``webapp.proposals.services``."""

from __future__ import annotations

from dataclasses import dataclass

from scaling.planner.door import requested_memory, with_requested_memory
from scaling.values.memory import MemoryDecision
from scaling.values.plan import JobPlan
from scaling.values.reasons import Decision, Reason
from scaling.words.reason_text import reason_text
from webapp.jobs.memory import job_memory, window_memory_inputs
from webapp.jobs.models import Job
from webapp.jobs.plans import plan_fields
from webapp.proposals.codes import AuditReason
from webapp.proposals.codes import Reason as AuditReasonValue
from webapp.proposals.lifecycle import TransitionError
from webapp.proposals.models import Proposal

__all__ = ["MemoryOffer", "MemoryPressureRefusal", "memory_fields", "memory_offer", "memory_only", "memory_request",
           "refuse_under_pressure"]


@dataclass(frozen=True)
class MemoryOffer:
    """The memory changes a person may apply at once: ``decisions``, the heap's first, each a requested
    change of one memory knob. ``knob``, ``current_mb`` and ``proposed_mb`` are the first one's."""

    decisions: tuple[MemoryDecision, ...]

    @property
    def knob(self) -> str | None:
        return self.decisions[0].knob

    @property
    def current_mb(self) -> int | None:
        return self.decisions[0].current_mb

    @property
    def proposed_mb(self) -> int | None:
        return self.decisions[0].proposed_mb

    @property
    def config(self) -> dict[str, int | None]:
        """``{knob: proposed MB}`` of every change."""
        return {d.knob: d.proposed_mb for d in self.decisions if d.knob is not None}

    @property
    def knobs(self) -> str:
        """The knobs it changes, comma-separated (the page's ``data-knobs``)."""
        return ",".join(self.config)

    def applied(self, plan: JobPlan) -> JobPlan:
        """``plan`` with every change, as a ``scale`` (``scaling.planner.door.with_requested_memory``)."""
        return with_requested_memory(plan, self.decisions)

    @property
    def text(self) -> str:
        """Each change, as ``knob 1,024 → 512 MB``, comma-separated."""
        return ", ".join(f"{d.knob} {d.current_mb:,} → {d.proposed_mb:,} MB" for d in self.decisions)


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


def memory_request(job: Job, plan: JobPlan | None = None) -> MemoryOffer | None:
    """The memory changes a person may ask for now (the job page's "Propose the recommended memory", the
    approve form's box with the proposal's ``plan``): the job's recommendation on each memory knob
    that it changes (the heap on the executors ``plan`` runs on; a decrease never under memory
    pressure); None when there is none."""
    decisions = requested_memory(window_memory_inputs(job=job), plan)
    return MemoryOffer(decisions) if decisions else None


def memory_offer(proposal: Proposal) -> MemoryOffer | None:
    """What the approve form of a pending ``proposal`` offers to add: :func:`memory_request` less the
    memory knobs the proposal changes already (None when nothing is left, or not a pending scale proposal)."""
    if proposal.status != Proposal.Status.PENDING or proposal.kind != Proposal.Kind.SCALE:
        return None
    request = memory_request(proposal.job, proposal.job_plan)
    if request is None:
        return None
    changed = {k for k, v in proposal.proposed_config.items() if proposal.current_config.get(k) != v}
    left = tuple(d for d in request.decisions if d.knob not in changed)
    return MemoryOffer(left) if left else None


def memory_fields(proposal: Proposal, offer: MemoryOffer) -> tuple[dict, AuditReasonValue]:
    """The fields of ``proposal`` with every change of ``offer`` added (``proposed_config``, ``plan``,
    ``reasons``) and the approval's audit reason (``memory_added``: the first change's figures, and
    ``added``, every change with its reason)."""
    plan = offer.applied(proposal.job_plan or JobPlan(decision=Decision.SCALE, reasons=(), vertices=()))
    config = {**proposal.proposed_config, **offer.config}
    fields = {"proposed_config": config, **plan_fields(plan)}
    added = [{"knob": d.knob, "from_mb": d.current_mb, "to_mb": d.proposed_mb, "reason": d.reason().to_json()}
             for d in offer.decisions]
    return fields, AuditReasonValue(AuditReason.MEMORY_ADDED, {**added[0], "added": added})


def memory_only(proposal: Proposal) -> bool:
    """Whether ``proposal`` changes memory knobs of its job and nothing else."""
    memory = {k.name for k in proposal.job.knob_specs() if k.sets.is_memory}
    changed = {k for k, v in proposal.proposed_config.items() if proposal.current_config.get(k) != v}
    return bool(changed) and changed <= memory
