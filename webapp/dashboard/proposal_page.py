"""The proposal page's numbers: the plan per stage in the job's units (``scaling.forecast.stage_capacity``),
the frozen prediction beside what was realized (:mod:`webapp.dashboard.predictions`) and the
execution's figures (:mod:`webapp.dashboard.numbers`), each worded once."""

from __future__ import annotations

from scaling.forecast.job_figures import job_capacity
from scaling.values.plan import JobPlan
from scaling.words.reason_text import reason_text as plan_reason_text
from sparkclient.contract.standby import HandoverState, StandbyStatus
from webapp.dashboard import numbers, present, reads
from webapp.dashboard.predictions import prediction_rows
from webapp.jobs.figures import job_source_ids, plan_figures
from webapp.jobs.selectors import finite_or_inf
from webapp.loop.bounds import effective_max_cores
from webapp.loop.standby import ACTIVE, prepared_for, standby_read
from webapp.proposals.memory import MemoryOffer, memory_offer
from webapp.proposals.models import Execution, Proposal
from webapp.proposals.predictions import plan_cores
from webapp.proposals.reason_text import path_text, reason_text, withdrawal_text


def _vertex_rows(plan: JobPlan | None, names: dict, source_ids: set[str]) -> tuple[list[dict], dict]:
    """The proposal page's per-stage table: each vertex of ``plan`` with its tasks and cores now and
    proposed (``min(tasks, cores)``), its capacity now and expected in source records/s on those cores
    (``scaling.forecast.job_figures.job_capacity``, so that the job's is the stages' combined), its share
    of the busy time and its reason in words (``scaling.words.reason_text``); and the job's capacity now
    and expected in the same units, the figures every page states."""
    if plan is None or not plan.vertices:
        return [], {}
    cores_now, cores_new = plan_cores(plan)
    now, new = job_capacity(plan, source_ids), job_capacity(plan, source_ids, proposed=True)
    rows = []
    for i, v in enumerate(plan.vertices):
        bottleneck = plan.bottleneck == v.vertex_id
        rows.append({"id": v.vertex_id, "stage": names.get(v.vertex_id, v.vertex_id),
                     "current": v.current, "proposed": v.proposed, "cores_now": now.slots[i], "cores_new": new.slots[i],
                     "capacity_now": now.stages[i], "capacity_expected": new.stages[i], "busy_share": now.shares[i],
                     "target_data_rate": finite_or_inf(v.target_data_rate),
                     "catch_up_data_rate": finite_or_inf(v.catch_up_data_rate),
                     "ideal_parallelism": v.ideal_parallelism, "utilization": v.utilization,
                     "reason": plan_reason_text(v.reason) if v.reason else ("bottleneck" if bottleneck else ""),
                     "reason_code": str(v.reason.code) if v.reason else "", "bottleneck": bottleneck})
    slowest = min((r for r in rows if r["capacity_now"]), key=lambda r: r["capacity_now"], default=None)
    job = {"now": now.per_s, "expected": new.per_s,
           "cores_now": cores_now, "cores_new": cores_new, "slowest": slowest["stage"] if slowest else None}
    return rows, job


