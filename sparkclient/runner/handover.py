"""The warm driver handover's protocol over Redis (:mod:`sparkclient.runner.driver`'s module docstring).

The running driver, the supervisor and the standby driver move one hash, ``ss:runner:{job}:handover``
(:func:`sparkclient.contract.keys.handover`: ``id``, ``knobs``, ``state``, ``error``, ``requested_at``),
through the states of :class:`HandoverState`:

- the running driver **requests** a standby (``requested``) and waits until it is ``ready``;
- the supervisor sees the request, starts the standby (``starting``), and marks it ``failed`` (with
  ``error``) when it exits before it took over;
- the standby builds its SparkSession, warms its JVM up and says ``ready``;
- the running driver stops its query, records the command as pending (:func:`record_pending`),
  releases the checkpoint lease and marks the hash ``released``; the standby takes the lease;
- a running driver that stops waiting marks it ``cancelled``; the standby then exits.

The command's completion (the first batch of the standby) is recorded in ``ss:runner:{job}:pending``
(:func:`record_pending`, :func:`read_pending`), so a driver that starts finishes it.

Each step also stamps the hash with when it happened (``{step}_at``, epoch s, the steps of
:class:`HandoverStep`); the standby keeps them, with when it took the checkpoint, in
``ss:runner:{job}:handover:timings`` (:func:`keep_timings`, :func:`read_timings`): where a
handover's time goes.
"""

from __future__ import annotations

import json
import threading
import time
from enum import StrEnum
from typing import Any

import redis

from sparkclient.contract import keys

__all__ = ["HANDOVER_READY_TIMEOUT_S", "TIMINGS_TTL_S", "HandoverState", "HandoverStep", "Pending", "keep_timings",
           "mark", "read_pending", "read_timings", "record_pending", "request_standby", "wait_for_release"]

#: How long the running driver waits for its standby to be ready before failing the rescale, seconds.
HANDOVER_READY_TIMEOUT_S = 240.0
#: How long the last handover's timings are kept, seconds.
TIMINGS_TTL_S = 86400


class HandoverState(StrEnum):
    """The ``state`` field of the handover hash."""

    REQUESTED = "requested"  # the running driver asked the supervisor for a standby
    STARTING = "starting"  # the supervisor started it
    READY = "ready"  # the standby has its SparkSession and a warm JVM
    RELEASED = "released"  # the running driver stopped its query and released the lease
    CANCELLED = "cancelled"  # the running driver (or the supervisor) called the handover off
    FAILED = "failed"  # the standby could not start; ``error`` says why


class HandoverStep(StrEnum):
    """The steps of a handover, in order; each is stamped ``{step}_at`` (epoch s) on the hash."""

    REQUESTED = "requested"  # the running driver took the command and asked for a standby
    SPAWNED = "spawned"  # the supervisor started the standby's process
    SESSION = "session"  # the standby's SparkSession is built
    WARM = "warm"  # its JVM is warmed up
    PREPARED = "prepared"  # the query is analysed and the progress listener registered
    READY = "ready"  # the standby said ready
    RELEASED = "released"  # the running driver stopped its query and released the checkpoint
    TAKEN = "taken"  # the standby holds the checkpoint lease (its query starts next)


def mark(client: redis.Redis, job: str, step: HandoverStep, **fields: str) -> None:
    """Stamp ``step`` with the time now on the handover hash, with any other ``fields``."""
    client.hset(keys.handover(job), mapping={f"{step.value}_at": repr(time.time()), **fields})


def keep_timings(client: redis.Redis, job: str) -> dict[str, float]:
    """The standby's side, once it holds the checkpoint: stamp ``taken`` and keep the handover's
    stamps (step -> epoch s) for :data:`TIMINGS_TTL_S`. Returns them."""
    mark(client, job, HandoverStep.TAKEN)
    timings = _stamps(client.hgetall(keys.handover(job)))
    client.set(keys.handover_timings(job), json.dumps(timings), ex=TIMINGS_TTL_S)
    return timings


