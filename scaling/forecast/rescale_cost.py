"""What a rescale cost the pipeline, from the source's backlog around it: the *added lag* (peak lag during the
rescale − steady lag before it, seconds of input, ``lag = backlog / arrival rate``) and the *catch-up time*
(seconds from its start until the backlog is back to its level before it, within ``tolerance_records``), over
the rescale's own window (:class:`WindowEnd`), and the expected time to effect of a rescale path. The web app
and ``sparkclient bench-rescale`` both call :func:`rescale_cost`; docs/ARCHITECTURE.md, "A rescale's cost".
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from scaling.values.load_change import change_point, departure

__all__ = ["BENCH_PAUSE_S", "BENCH_READY_HANDOVER_S", "BENCH_STANDBY_READY_S", "EffectSource", "LagSample",
           "RescaleCost", "StandbyReadiness", "TimeToEffect", "WindowEnd", "catch_up_after_first_batch_s", "lag_s",
           "measured_time_to_effect_s", "rescale_cost", "time_to_effect", "warm_up_left_s"]


class WindowEnd(StrEnum):
    """What ended a rescale's own window."""

    CAUGHT_UP = "caught-up"        # the backlog was back to its steady level
    LOAD_CHANGE = "load-change"    # the arrival rate left its level before the rescale
    NEXT_RESCALE = "next-rescale"  # another rescale started (``until_s``)
    OPEN = "open"                  # none of these yet: the window runs to the last sample


@dataclass(frozen=True)
class LagSample:
    """One reading of a source's backlog."""

    t_s: float  # when it was read, seconds on any clock shared with the rescale's start and finish
    backlog: float  # records available at the source and not yet processed (≥ 0)
    arrival_rate_per_s: float  # records/s arriving at the source then (≥ 0)


@dataclass(frozen=True)
class RescaleCost:
    """What a rescale cost (the module docstring)."""

    steady_backlog: float | None  # mean backlog before the rescale, records
    peak_backlog: float | None  # highest backlog from the rescale's start until caught up (or the last sample)
    added_lag_s: float | None  # peak lag − steady lag, seconds of input (≥ 0); None without a sample before and after
    #: seconds from the rescale's start until the backlog was back to its steady level; None while it has not
    #: been, when the window ended first, or without a sample before the rescale.
    catch_up_s: float | None
    #: when the rescale's own window ended (the clock of the samples), seconds; None while open or unknown.
    window_end_s: float | None = None
    ended_by: WindowEnd = WindowEnd.OPEN  # what ended it


def lag_s(sample: LagSample) -> float:
    """The lag a backlog stands for, seconds of input: ``backlog / arrival rate``; 0 with no backlog,
    and the backlog itself (as if 1 record/s) when nothing arrives, so that a stalled source still
    shows its lag growing."""
    if sample.backlog <= 0:
        return 0.0
    return sample.backlog / max(sample.arrival_rate_per_s, 1.0)


def rescale_cost(samples: Sequence[LagSample], *, started_at_s: float, finished_at_s: float,
                 steady_window_s: float, tolerance_records: float = 0.0, until_s: float = math.inf) -> RescaleCost:
    """The added lag and catch-up time of one rescale over its own window (docs/ARCHITECTURE.md, "A rescale's
    cost"), from the backlog readings ``samples`` around it (any order; seconds, as ``started_at_s``).

    ``started_at_s``: when the rescale began (the stop command, or the approval); ``finished_at_s``: when the
    runner reported it done (≥ ``started_at_s``); ``steady_window_s`` (> 0): the readings in ``[started −
    steady_window_s, started]`` give the steady backlog and lag, and the arrival rate's current level
    (``scaling.values.load_change.change_point``); ``tolerance_records`` (≥ 0): the backlog is back within this
    many records (use one trigger interval's arrivals); ``until_s``: the window's latest end (the next
    rescale's start). The :class:`RescaleCost` fields are None where the samples cannot tell (no reading before
    the rescale, none after it, not caught up yet, or not within its window). Raises ``ValueError`` when
    ``finished_at_s < started_at_s``, ``steady_window_s ≤ 0`` or the tolerance is negative.
    """
    if finished_at_s < started_at_s:
        raise ValueError(f"finished_at_s {finished_at_s} is before started_at_s {started_at_s}")
    if steady_window_s <= 0:
        raise ValueError(f"steady_window_s must be > 0, got {steady_window_s}")
    if tolerance_records < 0:
        raise ValueError(f"tolerance_records must be ≥ 0, got {tolerance_records}")
    ordered = sorted(samples, key=lambda s: s.t_s)
    before = [s for s in ordered if started_at_s - steady_window_s <= s.t_s <= started_at_s]
    if not before:
        return RescaleCost(None, None, None, None)
    steady_backlog = statistics.fmean(s.backlog for s in before)
    steady_lag = statistics.fmean(lag_s(s) for s in before)
    during, end_s, ended_by = _own_window(ordered, before, started_at_s=started_at_s, until_s=until_s)
    # The reading that opens a new load level still shows whether the backlog was back by then.
    opening = [s for s in ordered if s.t_s == end_s] if ended_by == WindowEnd.LOAD_CHANGE else []
    caught_up = next((s for s in [*during, *opening] if s.t_s >= finished_at_s
                      and s.backlog <= steady_backlog + tolerance_records), None)
    window = during
    if caught_up is not None:
        window = [s for s in [*during, *opening] if s.t_s <= caught_up.t_s]
        end_s, ended_by = caught_up.t_s, WindowEnd.CAUGHT_UP
    if not window:
        return RescaleCost(steady_backlog, None, None, None, end_s, ended_by)
    peak = max(window, key=lag_s)
    return RescaleCost(
        steady_backlog=steady_backlog,
        peak_backlog=max(s.backlog for s in window),
        added_lag_s=max(0.0, lag_s(peak) - steady_lag),
        catch_up_s=None if caught_up is None else caught_up.t_s - started_at_s,
        window_end_s=end_s,
        ended_by=ended_by,
    )


