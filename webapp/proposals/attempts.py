"""An execution's attempt log (``Execution.attempt_log``) as typed values: one :class:`AttemptEntry`
per attempt, with the back-off's :class:`RetryDecision` after a failure. The stored JSON is written
and read here only (:meth:`AttemptEntry.to_json`, :meth:`AttemptEntry.from_json`)::

    {"attempt": 2, "exec_id": "proposal-7-attempt-2", "status": "failed", "finished_at": "<ISO 8601>",
     "error": "...", "path": "none", "retry": {"delay_s": 20.0, "code": "retry", "data": {...}},
     "downtime_s": ..., "pause_s": ..., "answered_by": ..., "applied_by": ...}

``retry`` and the last four are present only when they apply.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from sparkclient.contract.messages import RescalePath
from webapp.proposals.codes import RetryCode
from webapp.proposals.lifecycle import AttemptOutcome

__all__ = ["AttemptEntry", "RetryDecision", "entries_from_json", "entries_to_json"]


@dataclass(frozen=True)
class RetryDecision:
    """Retry after ``delay_s`` seconds, or give up (``delay_s is None``); ``code`` and ``data`` say why
    (``webapp.loop.backoff.next_retry`` decides)."""

    delay_s: float | None
    code: RetryCode
    data: dict = field(default_factory=dict)

    @property
    def retry(self) -> bool:
        return self.delay_s is not None

    def to_json(self) -> dict:
        return {"delay_s": self.delay_s, "code": str(self.code), "data": dict(self.data)}

    @classmethod
    def from_json(cls, stored: Mapping) -> RetryDecision:
        """Raises ValueError for a code this version does not know."""
        delay = stored.get("delay_s")
        return cls(float(delay) if delay is not None else None, RetryCode(stored["code"]),
                   dict(stored.get("data") or {}))


@dataclass(frozen=True)
class AttemptEntry:
    """How one attempt of an execution ended.

    Attributes:
        attempt: its number, from 1.
        exec_id: its command's id on the control channel (``Execution.exec_id``).
        status: how it ended.
        finished_at: when its outcome was recorded; for an attempt a later answer showed applied, when
            its restart finished on the runner.
        error: the runner's error, or why there was no answer ("" for none).
        path: the path the answer named (``none`` without one).
        retry: the back-off's decision after a failed or unanswered attempt; None otherwise.
        downtime_s, pause_s: the restart's seconds, on an earlier attempt a later answer showed applied.
        answered_by: on that earlier attempt, the attempt whose answer showed it.
        applied_by: on a ``replayed`` or ``not_sent`` attempt, the attempt that applied the rescale.
    """

    attempt: int
    exec_id: str
    status: AttemptOutcome
    finished_at: datetime
    error: str = ""
    path: RescalePath = RescalePath.NONE
    retry: RetryDecision | None = None
    downtime_s: float | None = None
    pause_s: float | None = None
    answered_by: int | None = None
    applied_by: int | None = None

    def to_json(self) -> dict:
        """The stored form (the module's docstring); optional fields only when set."""
        stored = {"attempt": self.attempt, "exec_id": self.exec_id, "status": self.status.value,
                  "finished_at": self.finished_at.isoformat(), "error": self.error, "path": self.path.value}
        if self.retry is not None:
            stored["retry"] = self.retry.to_json()
        optional = {"downtime_s": self.downtime_s, "pause_s": self.pause_s, "answered_by": self.answered_by,
                    "applied_by": self.applied_by}
        return stored | {k: v for k, v in optional.items() if v is not None}

    @classmethod
    def from_json(cls, stored: Mapping) -> AttemptEntry:
        """Raises KeyError (a field missing) or ValueError (a value this version does not read) for an
        entry that is not one :meth:`to_json` wrote."""
        retry, numbers = stored.get("retry"), {k: stored.get(k) for k in ("downtime_s", "pause_s")}
        return cls(attempt=int(stored["attempt"]), exec_id=str(stored["exec_id"]),
                   status=AttemptOutcome(stored["status"]), finished_at=datetime.fromisoformat(stored["finished_at"]),
                   error=str(stored.get("error") or ""), path=RescalePath(stored.get("path") or RescalePath.NONE),
                   retry=RetryDecision.from_json(retry) if retry is not None else None,
                   **{k: float(v) if v is not None else None for k, v in numbers.items()},
                   answered_by=_number(stored.get("answered_by")), applied_by=_number(stored.get("applied_by")))


def _number(value: object) -> int | None:
    return int(value) if value is not None else None


def entries_from_json(stored: Iterable[Mapping]) -> tuple[AttemptEntry, ...]:
    """A stored attempt log read back, in its order."""
    return tuple(AttemptEntry.from_json(entry) for entry in stored)


def entries_to_json(entries: Iterable[AttemptEntry]) -> list[dict]:
    """An attempt log as ``Execution.attempt_log`` stores it."""
    return [entry.to_json() for entry in entries]
