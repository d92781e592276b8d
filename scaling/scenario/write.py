"""A request as a one-step scenario document (docs/SCENARIO.md): what ``python -m scaling evaluate``
reads back into the same request, so that a recorded window can be replayed through the one door
outside the host that recorded it."""

from __future__ import annotations

import math
from dataclasses import fields, replace
from enum import StrEnum
from typing import Any

from scaling.policy.memory import MEMORY_OPTIONS
from scaling.scenario.memory import reading_json
from scaling.values.request import PlanRequest
from scaling.values.state import ScalerState

__all__ = ["scenario_of"]


def _value(value: Any) -> Any:
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, StrEnum):
        return str(value)
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    return value


def _fields(value: Any) -> dict:
    """A frozen value's fields, each but the None ones, in the document's form."""
    return {f.name: _value(getattr(value, f.name)) for f in fields(value) if getattr(value, f.name) is not None}


def scenario_of(request: PlanRequest) -> dict:
    """The scenario document of ``request``, one step at ``request.now_s``: every policy option, vertex,
    edge, metric, cluster field, batch duration, not-ready issue and memory reading, knob and option.
    Raises ``ValueError`` when the autoscaler's state holds more than the format carries (a history,
    pending scale-downs, an activation streak, or more than one measured restart time)."""
    state = request.state
    if len(state.restart_times_s) > 1 or replace(state, restart_times_s=()) != ScalerState():
        raise ValueError("scenario_of: the format carries no scaling history, pending scale-downs or activation "
                         "streak, and one measured restart time at most")
    step: dict[str, Any] = {"at_s": request.now_s,
                            "metrics": {vid: _fields(m) for vid, m in request.metrics.items()}}
    if request.batch_durations_s:
        step["batch_durations_s"] = list(request.batch_durations_s)
    if state.restart_times_s:
        step["measured_restart_time_s"] = state.restart_times_s[0]
    if request.not_ready:
        step["not_ready"] = [issue.to_json() for issue in request.not_ready]
    doc: dict[str, Any] = {
        "format": 1, "mode": request.mode, "policy": _fields(request.policy),
        "vertices": [_fields(v) for v in request.topology.vertices],
        "edges": [{"from": e.source, "to": e.target, "ship": e.ship} for e in request.topology.edges],
        "steps": [step]}
    if request.cluster is not None:
        doc["cluster"] = _fields(request.cluster)
    if request.memory is not None:
        memory = request.memory
        step["memory"] = [reading_json(r) for r in memory.readings]
        doc["memory"] = {**{name: getattr(memory.policy, name) for name in MEMORY_OPTIONS},
                         "knobs": [_fields(k) for k in memory.knobs], "local_mode": memory.local_mode,
                         "state_in_rocksdb": memory.state_in_rocksdb}
    return doc
