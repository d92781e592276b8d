"""Whether a metric sample can be trusted for a scale-down: a sample is *ready*, or *not ready* with
one or more :class:`SampleIssue` values (a :class:`NotReady` code and its numbers). The collector
decides them per sample (``sparkclient.collector.readiness``), the web app adds what only it knows
(a knob binding that disagrees with the tasks Spark ran), and the planner reads them
(``scaling.planner.signals.scale_down_veto``): a window with a not-ready sample never scales down
(FLINK-39925; docs/ARCHITECTURE.md, "Measured signals"). Text is rendered in ``scaling.words.reason_text``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from scaling.values.reasons import PlanFormatError, PlanReason, Reason

__all__ = ["NotReady", "SampleIssue", "issues_from_json", "issues_to_json", "not_ready_reasons"]


class NotReady(StrEnum):
    """Why a sample is not ready (``SampleIssue.code``); its data in the comment."""

    MISSING_STAGES = "missing-stages"          # data: batches (left out of the vertices), of (batches)
    SQL_PLAN_UNUSABLE = "sql-plan-unusable"    # data: sources (in the progress), source_stages (found)
    FIRST_BATCH = "first-batch"                # data: batch_id (the run's first batch after a start)
    RESTART_IN_WINDOW = "restart-in-window"    # data: batches (of another run completing in the window)
    BINDING_MISMATCH = "binding-mismatch"      # data: knob, knob_value, tasks_ran, position
    IMPLAUSIBLE_CORES = "implausible-cores"    # data: cores, limit (what the cluster or host reports)
    IMPLAUSIBLE_RATE = "implausible-rate"      # data: source (index), rate_per_s, limit_per_s


Value = float | int | str | None


@dataclass(frozen=True)
class SampleIssue:
    """One reason a sample is not ready: a :class:`NotReady` code and its numbers (``data``, read-only)."""

    code: NotReady
    data: Mapping[str, Value] = field(default_factory=dict)

    def to_json(self) -> dict:
        """``{"code": str, "data": {...}}``."""
        return {"code": str(self.code), "data": dict(self.data)}

    @classmethod
    def from_json(cls, value: object) -> SampleIssue:
        """The issue :meth:`to_json` wrote. Raises ``PlanFormatError`` naming the field."""
        if not isinstance(value, Mapping):
            raise PlanFormatError(f"not_ready: an object, not {type(value).__name__}")
        try:
            code = NotReady(value.get("code"))
        except ValueError:
            raise PlanFormatError(f"not_ready.code: unknown code {value.get('code')!r}") from None
        data = value.get("data", {})
        if not isinstance(data, Mapping) or not all(
                isinstance(k, str) and (v is None or isinstance(v, (str, int, float))) and not isinstance(v, bool)
                for k, v in data.items()):
            raise PlanFormatError("not_ready.data: an object of numbers, strings or nulls")
        return cls(code, dict(data))


def issues_to_json(issues: Iterable[SampleIssue]) -> list[dict]:
    """The issues as a JSON list (what ``MetricSnapshot.not_ready`` stores)."""
    return [i.to_json() for i in issues]


def issues_from_json(value: object) -> tuple[SampleIssue, ...]:
    """Parse :func:`issues_to_json` output (None or ``[]``: ready). Raises ``PlanFormatError``."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise PlanFormatError("not_ready: a list")
    return tuple(SampleIssue.from_json(v) for v in value)


def not_ready_reasons(issues: Iterable[SampleIssue]) -> tuple[Reason, ...]:
    """One ``samples-not-ready`` reason per distinct code, in code order (data: ``code``, ``samples``
    carrying it, and the newest such issue's data), for the plan and the job page."""
    newest: dict[NotReady, SampleIssue] = {}
    counts: dict[NotReady, int] = {}
    for issue in issues:
        newest[issue.code] = issue
        counts[issue.code] = counts.get(issue.code, 0) + 1
    return tuple(Reason(PlanReason.SAMPLES_NOT_READY, None,
                        {**newest[code].data, "code": str(code), "samples": counts[code]})
                 for code in NotReady if code in newest)
