"""A job's figures as the job page, the proposal page, the Rescales page and the API state them, from
one plan: its capacity now and on the proposed configuration, its needed utilization against the band
it was compared with, and the cores it needs with the cap that holds them. Each figure is defined once
in ``scaling.forecast.job_figures`` and worded once in ``scaling.words.reason_text``."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from scaling.forecast.bounds import CoresBound
from scaling.forecast.job_figures import CoresNeeded, cores_needed, job_capacity, plan_band
from scaling.policy.numbers import finite_or_none
from scaling.values.plan import JobPlan
from scaling.words.reason_text import LOAD_DEFINITION, LOAD_NAME, band_text
from webapp.jobs.models import Evaluation, Job, VertexSnapshot
from webapp.jobs.selectors import policy_band

__all__ = ["PlanFigures", "current_plan", "job_source_ids", "plan_figures"]


@dataclass(frozen=True)
class PlanFigures:
    """One plan's figures: capacities in source records/s (None: no rate to go by), the needed
    utilization (``JobPlan.load``, a share; None in continuous mode) and its band (0..1), the cores
    needed (None without the figure)."""

    capacity_now_per_s: float | None
    capacity_expected_per_s: float | None
    load: float | None
    band: tuple[float, float]
    cores_needed: CoresNeeded | None

    @property
    def band_text(self) -> str:
        return band_text(*self.band)

    @property
    def load_definition(self) -> str:
        return LOAD_DEFINITION

    @property
    def load_text(self) -> str:
        """``"needed utilization 24.71"``; ``""`` without the figure."""
        return f"{LOAD_NAME} {self.load:.2f}" if self.load is not None else ""

    def to_dict(self) -> dict:
        """JSON for the API: capacities (records/s, 3 decimals), ``load`` with its name and definition, ``band``
        ``[low, high]`` with ``band_text``, ``cores_needed`` (``CoresNeeded.to_dict``) or null."""
        def rounded(value: float | None) -> float | None:
            return round(value, 3) if value is not None else None

        return {"capacity_now_per_s": rounded(self.capacity_now_per_s),
                "capacity_expected_per_s": rounded(self.capacity_expected_per_s),
                "load": rounded(self.load), "load_name": LOAD_NAME, "load_definition": LOAD_DEFINITION,
                "band": list(self.band),
                "band_text": self.band_text,
                "cores_needed": self.cores_needed.to_dict() if self.cores_needed is not None else None}


def job_source_ids(job: Job) -> set[str]:
    """The source stages' ids of ``job``'s newest snapshot with a completed batch (empty when none)."""
    newest = job.snapshots.filter(batches__gt=0).order_by("-collected_at").values_list("pk", flat=True).first()
    if newest is None:
        return set()
    return set(VertexSnapshot.objects.filter(snapshot_id=newest, is_source=True).values_list("vertex_id", flat=True))


def current_plan(job: Job, evaluation: Evaluation | None) -> JobPlan | None:
    """The plan of ``evaluation`` (the job's newest) when it evaluated the running configuration; None
    when there is none, or the configuration changed after it."""
    if evaluation is None or (job.config_changed_at and evaluation.created_at < job.config_changed_at):
        return None
    return evaluation.job_plan


def plan_figures(plan: JobPlan | None, *, job: Job, bound: CoresBound | None = None,
                 source_ids: Collection[str] | None = None) -> PlanFigures | None:
    """The figures of ``plan`` (None: no plan, no figures), for ``job`` (its policy's band); ``bound``
    names the cap of the cores needed; ``source_ids``: the source stages (None: :func:`job_source_ids`)."""
    if plan is None:
        return None
    sources = job_source_ids(job) if source_ids is None else source_ids
    return PlanFigures(capacity_now_per_s=job_capacity(plan, sources).per_s,
                       capacity_expected_per_s=job_capacity(plan, sources, proposed=True).per_s,
                       load=finite_or_none(plan.load),
                       band=plan_band(plan, policy_band(job.policy)), cores_needed=cores_needed(plan, bound))
