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

A standby may also be **prepared** before any command (:mod:`sparkclient.contract.standby`: the web app
asks for one while a proposal is pending): the supervisor writes the hash itself (``prepared`` = 1,
``proposal``, ``knobs``, state ``starting``, :func:`open_prepared`) and starts the standby. A command
with the same knob values **claims** it (:func:`claim_prepared` sets ``command``; the hash keeps its
id), so the running driver waits only for what is left of its start, usually nothing. A prepared
standby nobody claimed is called off by :func:`cancel_prepared`. Every write a standby (or the
supervisor, on its behalf) makes is conditional on the hash still naming its id
(:func:`mark_as`), so a standby being replaced never writes into its successor's handover.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from enum import StrEnum
from typing import Any

import redis

from sparkclient.contract import keys
from sparkclient.contract.control import write_status
from sparkclient.contract.messages import RescaleCommand, RescalePath, StandbyUse, StatusUpdate
from sparkclient.contract.standby import HandoverState, record_ready_s

__all__ = ["HANDOVER_READY_TIMEOUT_S", "TIMINGS_TTL_S", "HandoverStep", "Pending", "cancel_prepared", "claim_prepared",
           "keep_ready_s", "keep_timings", "knobs_text", "mark", "mark_as", "open_prepared", "pending_of",
           "pending_standby", "read_pending", "read_timings", "record_pending", "request_standby", "wait_for_release"]

#: How long the running driver waits for its standby to be ready before failing the rescale, seconds.
HANDOVER_READY_TIMEOUT_S = 240.0
#: How long the last handover's timings are kept, seconds.
TIMINGS_TTL_S = 86400


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


# KEYS[1] the hash; ARGV[1] the id it must name; ARGV[2..] field, value pairs.
_SET_IF_ID = """
if redis.call('hget', KEYS[1], 'id') ~= ARGV[1] then return 0 end
for i = 2, #ARGV, 2 do redis.call('hset', KEYS[1], ARGV[i], ARGV[i + 1]) end
return 1
"""
# KEYS[1] the hash; ARGV: the command id, its knobs (sorted JSON), the time now.
_CLAIM = """
if redis.call('hget', KEYS[1], 'prepared') ~= '1' or redis.call('hget', KEYS[1], 'knobs') ~= ARGV[2]
   or (redis.call('hget', KEYS[1], 'command') or '') ~= '' then return 0 end
local state = redis.call('hget', KEYS[1], 'state')
if state ~= 'starting' and state ~= 'ready' then return 0 end
redis.call('hset', KEYS[1], 'command', ARGV[1], 'requested_at', ARGV[3])
if state == 'ready' then return 2 end
return 1
"""
# KEYS[1] the hash; ARGV[1] the prepared standby's id.
_CANCEL = """
if redis.call('hget', KEYS[1], 'id') ~= ARGV[1] or (redis.call('hget', KEYS[1], 'command') or '') ~= '' then
  return 0 end
redis.call('hset', KEYS[1], 'state', 'cancelled')
return 1
"""


def knobs_text(knobs: dict[str, int]) -> str:
    """The knob values as the hash stores them (sorted JSON, so equal values compare equal as text)."""
    return json.dumps(knobs, sort_keys=True)


def mark_as(client: redis.Redis, job: str, handover_id: str, step: HandoverStep | None = None,
            **fields: str) -> bool:
    """:func:`mark` (``step`` may be None: ``fields`` only), only while the hash names ``handover_id``.
    Returns whether it was written."""
    mapping = {**({f"{step.value}_at": repr(time.time())} if step else {}), **fields}
    args = [handover_id, *[str(x) for pair in mapping.items() for x in pair]]
    return bool(client.eval(_SET_IF_ID, 1, keys.handover(job), *args))


def open_prepared(client: redis.Redis, job: str, handover_id: str, proposal: str, knobs: dict[str, int]) -> None:
    """The supervisor's side: a new handover hash for a standby prepared for ``proposal`` with
    ``knobs``, stamped ``spawned`` and ``starting``."""
    with client.pipeline(transaction=True) as pipe:
        pipe.delete(keys.handover(job))
        pipe.hset(keys.handover(job), mapping={"id": handover_id, "knobs": knobs_text(knobs), "prepared": "1",
                                               "proposal": proposal, "state": HandoverState.STARTING,
                                               f"{HandoverStep.SPAWNED.value}_at": repr(time.time())})
        pipe.execute()


#: What the claim script answers: the prepared standby's state when it was claimed.
_CLAIMED = {1: StandbyUse.STARTING, 2: StandbyUse.READY}


def claim_prepared(client: redis.Redis, job: str, command_id: str, knobs: dict[str, int]) -> StandbyUse | None:
    """The running driver's side: claim the prepared standby for ``command_id`` when it has exactly
    ``knobs`` and is starting or ready (stamps ``requested``). Returns what it was when claimed
    (``ready`` or ``starting``), None when it was not claimed."""
    return _CLAIMED.get(int(client.eval(_CLAIM, 1, keys.handover(job), command_id, knobs_text(knobs),
                                        repr(time.time()))))


def cancel_prepared(client: redis.Redis, job: str, handover_id: str) -> bool:
    """Call off the prepared standby ``handover_id`` unless a command claimed it. Returns whether it was."""
    return bool(client.eval(_CANCEL, 1, keys.handover(job), handover_id))


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