def _own_window(ordered: Sequence[LagSample], before: Sequence[LagSample], *, started_at_s: float,
                until_s: float) -> tuple[list[LagSample], float | None, WindowEnd]:
    """The readings after the rescale's start and before the next rescale or load change, with
    where and why the window ends (``OPEN`` when neither happened)."""
    during = [s for s in ordered if s.t_s > started_at_s]
    end_s, ended_by = None, WindowEnd.OPEN
    if math.isfinite(until_s):
        end_s, ended_by = until_s, WindowEnd.NEXT_RESCALE
        during = [s for s in during if s.t_s < until_s]
    rates = [s.arrival_rate_per_s for s in before]
    level = statistics.fmean(rates[change_point(rates) or 0:])
    change = departure([s.arrival_rate_per_s for s in during], level)
    if change is not None:
        end_s, ended_by = during[change].t_s, WindowEnd.LOAD_CHANGE
        during = during[:change]
    return during, end_s, ended_by


def catch_up_after_first_batch_s(catch_up_s: float | None, *, execution_s: float) -> float | None:
    """A catch-up measured from the rescale's start (:func:`rescale_cost`) counted from its first batch instead, as
    a predicted catch-up (the restart backlog's drain) is: ``catch_up_s − execution_s`` (seconds from the start
    to that batch), never below 0; None when ``catch_up_s`` is."""
    return None if catch_up_s is None else max(0.0, catch_up_s - max(0.0, execution_s))


#: The pause of each rescale path measured by ``python -m sparkclient bench-rescale`` (README, median
#: of 5 runs on a quiet 2-core machine, seconds): the documented default before a job has executed a
#: path. It leaves out what precedes the stop (a standby driver's start, an executor request).
BENCH_PAUSE_S = {"in-process": 1.17, "driver-handover": 1.48, "in-place": 0.0, "state-repartition": 1.74}
#: The time to effect of a warm handover onto a standby driver prepared while the proposal was
#: pending and ready at the command, measured by ``bench-rescale`` (README's quiet-machine table,
#: median of 5 runs, seconds): the documented default before a job has handed over onto a ready one.
BENCH_READY_HANDOVER_S = 3.68
#: A standby driver's start, from its process's start to ready, measured by ``bench-rescale`` (README's
#: quiet-machine table, median of 5 runs, seconds): named beside an expectation whose standby's start was
#: never measured on the job's host, never taken as that host's figure (a loaded host takes 3x longer).
BENCH_STANDBY_READY_S = 38.0


class EffectSource(StrEnum):
    """Where an expected time to effect comes from."""

    MEASURED = "measured"  # the median of this job's executions of the path (onto a standby as ready as this one)
    BENCH = "bench"        # the README's bench-rescale pause for the path (no execution measured)
    BENCH_READY = "bench-ready"  # the README's bench-rescale time to effect of a handover onto a ready standby
    UNKNOWN = "unknown"    # neither
    NOT_MEASURED = "not-measured"  # a standby not ready whose start was never measured on the job's host


