"""Which attempt of an execution the runner applied, and the attempt log that says so.

Every attempt of an execution carries its idempotency key (``Execution.idempotency_key``). A runner
that applied the key answers a later attempt with that first result, marked ``replay_of`` (the
applied command's id; :mod:`sparkclient.runner.applied`), and applies nothing again. A late answer
of the previous attempt, read before the next one is sent, is the same case without a replay. Either
way the earlier attempt is the applied one: the execution records it with its path, pause and
downtime and the time its restart finished on the runner (the rescale's cost is measured around it),
and the later attempt as answered by it, not as a second apply.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from datetime import timezone as dt_timezone

from sparkclient.contract.messages import RescalePath
from webapp.proposals.attempts import AttemptEntry
from webapp.proposals.lifecycle import AttemptOutcome
from webapp.proposals.models import Execution


def applied_attempt(execution: Execution, attempt: int, answered_id: str | None) -> int:
    """The attempt whose command the runner applied, answering attempt ``attempt``: the one whose
    command id is ``answered_id`` (the result's ``replay_of``, or its ``id``), when it is this
    execution's and not later than ``attempt``; else ``attempt``."""
    found = execution.attempt_of(answered_id) if answered_id else None
    return found if found is not None and found <= attempt else attempt


def applied_at(execution: Execution, completed_at: float | None, now: datetime) -> datetime:
    """When the applied restart finished: the runner's ``completed_at`` (epoch s) of its result, kept
    within [the execution's start, ``now``] (the runner's clock is not the web app's); ``now`` without one."""
    if not completed_at:
        return now
    at = datetime.fromtimestamp(completed_at, tz=dt_timezone.utc)
    return max(min(at, now), min(execution.started_at, now))


def success_log(execution: Execution, entry: AttemptEntry, *, applied: int, replayed: bool, finished_at: datetime,
                path: RescalePath, downtime_s: float | None, pause_s: float | None) -> list[AttemptEntry]:
    """The attempt log with ``entry`` (the answered attempt's) added, once the answer says attempt
    ``applied`` applied the rescale: when that is an earlier attempt, its entry becomes
    ``succeeded`` with the restart's ``path``, ``downtime_s``, ``pause_s`` (seconds) and
    ``finished_at`` (``answered_by`` = the answered attempt, no retry), and ``entry`` ``replayed``
    (the runner answered it with the earlier apply) or ``not_sent`` (a late answer came first), with
    ``applied_by``."""
    log = list(execution.attempt_entries)
    if applied == entry.attempt:
        return [*log, entry]
    at = next((i for i, e in enumerate(log) if e.attempt == applied), None)
    earlier = replace(log[at] if at is not None else AttemptEntry(applied, execution.exec_id(applied),
                                                                   AttemptOutcome.SUCCEEDED, finished_at),
                      status=AttemptOutcome.SUCCEEDED, finished_at=finished_at, error="", path=path, retry=None,
                      downtime_s=downtime_s, pause_s=pause_s, answered_by=entry.attempt)
    if at is None:
        log.append(earlier)
    else:
        log[at] = earlier
    outcome = AttemptOutcome.REPLAYED if replayed else AttemptOutcome.NOT_SENT
    return [*log, replace(entry, status=outcome, path=path, applied_by=applied)]
