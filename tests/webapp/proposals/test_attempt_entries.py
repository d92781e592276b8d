"""An execution's attempt log read and written as typed values (``webapp.proposals.attempts``)."""

from __future__ import annotations

from dataclasses import FrozenInstanceError
from datetime import UTC, datetime

import pytest

from sparkclient.contract.messages import RescalePath
from webapp.proposals.attempts import AttemptEntry, RetryDecision, entries_from_json, entries_to_json
from webapp.proposals.codes import RetryCode
from webapp.proposals.lifecycle import AttemptOutcome

AT = datetime(2025, 3, 1, 12, 0, 5, 250000, tzinfo=UTC)

#: An attempt log as the web app stored it before the entries were typed: what the codec must read.
STORED = [
    {"attempt": 1, "exec_id": "proposal-7-attempt-1", "finished_at": "2025-03-01T12:00:05.250000+00:00",
     "status": "succeeded", "error": "", "path": "driver-restart", "downtime_s": 14.0, "pause_s": 9.5,
     "answered_by": 2},
    {"attempt": 2, "exec_id": "proposal-7-attempt-2", "finished_at": "2025-03-01T12:01:00+00:00",
     "status": "replayed", "error": "", "path": "driver-restart", "applied_by": 1},
]


def test_a_stored_log_reads_back_as_entries_and_writes_the_same_json():
    first, second = entries_from_json(STORED)
    assert first == AttemptEntry(1, "proposal-7-attempt-1", AttemptOutcome.SUCCEEDED, AT,
                                 path=RescalePath.DRIVER_RESTART, downtime_s=14.0, pause_s=9.5, answered_by=2)
    assert (second.status, second.applied_by, second.finished_at.tzinfo) == (AttemptOutcome.REPLAYED, 1, UTC)
    assert entries_to_json((first, second)) == STORED


def test_a_failed_entry_keeps_its_retry_decision():
    retry = RetryDecision(20.0, RetryCode.RETRY, {"strategy": "fixed-delay", "retry": 1, "attempts": 3})
    entry = AttemptEntry(1, "proposal-7-attempt-1", AttemptOutcome.FAILED, AT, error="the query did not start",
                         path=RescalePath.IN_PROCESS, retry=retry)
    stored = entry.to_json()
    assert stored["retry"] == {"delay_s": 20.0, "code": "retry", "data": retry.data}
    assert AttemptEntry.from_json(stored) == entry and AttemptEntry.from_json(stored).retry.retry
    given_up = AttemptEntry.from_json({**stored, "retry": {"delay_s": None, "code": "retries_spent", "data": {}}})
    assert given_up.retry == RetryDecision(None, RetryCode.RETRIES_SPENT) and not given_up.retry.retry


def test_an_entry_is_frozen_and_an_unknown_status_is_refused():
    entry = AttemptEntry(1, "proposal-7-attempt-1", AttemptOutcome.UNANSWERED, AT)
    with pytest.raises(FrozenInstanceError):
        entry.status = AttemptOutcome.SUCCEEDED  # type: ignore[misc]
    with pytest.raises(ValueError):
        AttemptEntry.from_json({**entry.to_json(), "status": "lost"})
