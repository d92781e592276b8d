"""Guardrails of auto-approval (policy mode ``auto``): pure checks on two configurations.

Each check returns None when it holds, or a :class:`~webapp.proposals.codes.Reason` whose code names
the guardrail (``GuardrailCode``: the field of ``JobPolicy``), which becomes the proposal's
``hold_reason`` when it waits for a person.
"""

from __future__ import annotations

from dataclasses import dataclass

from scaling.policy.options import default
from scaling.policy.periods import active_period
from webapp.proposals.codes import GuardrailCode, Reason


@dataclass(frozen=True)
class Guardrails:
    """The guardrail options of one job's policy (see ``JobPolicy.guard_*``), with the job's knobs:
    ``scaled_knobs`` are the names of its executors, parallelism and memory knobs (the pipeline
    contract's :class:`sparkclient.contract.spec.KnobTarget`), ``executors_knob`` the one that sets
    executors, ``memory_knob`` the one that sets the heap (MB)."""

    max_change_factor: float = default("guard_max_change_factor")
    max_executors: int = default("guard_max_executors")
    directions: str = default("guard_directions")
    excluded_periods: tuple[str, ...] = ()
    scaled_knobs: frozenset[str] = frozenset()
    executors_knob: str | None = None
    memory_knob: str | None = None


def _knobs(guardrails: Guardrails, current: dict, proposed: dict) -> list[tuple[str, int, int]]:
    out = []
    for key, new in proposed.items():
        old = current.get(key)
        if key not in guardrails.scaled_knobs or isinstance(new, bool) or not isinstance(new, int) \
                or not isinstance(old, int):
            continue
        out.append((key, old, new))
    return out


def direction(guardrails: Guardrails, current: dict, proposed: dict) -> str:
    """``up``, ``down`` or ``none``: by executors first, else by the total partitions, else by the heap
    (the memory knob: more memory is up, less is down)."""
    for key in (guardrails.executors_knob, None, guardrails.memory_knob):
        if key is None:  # the parallelism knobs, summed
            knobs = [k for k in _knobs(guardrails, current, proposed) if k[0] != guardrails.memory_knob]
            old, new = sum(k[1] for k in knobs), sum(k[2] for k in knobs)
        else:
            old, new = current.get(key, 0), proposed.get(key, 0)
        if new != old:
            return "up" if new > old else "down"
    return "none"


def violated_guardrail(guardrails: Guardrails, current: dict, proposed: dict, now_s: float) -> Reason | None:
    """The first guardrail the change ``current → proposed`` breaks at ``now_s``, or None."""
    way = direction(guardrails, current, proposed)
    if guardrails.directions != "both" and way not in (guardrails.directions, "none"):
        return Reason(GuardrailCode.DIRECTIONS, {"direction": way, "allowed": guardrails.directions})
    cores = proposed.get(guardrails.executors_knob) if guardrails.executors_knob else None
    if isinstance(cores, int) and cores > guardrails.max_executors:
        return Reason(GuardrailCode.MAX_EXECUTORS, {"executors": cores, "max": guardrails.max_executors})
    for key, old, new in _knobs(guardrails, current, proposed):
        if old > 0 and new > 0:
            factor = max(new / old, old / new)
            if factor > guardrails.max_change_factor + 1e-9:
                return Reason(GuardrailCode.MAX_CHANGE_FACTOR, {"knob": key, "old": old, "new": new, "factor": factor,
                                                                "max": guardrails.max_change_factor})
    period = active_period(guardrails.excluded_periods, now_s)
    if period is not None:
        return Reason(GuardrailCode.EXCLUDED_PERIODS, {"period": period})
    return None