def keep_ready_s(client: redis.Redis, job: str) -> float | None:
    """Keep the standby's start, ``ready_at − spawned_at`` of the handover hash (seconds), as the job's
    newest measured one (:func:`sparkclient.contract.standby.record_ready_s`). Returns it; None when the
    hash lacks a stamp (nothing kept)."""
    stamps = _stamps(client.hgetall(keys.handover(job)))
    spawned, ready = stamps.get(HandoverStep.SPAWNED.value), stamps.get(HandoverStep.READY.value)
    if spawned is None or ready is None or ready < spawned:
        return None
    record_ready_s(client, job, ready - spawned)
    return ready - spawned


def request_standby(client: redis.Redis, job: str, command_id: str, knobs: dict[str, int],
                    stop_event: threading.Event,
                    timeout_s: float = HANDOVER_READY_TIMEOUT_S) -> tuple[StandbyUse, str | None]:
    """Take the standby prepared with ``knobs`` (:func:`claim_prepared`), else ask the supervisor for
    a new one; then wait until it is ready.

    Returns which standby it is (``ready`` or ``starting`` when a prepared one was claimed, ``started``
    when one was asked for) and None when it is ready; otherwise the reason it is not (the standby's
    ``error``, or "not ready within ``timeout_s`` s"), with the handover marked ``cancelled``.
    Returns at once (not ready) when ``stop_event`` is set.
    """
    key = keys.handover(job)
    use = claim_prepared(client, job, command_id, knobs)
    if use is None:
        use = StandbyUse.STARTED
        client.delete(key)
        mark(client, job, HandoverStep.REQUESTED, id=command_id, knobs=knobs_text(knobs),
             state=HandoverState.REQUESTED)
    deadline = time.monotonic() + timeout_s
    state, error = "", ""
    while time.monotonic() < deadline and not stop_event.is_set():
        state, error = client.hget(key, "state") or "", client.hget(key, "error") or ""
        if state in (HandoverState.READY, HandoverState.FAILED, HandoverState.CANCELLED):
            break
        time.sleep(0.05)
    if state == HandoverState.READY:
        return use, None
    client.hset(key, "state", HandoverState.CANCELLED)
    return use, error or (f"the standby was {state}" if state else f"not ready within {timeout_s:.0f} s")


def wait_for_release(client: redis.Redis, job: str, handover_id: str, stop_event: threading.Event,
                     still_wanted: Callable[[], bool] | None = None,
                     report: Callable[[], dict[str, str]] | None = None, every_s: float = 2.0) -> bool:
    """The standby's side: say it is ready (and keep how long its start took, :func:`keep_ready_s`), then
    wait until the running driver released the checkpoint. Returns False when the handover was called off
    (or ``stop_event`` is set).

    A prepared standby that no command claimed also gives up when ``still_wanted()`` turns False
    (its request was cancelled, replaced or expired); ``report()`` gives fields (its cost) written
    to the hash. Both are called every ``every_s`` seconds."""
    key = keys.handover(job)
    if not mark_as(client, job, handover_id, HandoverStep.READY, state=HandoverState.READY):
        return False
    keep_ready_s(client, job)
    next_check = 0.0
    while not stop_event.is_set():
        fields = client.hmget(key, "id", "state", "command")
        if fields[0] != handover_id:
            return False
        state = fields[1]
        if state == HandoverState.RELEASED:
            return True
        if state in (HandoverState.CANCELLED, HandoverState.FAILED):
            return False
        if state in (HandoverState.REQUESTED, HandoverState.STARTING):  # a restarted driver asked again
            mark_as(client, job, handover_id, state=HandoverState.READY)
        if time.monotonic() >= next_check:
            next_check = time.monotonic() + every_s
            if report is not None:
                mark_as(client, job, handover_id, **report())
            if not fields[2] and still_wanted is not None and not still_wanted():
                if cancel_prepared(client, job, handover_id):
                    return False
        time.sleep(0.02)
    return False


Pending = dict[str, Any]
"""A rescale waiting for the first batch of a new driver: ``id``, ``path``, ``knobs``,
``requested_at`` (epoch s), ``last_batch_end_epoch_s`` (epoch s or None), ``standby`` (a
:class:`~sparkclient.contract.messages.StandbyUse` value, absent for a driver restart), and the command's
``idempotency_key`` and ``command_knobs`` (kept with its result, :mod:`sparkclient.runner.applied`)."""


def pending_of(command: RescaleCommand, path: RescalePath, knobs: dict[str, int], *, requested_at: float,
               last_batch_end: float | None, standby: StandbyUse | None = None) -> Pending:
    """The :data:`Pending` record of ``command`` taking ``path`` to ``knobs``; ``requested_at`` and
    ``last_batch_end`` epoch s; ``standby`` absent for a driver restart."""
    pending: Pending = {"id": command.id, "last_batch_end_epoch_s": last_batch_end, "path": path.value, "knobs": knobs,
                        "requested_at": requested_at, "idempotency_key": command.idempotency_key,
                        "command_knobs": command.knobs}
    if standby is not None:
        pending["standby"] = standby.value
    return pending


def record_pending(client: redis.Redis, job: str, pending: Pending, knobs: dict[str, int]) -> None:
    """In one transaction: record ``pending`` and make ``knobs`` the job's stored knob values."""
    with client.pipeline(transaction=True) as pipe:
        pipe.set(keys.runner_pending(job), json.dumps(pending))
        pipe.set(keys.config(job), knobs_text(knobs))
        write_status(pipe, job, StatusUpdate(knobs=knobs))
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


def pending_standby(pending: Pending) -> StandbyUse | None:
    """The standby driver a pending handover runs on (its ``standby``), None when the record does
    not say or says something unknown (a record from a runner that predates the field)."""
    try:
        return StandbyUse(pending.get("standby"))
    except ValueError:
        return None