class StandbyReadiness(StrEnum):
    """The standby driver a warm handover would run on, as an expected time to effect takes it: ready
    takes over at once (seconds), any other waits for a driver's start (40-60 s under load)."""

    READY = "ready"        # prepared for the proposal and ready
    STARTING = "starting"  # prepared for the proposal, still starting
    FAILED = "failed"      # prepared, failed to start: the approval starts a new one
    ABSENT = "absent"      # none prepared with the proposal's knobs: the approval starts one
    UNKNOWN = "unknown"    # its state could not be read: taken to start at the approval


@dataclass(frozen=True)
class TimeToEffect:
    """The expected seconds from the approval to the first batch on the new configuration along
    ``path``, from ``source`` (``samples`` measured executions); ``seconds`` None when unknown;
    ``standby`` the standby driver it assumes (None: the path starts no new driver); ``warm_up_s`` the
    seconds left of that standby's start included in ``seconds`` (None: none added), and
    ``ready_s`` its measured start (seconds from its process's start to ready) it was counted from."""

    path: str
    seconds: float | None
    source: EffectSource
    samples: int = 0
    standby: StandbyReadiness | None = None
    warm_up_s: float | None = None
    ready_s: float | None = None


def measured_time_to_effect_s(*, approved_at_s: float, first_batch_at_s: float | None,
                              answered_at_s: float | None = None) -> float | None:
    """A rescale's time to effect, ``first_batch_at_s − approved_at_s`` seconds (any shared clock, epoch s in
    practice) from its approval (the bench: the command sent) to the end of the first batch on the new
    configuration, never below 0; that batch's time, on the runner's clock, is capped at ``answered_at_s`` (its
    answer read, on the approval's clock). None when ``first_batch_at_s`` is (nothing restarted, or not said)."""
    if first_batch_at_s is None:
        return None
    end = first_batch_at_s if answered_at_s is None else min(first_batch_at_s, answered_at_s)
    return max(0.0, end - approved_at_s)


def warm_up_left_s(ready_s: Sequence[float], *, running_s: float | None) -> tuple[float | None, float | None]:
    """What is left of a standby driver's start: ``(left, expected)`` seconds, where ``expected`` is the
    median of ``ready_s`` (the starts measured on the job's host, process start to ready, seconds) and
    ``left = expected − running_s`` (``running_s``: seconds since this standby's process started; None:
    not started yet, the whole start is left), never below 0. ``(None, None)`` when no start was measured."""
    values = [float(v) for v in ready_s if v is not None and v >= 0]
    if not values:
        return None, None
    expected = statistics.median(values)
    return max(0.0, expected - max(0.0, running_s or 0.0)), expected


def time_to_effect(path: str, measured_s: Sequence[float], *, standby: StandbyReadiness | None = None,
                   warm_up_s: float | None = None, ready_s: float | None = None) -> TimeToEffect:
    """The expected time to effect of a rescale along ``path`` (a ``RescalePath`` value): the median of
    ``measured_s`` (this job's executions of that path, :func:`measured_time_to_effect_s`, seconds; for a warm
    handover, those onto a standby like ``standby``), as FLIP-271's restart-time tracking (``ScalingTracking``)
    learns the restart time; without one, :data:`BENCH_READY_HANDOVER_S` for a ``READY`` standby, else the
    path's :data:`BENCH_PAUSE_S` (a lower bound), stated as the bench's.

    With ``warm_up_s`` (seconds left of the start of a standby not ready, :func:`warm_up_left_s`, counted
    from its measured start ``ready_s``), ``measured_s`` are the handovers onto a ready standby and the
    expectation is the handover onto a ready one plus ``warm_up_s``: never less than what is left of its
    start. docs/ARCHITECTURE.md, "A rescale's cost"."""
    if warm_up_s is not None and standby is not StandbyReadiness.READY:
        ready = time_to_effect(path, measured_s, standby=StandbyReadiness.READY)
        seconds = None if ready.seconds is None else ready.seconds + max(0.0, warm_up_s)
        return TimeToEffect(path, seconds, ready.source, ready.samples, standby, max(0.0, warm_up_s), ready_s)
    values = [float(v) for v in measured_s if v is not None and v >= 0]
    if values:
        return TimeToEffect(path, statistics.median(values), EffectSource.MEASURED, len(values), standby)
    if standby is StandbyReadiness.READY:
        return TimeToEffect(path, BENCH_READY_HANDOVER_S, EffectSource.BENCH_READY, standby=standby)
    if standby is not None:
        return TimeToEffect(path, None, EffectSource.NOT_MEASURED, standby=standby)
    if path in BENCH_PAUSE_S:
        return TimeToEffect(path, BENCH_PAUSE_S[path], EffectSource.BENCH, standby=standby)
    return TimeToEffect(path, None, EffectSource.UNKNOWN, standby=standby)