def read_timings(client: redis.Redis, job: str) -> dict[str, float]:
    """The last handover's stamps (step value -> epoch s); empty when none is kept or it does not parse."""
    try:
        return _stamps(json.loads(client.get(keys.handover_timings(job)) or "{}"))
    except (ValueError, TypeError, AttributeError):
        return {}


def _stamps(raw: dict[str, Any]) -> dict[str, float]:
    out = {}
    for step in HandoverStep:
        try:
            out[step.value] = float(raw[f"{step.value}_at"] if f"{step.value}_at" in raw else raw[step.value])
        except (KeyError, ValueError, TypeError):
            continue
    return out


def request_standby(client: redis.Redis, job: str, command_id: str, knobs: dict[str, int],
                    stop_event: threading.Event, timeout_s: float = HANDOVER_READY_TIMEOUT_S) -> str | None:
    """Ask the supervisor for a standby driver with ``knobs`` and wait until it is ready.

    Returns None when it is ready; otherwise the reason it is not (the standby's ``error``, or
    "not ready within ``timeout_s`` s"), with the handover marked ``cancelled``. Returns at once
    (not ready) when ``stop_event`` is set.
    """
    key = keys.handover(job)
    client.delete(key)
    mark(client, job, HandoverStep.REQUESTED, id=command_id, knobs=json.dumps(knobs), state=HandoverState.REQUESTED)
    deadline = time.monotonic() + timeout_s
    state, error = "", ""
    while time.monotonic() < deadline and not stop_event.is_set():
        state, error = client.hget(key, "state") or "", client.hget(key, "error") or ""
        if state in (HandoverState.READY, HandoverState.FAILED):
            break
        time.sleep(0.05)
    if state == HandoverState.READY:
        return None
    client.hset(key, "state", HandoverState.CANCELLED)
    return error or f"not ready within {timeout_s:.0f} s"


def wait_for_release(client: redis.Redis, job: str, handover_id: str, stop_event: threading.Event) -> bool:
    """The standby's side: say it is ready, then wait until the running driver released the
    checkpoint. Returns False when the handover was called off (or ``stop_event`` is set)."""
    key = keys.handover(job)
    mark(client, job, HandoverStep.READY, state=HandoverState.READY)
    while not stop_event.is_set():
        if client.hget(key, "id") != handover_id:
            return False
        state = client.hget(key, "state")
        if state == HandoverState.RELEASED:
            return True
        if state in (HandoverState.CANCELLED, HandoverState.FAILED):
            return False
        if state in (HandoverState.REQUESTED, HandoverState.STARTING):  # a restarted driver asked again
            client.hset(key, "state", HandoverState.READY)
        time.sleep(0.02)
    return False


Pending = dict[str, Any]
"""A rescale waiting for the first batch of a new driver: ``id``, ``path``, ``knobs``,
``requested_at`` (epoch s), ``last_batch_end_epoch_s`` (epoch s or None), and the command's
``idempotency_key`` and ``command_knobs`` (kept with its result, :mod:`sparkclient.runner.applied`)."""


def record_pending(client: redis.Redis, job: str, pending: Pending, knobs: dict[str, int]) -> None:
    """In one transaction: record ``pending`` and make ``knobs`` the job's stored knob values."""
    text = json.dumps(knobs, sort_keys=True)
    with client.pipeline(transaction=True) as pipe:
        pipe.set(keys.runner_pending(job), json.dumps(pending))
        pipe.set(keys.config(job), text)
        pipe.hset(keys.runner(job), "knobs", text)
        pipe.execute()


def read_pending(client: redis.Redis, job: str) -> Pending | None:
    """The pending rescale, or None; a record that does not parse is deleted (None)."""
    raw = client.get(keys.runner_pending(job))
    if not raw:
        return None
    try:
        pending = json.loads(raw)
        pending["id"] = str(pending["id"])
    except (ValueError, KeyError, TypeError):
        client.delete(keys.runner_pending(job))
        return None
    return pending