def proposal_context(proposal: Proposal, *, can_decide: bool, error: str = "") -> dict:
    """The proposal page's context (and its status panel's): the plan per stage, the frozen prediction
    beside what was realized, the execution's figures and, before a decision, the expected time to effect."""
    job = proposal.job
    plan = proposal.job_plan
    cores_now, cores_new = plan_cores(plan) if plan is not None else (1, 1)
    names = reads.job_stage_names(job=job)
    sources = job_source_ids(job)
    rows, job_capacity = _vertex_rows(plan, names, sources)
    predicted = (proposal.prediction or {}).get("capacity_per_s")
    expected = job_capacity.get("expected")
    if isinstance(predicted, (int, float)) and expected and abs(predicted - expected) > 0.01 * expected:
        job_capacity["prediction"] = predicted  # the frozen prediction counts every stage on all the cores
    execution = Execution.objects.filter(proposal=proposal).first()
    detail = proposal.verification_detail or {}
    realized = detail.get("realized")
    catch_up = numbers.catch_up(execution)
    pending = proposal.status == Proposal.Status.PENDING
    standby, seen = standby_read(proposal) if proposal.status in ACTIVE else (None, None)  # one read per render
    expects = pending and proposal.kind == Proposal.Kind.SCALE
    effect = numbers.expected_time_to_effect(proposal, seen=seen, status=standby) if expects else None
    offer = memory_offer(proposal) if pending and can_decide else None
    return {"proposal": proposal, "job": job, "policy": job.policy, "plan": plan, "rows": rows,
            "job_capacity": job_capacity, "cores_now": cores_now, "cores_new": cores_new,
            "job_figures": plan_figures(plan, job=job, bound=effective_max_cores(job), source_ids=sources),
            "predictions": prediction_rows(proposal.prediction, realized, catch_up=catch_up,
                                           batches=detail.get("batches")),
            "realized": realized, "execution": execution, "catch_up": catch_up,
            "execution_path": path_text(execution.path) if execution is not None else "",
            "added_lag": numbers.added_lag(execution),
            "time_to_effect": numbers.time_to_effect_text(effect) if effect is not None else "",
            "time_to_effect_source": effect.source if effect is not None else "",
            "time_to_effect_standby": (effect.standby or "") if effect is not None else "",
            "time_to_effect_warm_up_s": effect.warm_up_s if effect is not None else None,
            "can_decide": can_decide, "error": error,
            "memory_offer": offer, "approve_confirm": approve_confirm(proposal, offer, standby),
            "memory_standby_note": memory_standby_note(proposal, offer, standby),
            "withdrawal_text": withdrawal_text(proposal.withdrawal) if proposal.withdrawal else "",
            "verdict_text": reason_text((proposal.verification_detail or {}).get("verdict")),
            "audit": list(proposal.audit_events.order_by("at", "id")[:50]),
            "decided_by": present.decided_by(proposal),
            "config_rows": present.knob_rows(
                current=proposal.current_config, proposed=proposal.proposed_config,
                stages=present.knob_stages(job=job, names={i: n for i, n in enumerate(names.values())}),
                pins=present.knob_pins(job=job) if pending else None, units=present.knob_units(job=job)),
            "executors_knob": any(k.sets == "executors" for k in job.knob_specs()),
            "standby": standby_text(standby)}


#: The proposal page's words for the state of the standby driver prepared for it.
STANDBY_STATES = {"starting": "starting", "ready": "ready", "failed": "failed to start",
                  "cancelled": "stopped", "requested": "starting", "released": "taking over"}


def standby_text(status: StandbyStatus | None) -> str:
    """``"ready: 1,490 MB resident, 2.5 % of one core while it waits"``: the standby driver prepared for
    a proposal (``webapp.loop.standby.standby_status``) and what it costs; ``""`` when there is none."""
    if status is None or status.state is None:
        return ""
    cost = [f"{status.rss_mb:,.0f} MB resident" if status.rss_mb is not None else "",
            f"{status.cpu_pct:.1f} % of one core" if status.cpu_pct is not None else ""]
    cost = [c for c in cost if c]
    return STANDBY_STATES.get(status.state.value, status.state.value) + (
        f": {', '.join(cost)} while it waits" if cost else "")


#: The states of a standby that ticking the memory box throws away.
PREPARED = (HandoverState.REQUESTED, HandoverState.STARTING, HandoverState.READY)


def memory_standby_note(proposal: Proposal, offer: MemoryOffer | None, standby: StandbyStatus | None) -> str:
    """Beside the approve form's memory box: adding the heap change changes the knobs, so the standby
    prepared for ``proposal``'s knobs (starting or ready) is stopped and a new driver starts from
    scratch; how long it takes (s) is the prepared one's measured start to ready when known.
    ``""`` without an offer or such a standby."""
    if offer is None or not prepared_for(standby, proposal) or standby.state not in PREPARED:
        return ""
    took = f" (about {standby.ready_s:,.0f} s, as long as this one took to be ready)" if standby.ready_s else ""
    return (f"Including the memory change starts a new driver from scratch: the standby driver prepared for this "
            f"proposal ({STANDBY_STATES[standby.state.value]}) runs without it, so it is stopped and a new one "
            f"starts{took} before the handover"
            + ("; without the memory change the approval hands over at once." if standby.state == HandoverState.READY
               else "."))


def approve_confirm(proposal: Proposal, offer: MemoryOffer | None, standby: StandbyStatus | None) -> dict:
    """The approve dialog's question: ``plain`` with the memory box unticked, ``memory`` ticked (the heap
    change named, and what it does to a prepared standby; ``""`` without an offer)."""
    head = f"Approve revision {proposal.revision} of proposal #{proposal.pk}"
    plain = f"{head}? The job restarts with the proposed configuration."
    if offer is None:
        return {"plain": plain, "memory": ""}
    note = memory_standby_note(proposal, offer, standby)
    return {"plain": plain, "memory": (
        f"{head} with the memory recommendation added ({offer.text})? The job restarts with the proposed "
        f"configuration and the new memory, in a new driver."
        + (f" {note}" if note else ""))}
