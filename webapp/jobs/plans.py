"""Stored plans and reasons read back into the model's typed values.

``Evaluation.plan`` / ``Proposal.plan`` (and the plan of ``Evaluation.held_scale_down``) hold
:meth:`scaling.values.plan.JobPlan.to_json` (format 2); ``Evaluation.reasons`` / ``Proposal.reasons`` hold
:meth:`scaling.values.reasons.Reason.to_json` items. Readers go through :func:`stored_plan` and
:func:`stored_reasons` (or the models' ``job_plan`` / ``reason_values``), never through the JSON.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from scaling.values.plan import JobPlan
from scaling.values.reasons import PlanFormatError, Reason
from scaling.words.reason_text import reason_text

logger = logging.getLogger(__name__)


def stored_plan(data: object) -> JobPlan | None:
    """The plan stored as ``data`` (format 2, or the unversioned shape ``JobPlan.from_json`` still
    reads); None for an empty one (a rollback or a hand-made proposal has no plan) or one this
    version cannot read (logged with the field it names)."""
    if not data:
        return None
    try:
        return JobPlan.from_json(data)
    except PlanFormatError as exc:
        logger.warning("stored plan not readable: %s", exc)
        return None


def stored_reasons(data: object) -> tuple[Reason, ...]:
    """The reasons stored as ``data`` (a list of ``Reason.to_json``); an item this version cannot
    read is left out (logged with the field it names)."""
    reasons = []
    for item in data if isinstance(data, list) else ():
        try:
            reasons.append(Reason.from_json(item))
        except PlanFormatError as exc:
            logger.warning("stored reason not readable: %s", exc)
    return tuple(reasons)


def reasons_json(reasons: Iterable[Reason]) -> list[dict]:
    """Reasons as ``Evaluation.reasons`` / ``Proposal.reasons`` store them."""
    return [reason.to_json() for reason in reasons]


def plan_fields(plan: JobPlan) -> dict:
    """A plan as ``Evaluation`` and ``Proposal`` store it: ``{"plan": JobPlan.to_json(), "reasons": ...}``,
    the reasons in the plan's stored form, so that a row's reasons and its plan's are one value."""
    stored = plan.to_json()
    return {"plan": stored, "reasons": stored["reasons"]}


def reason_json(reason: Reason) -> dict:
    """A reason as the API and the backtest give it: ``{code, vertex_id, data, text}`` (an infinite
    number as null), its words from :func:`scaling.words.reason_text.reason_text`."""
    return {**reason.to_json(infinity_as_null=True), "text": reason_text(reason)}


class StoredPlanMixin:
    """``job_plan`` and ``reason_values`` of a model with ``plan`` and ``reasons`` JSON fields, each
    parsed once per loaded value (a ``refresh_from_db`` loads a new value, which is parsed again)."""

    plan: object
    reasons: object

    @property
    def job_plan(self) -> JobPlan | None:
        """The stored plan (:func:`stored_plan`), None when there is none."""
        cached = self.__dict__.get("_job_plan")
        if cached is None or cached[0] is not self.plan:
            cached = (self.plan, stored_plan(self.plan))
            self.__dict__["_job_plan"] = cached
        return cached[1]

    @property
    def reason_values(self) -> tuple[Reason, ...]:
        """The stored reasons (:func:`stored_reasons`)."""
        cached = self.__dict__.get("_reason_values")
        if cached is None or cached[0] is not self.reasons:
            cached = (self.reasons, stored_reasons(self.reasons))
            self.__dict__["_reason_values"] = cached
        return cached[1]
