"""The figures of an execution as the job, proposal and rescales pages state them: each defined once
(``scaling.forecast.rescale_cost``) and worded here once, with its origin where it matters.

- **catch-up**: seconds from the start of the rescale until the backlog is back to its level before
  it (``Execution.catch_up_s``, :func:`scaling.forecast.rescale_cost.rescale_cost`, followed for
  ``webapp.loop.rescale_cost.FOLLOW_S`` after the execution); the same figure counted from the first
  batch on the new configuration is what a prediction's catch-up compares with.
- **added lag**: peak lag during the rescale minus the steady lag before it, seconds of input.
- **path**: how the runner applied it (``sparkclient.contract.messages.RescalePath``), in words.
- **time to effect**: seconds from the approval to the first batch on the new configuration
  (``Execution.time_to_effect_s``, measured); expected, along the path a proposal will take, as the
  median of this job's measured ones of that path (:func:`scaling.forecast.rescale_cost.time_to_effect`). For
  a warm handover, of those onto a standby driver like the proposal's as the runner reports it now
  (``webapp.loop.standby.standby_read``): onto a ready one when it is ready, else of those that
  started their standby at the approval (``Execution.result``'s ``standby``,
  ``sparkclient.contract.messages.StandbyUse``). A standby not ready adds what is left of its start
  (:func:`scaling.forecast.rescale_cost.warm_up_left_s`), from the starts of this job's standbys measured on
  its runner's host (``sparkclient.contract.standby.read_ready_times_s``), to the handover onto a ready one;
  a standby whose start was never measured there is "not measured".
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from django.utils import timezone

from scaling.forecast.rescale_cost import (
    BENCH_STANDBY_READY_S,
    EffectSource,
    StandbyReadiness,
    TimeToEffect,
    catch_up_after_first_batch_s,
    time_to_effect,
    warm_up_left_s,
)
from sparkclient.contract.messages import RescalePath, StandbyUse
from sparkclient.contract.spec import KnobTarget
from sparkclient.contract.standby import StandbyStatus, read_ready_times_s
from webapp.jobs.bindings import plan_bindings
from webapp.jobs.redis import get_redis
from webapp.loop.rescale_cost import FOLLOW_S
from webapp.loop.standby import standby_read
from webapp.outage import REDIS_ERRORS
from webapp.proposals.codes import StandbySeen
from webapp.proposals.models import Execution, Proposal
from webapp.proposals.reason_text import path_text

__all__ = ["CatchUp", "CatchUpState", "added_lag", "catch_up", "duration", "expected_path", "expected_time_to_effect",
           "measured_time_to_effect", "time_to_effect_text"]

#: Paths that change the cores (a runner takes one of them for an executors knob change).
CORES_PATHS = (RescalePath.IN_PLACE, RescalePath.DRIVER_HANDOVER, RescalePath.DRIVER_RESTART)


def duration(seconds: float | None) -> str:
    """Seconds for people: ``"14 s"``, ``"12 min 1 s"``, ``"2 h 5 min"``; ``"–"`` for None."""
    if seconds is None:
        return "–"
    whole = max(0, round(seconds))
    if whole < 120:
        return f"{seconds:.1f} s" if 0 < seconds < 10 and round(seconds, 1) != whole else f"{whole} s"
    if whole < 7200:
        return f"{whole // 60} min {whole % 60} s" if whole % 60 else f"{whole // 60} min"
    return f"{whole // 3600} h {whole % 3600 // 60} min"


class CatchUpState(StrEnum):
    MEASURED = "measured"      # back to the level before the rescale
    FOLLOWING = "following"    # not yet, still followed
    NOT_WITHIN = "not-within"  # not within the follow-up time
    NONE = "none"              # no succeeded execution: nothing to catch up


@dataclass(frozen=True)
class CatchUp:
    """One execution's catch-up: ``from_start_s`` from the start of the rescale, ``after_first_batch_s``
    from its first batch on the new configuration (both None until measured)."""

    state: CatchUpState
    from_start_s: float | None = None
    after_first_batch_s: float | None = None

    @property
    def text(self) -> str:
        if self.state == CatchUpState.MEASURED:
            return (f"{duration(self.from_start_s)} from the start of the rescale "
                    f"({duration(self.after_first_batch_s)} after the first batch on the new configuration)")
        if self.state == CatchUpState.FOLLOWING:
            return "not yet: the backlog is still above its level before the rescale"
        if self.state == CatchUpState.NOT_WITHIN:
            return f"not caught up within {duration(FOLLOW_S)} of the rescale"
        return "–"

    @property
    def short(self) -> str:
        """For a table cell: ``"2 min 51 s from the start of the rescale"``, ``"not yet"``, ``"not within 1 h"``."""
        if self.state == CatchUpState.MEASURED:
            return f"{duration(self.from_start_s)} from the start of the rescale"
        if self.state == CatchUpState.FOLLOWING:
            return "not yet"
        if self.state == CatchUpState.NOT_WITHIN:
            return f"not within {duration(FOLLOW_S)}"
        return "–"


def catch_up(execution: Execution | None, *, now: datetime | None = None) -> CatchUp:
    """The catch-up of ``execution`` (None: no execution) as every page states it."""
    if execution is None or execution.status != Execution.Status.SUCCEEDED or execution.finished_at is None:
        return CatchUp(CatchUpState.NONE)
    started = min(execution.started_at, execution.finished_at)
    if execution.catch_up_s is not None:
        return CatchUp(CatchUpState.MEASURED, execution.catch_up_s, catch_up_after_first_batch_s(
            execution.catch_up_s, execution_s=(execution.finished_at - started).total_seconds()))
    elapsed = ((now or timezone.now()) - execution.finished_at).total_seconds()
    return CatchUp(CatchUpState.FOLLOWING if elapsed < FOLLOW_S else CatchUpState.NOT_WITHIN)


def added_lag(execution: Execution | None) -> str:
    """``"4.8 s"`` (peak lag during the rescale above the steady lag before it), ``"–"`` until measured."""
    return duration(execution.added_lag_s) if execution is not None and execution.added_lag_s is not None else "–"


def expected_path(proposal: Proposal) -> RescalePath:
    """The path the runner will take for ``proposal``: for a change of a memory knob (fixed at a JVM's
    start, ``KnobTarget.needs_new_jvm``), the warm handover to a new driver; for a change of the executors knob, the
    path of this job's newest succeeded cores change (a warm handover before there is one); for a
    changed knob that sets a stage whose checkpoint holds state, the offline state repartition; else a
    restart in the same driver."""
    job = proposal.job
    changed = {k for k, v in (proposal.proposed_config or {}).items() if (proposal.current_config or {}).get(k) != v}
    if any(k.sets.needs_new_jvm(local=job.local_mode) and k.name in changed for k in job.knob_specs()):
        return RescalePath.DRIVER_HANDOVER
    executors = {k.name for k in job.knob_specs() if k.sets == KnobTarget.EXECUTORS}
    if changed & executors:
        last = (Execution.objects.filter(proposal__job=job, status=Execution.Status.SUCCEEDED,
                                         path__in=[str(p) for p in CORES_PATHS])
                .order_by("-finished_at").values_list("path", flat=True).first())
        return RescalePath(last) if last else RescalePath.DRIVER_HANDOVER
    if any(b.knob in changed and b.state_store for b in plan_bindings(job=job)):
        return RescalePath.STATE_REPARTITION
    return RescalePath.IN_PROCESS


def measured_times_to_effect_s(*, job, path: RescalePath, standby: StandbyUse | None = None,
                               limit: int = 20) -> list[float]:
    """The measured times to effect (``Execution.time_to_effect_s``: seconds from the approval to the
    first batch on the new configuration) of this job's newest succeeded executions of ``path``; with
    ``standby``, only those whose runner reported that standby driver (``Execution.result``'s ``standby``)."""
    executions = Execution.objects.filter(proposal__job=job, status=Execution.Status.SUCCEEDED, path=str(path),
                                          time_to_effect_s__isnull=False)
    if standby is not None:
        executions = executions.filter(result__standby=standby.value)
    return list(executions.order_by("-finished_at").values_list("time_to_effect_s", flat=True)[:limit])


def measured_time_to_effect(execution: Execution | None) -> str:
    """``"82 s"`` (the execution's measured time to effect), ``"–"`` when not measured."""
    return duration(execution.time_to_effect_s) if execution is not None and execution.time_to_effect_s is not None \
        else "–"


#: The standby as the web app sees it, as the expectation takes it.
READINESS = {StandbySeen.READY: StandbyReadiness.READY, StandbySeen.STARTING: StandbyReadiness.STARTING,
             StandbySeen.FAILED: StandbyReadiness.FAILED, StandbySeen.ABSENT: StandbyReadiness.ABSENT,
             StandbySeen.UNREACHABLE: StandbyReadiness.UNKNOWN}


def ready_times_s(job) -> list[float]:
    """The starts of ``job``'s standby drivers measured on its runner's host (seconds, newest first);
    empty when none was, or Redis does not answer."""
    try:
        return read_ready_times_s(get_redis(), job.name)
    except REDIS_ERRORS:
        return []


def expected_time_to_effect(proposal: Proposal, *, seen: StandbySeen | None = None,
                            status: StandbyStatus | None = None, ready_s: Sequence[float] | None = None,
                            now: float | None = None) -> TimeToEffect:
    """What an approval of ``proposal`` at ``now`` (epoch s; None: now) is expected to take until its first
    batch (see the module docstring). ``seen`` and ``status``: its standby driver as already read
    (``webapp.loop.standby.standby_read``; None reads it when the path is a warm handover); ``ready_s``:
    the measured starts on the job's host (None: :func:`ready_times_s`)."""
    path = expected_path(proposal)
    if path != RescalePath.DRIVER_HANDOVER:
        return time_to_effect(str(path), measured_times_to_effect_s(job=proposal.job, path=path))
    if seen is None:
        status, seen = standby_read(proposal)
    readiness = READINESS[seen]

    def measured(like: StandbyUse) -> list[float]:
        return measured_times_to_effect_s(job=proposal.job, path=path, standby=like)

    if readiness is StandbyReadiness.READY:
        return time_to_effect(str(path), measured(StandbyUse.READY), standby=readiness)
    started = measured(StandbyUse.STARTED)
    running_s = None  # the approval starts a standby: its whole start is left
    if readiness is StandbyReadiness.STARTING:
        spawned = status.spawned_at if status is not None else None
        running_s = (time.time() if now is None else now) - spawned if spawned is not None else 0.0
    elif started:  # the approval starts one: this job's handovers that did so measured it all
        return time_to_effect(str(path), started, standby=readiness)
    left, expected = warm_up_left_s(ready_s if ready_s is not None else ready_times_s(proposal.job),
                                    running_s=running_s)
    if left is None:
        return time_to_effect(str(path), started, standby=readiness)
    return time_to_effect(str(path), measured(StandbyUse.READY), standby=readiness, warm_up_s=left, ready_s=expected)


#: What the expectation takes of the standby driver, in words.
STANDBY_TAKEN = {
    StandbyReadiness.READY: "the standby driver prepared for this proposal is ready, so the approval hands over "
                            "at once",
    StandbyReadiness.STARTING: "the standby driver prepared for this proposal is still starting, so the approval "
                               "waits for the rest of its start",
    StandbyReadiness.FAILED: "the standby driver prepared for this proposal failed to start, so the approval "
                             "starts a new one",
    StandbyReadiness.ABSENT: "no standby driver is prepared for this proposal, so the approval starts one",
    StandbyReadiness.UNKNOWN: "the standby driver's state could not be read, so it is taken to start at the approval",
}


def _measured_of(effect: TimeToEffect, count: int) -> str:
    """``"3 executions of this path"``, or the handovers of the standby kind ``effect`` counts."""
    plural = "s" if count != 1 else ""
    if effect.standby is None:
        return f"{count} execution{plural} of this path"
    if effect.standby is StandbyReadiness.READY:
        return f"{count} handover{plural} onto a ready standby driver"
    return f"{count} handover{plural} that started {'their' if plural else 'its'} standby driver at the approval"


def _warm_up_text(effect: TimeToEffect) -> str:
    """What a standby not ready adds: what is left of its start, counted from its measured one, and the
    handover onto it once ready, each with its source."""
    onto_ready_s = (effect.seconds or 0.0) - (effect.warm_up_s or 0.0)
    if effect.source == EffectSource.MEASURED:
        plural = "s" if effect.samples != 1 else ""
        ready = f"median of this job's {effect.samples} handover{plural} onto a ready standby driver"
    else:
        ready = "the README's bench-rescale on a quiet 2-core machine; none measured for this job yet"
    start = (f"its start, measured at {duration(effect.ready_s)} on this job's host (median of its standbys' "
             f"newest starts)")
    if effect.standby is StandbyReadiness.STARTING and not effect.warm_up_s:
        left = f"it has already run longer than {start}, so it is taken to be ready any moment"
    elif effect.standby is StandbyReadiness.STARTING:
        left = f"{duration(effect.warm_up_s)} left of {start}"
    else:
        left = f"{duration(effect.warm_up_s)} for {start}"
    return f"{left}, then {duration(onto_ready_s)} for the handover onto a ready standby ({ready})"


def time_to_effect_text(effect: TimeToEffect) -> str:
    """The expected time to effect in words, with its source (and, for a warm handover, what it takes
    of the standby driver, with what is left of its start when it is not ready)."""
    path = path_text(effect.path) + (f"; {STANDBY_TAKEN[effect.standby]}" if effect.standby else "")
    span = "from the approval to the first batch on the new configuration"
    if effect.warm_up_s is not None and effect.seconds is not None:
        return f"about {duration(effect.seconds)} {span} ({path}: {_warm_up_text(effect)})"
    if effect.source == EffectSource.MEASURED:
        about = "up to about" if effect.standby is StandbyReadiness.STARTING else "about"
        return (f"{about} {duration(effect.seconds)} {span} "
                f"({path}; median of this job's {_measured_of(effect, effect.samples)})")
    none_yet = ("no execution of this path measured for this job yet" if effect.standby is None
                else f"no {_measured_of(effect, 1).removeprefix('1 ')} measured for this job yet")
    if effect.source == EffectSource.BENCH_READY:
        return (f"about {duration(effect.seconds)} {span} ({path}; {none_yet}: the time to effect the README's "
                f"bench-rescale measured for a handover onto a prepared standby driver on a quiet 2-core machine)")
    if effect.source == EffectSource.NOT_MEASURED:
        return (f"not measured ({path}; no standby driver's start has been measured on this job's host yet, and "
                f"{none_yet}; the README's bench-rescale measured a start of {duration(BENCH_STANDBY_READY_S)} on a "
                f"quiet 2-core machine, and a loaded host takes longer)")
    if effect.source == EffectSource.BENCH:
        return (f"at least {duration(effect.seconds)} {span} ({path}; {none_yet}: the pause the README's "
                f"bench-rescale measured on a quiet 2-core machine, not counting a new driver's or executor's start)")
    return f"unknown ({path}; no execution of this path measured yet)"
