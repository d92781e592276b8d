"""The figures of a job that every page and the API state, each defined here once from a micro-batch
plan (``scaling.values.plan.JobPlan``): its capacity (:func:`job_capacity`), the band its needed
utilization is compared with (:func:`plan_band`), the cores it needs with the cap that holds them
(:func:`cores_needed`), and the batch overhead's share of the batch (:func:`overhead_of_batch`).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from scaling.forecast.bounds import CoresBound
from scaling.forecast.stage_capacity import busy_shares, combined_capacity_per_s, stage_capacities_per_s
from scaling.policy.numbers import finite_or_none, is_finite_number
from scaling.policy.policy import effective_band
from scaling.values.plan import JobPlan
from scaling.values.reasons import Limit

__all__ = ["OVERHEAD_SHOWN", "CoresNeeded", "JobCapacity", "cores_needed", "job_capacity", "overhead_of_batch",
           "plan_band", "plan_cores"]

#: The batch overhead's share of the batch above which the DAG shows it as its own element.
OVERHEAD_SHOWN = 0.5


def plan_cores(plan: JobPlan) -> tuple[int, int]:
    """(cores now, cores proposed) of a micro-batch plan (executors × cores each)."""
    per_executor = plan.cores_per_executor or 1
    now = plan.executors_current or 1
    new = plan.executors_proposed or now
    return now * per_executor, new * per_executor


@dataclass(frozen=True)
class JobCapacity:
    """A job's capacity in source records/s on one configuration (``scaling.forecast.stage_capacity``):
    ``per_s`` the stages' combined (None without a rate to go by), ``stages`` each stage's (None: no
    cost), ``slots`` the cores each runs on (``min(tasks, cores)``), ``shares`` each one's share of the
    busy time (0..1)."""

    per_s: float | None
    stages: tuple[float | None, ...]
    slots: tuple[int, ...]
    shares: tuple[float | None, ...]


def job_capacity(plan: JobPlan, source_ids: Collection[str] = (), *, proposed: bool = False) -> JobCapacity:
    """The capacity of ``plan``'s job on its running configuration, or on the proposed one
    (``proposed``: the proposed tasks and cores): each stage on ``min(tasks, cores)`` cores, with the
    plan's batch overhead, in source records/s (``source_ids``: the source stages; none known: the
    first stage). Every page and the API state a job's capacity from here."""
    if not plan.vertices:
        return JobCapacity(None, (), (), ())
    cores = plan_cores(plan)[1 if proposed else 0]
    stages = [(finite_or_none(v.target_data_rate) or 0.0, finite_or_none(v.true_processing_rate) or 0.0)
              for v in plan.vertices]
    sources = ({v.vertex_id for v in plan.vertices} & set(source_ids)) or {plan.vertices[0].vertex_id}
    source_rate = sum(rate for v, (rate, _tpr) in zip(plan.vertices, stages) if v.vertex_id in sources)
    slots = tuple(min(v.proposed if proposed else v.current, cores) for v in plan.vertices)
    capacities = stage_capacities_per_s(stages, source_rate_per_s=source_rate, slots=slots,
                                        overhead_fraction=finite_or_none(plan.overhead_fraction) or 0.0)
    return JobCapacity(combined_capacity_per_s(capacities), tuple(capacities), slots, tuple(busy_shares(capacities)))


def plan_band(plan: JobPlan | None, band: tuple[float, float]) -> tuple[float, float]:
    """The utilization band ``plan`` compared its needed utilization with: the policy's ``band``, or
    [0, 1] when the plan was in backlog mode (``scaling.policy.policy.effective_band``)."""
    return effective_band(band, bool(plan is not None and plan.backlog_mode))


@dataclass(frozen=True)
class CoresNeeded:
    """The cores a plan needs for its target and catch-up rate at the target utilization (``needed``,
    C*), and the most it may have when that holds them (``cap``; None: not capped), named by ``cap_text``."""

    needed: int
    cap: int | None = None
    cap_text: str = ""

    @property
    def capped(self) -> bool:
        return self.cap is not None and self.needed > self.cap

    @property
    def text(self) -> str:
        """``"26 cores needed"``, or ``"26 cores needed, capped at 8 (the policy's maximum)"``."""
        unit = "core" if self.needed == 1 else "cores"
        if not self.capped:
            return f"{self.needed} {unit} needed"
        return f"{self.needed} {unit} needed, capped at {self.cap}" + (f" ({self.cap_text})" if self.cap_text else "")

    def to_dict(self) -> dict:
        """JSON for the API: ``{needed, capped, cap, cap_text, text}``."""
        return {"needed": self.needed, "capped": self.capped, "cap": self.cap if self.capped else None,
                "cap_text": self.cap_text if self.capped else "", "text": self.text}


def cores_needed(plan: JobPlan | None, bound: CoresBound | None = None) -> CoresNeeded | None:
    """The cores ``plan`` needs (``JobPlan.cores_needed``) and the cap that holds them: the most cores
    the planner could ask for (its ``max-executors`` limit; ``bound``, the effective most cores, names who
    sets it), or the running cores of a pipeline without an executors knob (``cores-not-adjustable``); a
    limit stored without its number caps nothing. None for a plan without the figure (continuous mode)."""
    if plan is None or plan.cores_needed is None:
        return None
    needed = plan.cores_needed
    at_max, fixed = plan.limit(Limit.MAX_EXECUTORS), plan.limit(Limit.CORES_NOT_ADJUSTABLE)
    if at_max is not None and is_finite_number(cap := at_max.data.get("cores_max")):
        named = bound.named if bound is not None and bound.cores == cap else ""
        return CoresNeeded(needed, int(cap), named or "the most cores the plan may ask for")
    if fixed is not None and is_finite_number(cap := fixed.data.get("cores")):
        return CoresNeeded(needed, int(cap), "the pipeline declares no executors knob")
    if bound is not None and needed > bound.cores:
        return CoresNeeded(needed, bound.cores, bound.named)
    return CoresNeeded(needed)


def overhead_of_batch(overhead_s: float, batch_s: float) -> float | None:
    """The batch overhead's share of the batch (planning, commit, the Python workers' start, scheduling:
    the batch's time outside its stages' tasks), ``overhead_s / batch_s`` (seconds over seconds, 0..1);
    None without a batch duration."""
    if batch_s <= 0:
        return None
    return min(1.0, max(0.0, overhead_s / batch_s))
