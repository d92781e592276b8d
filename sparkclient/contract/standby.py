"""A standby driver prepared while a proposal is pending: the web app's request and the standby's report.

A rescale whose change needs a new driver (the executors in local mode's ``local[N]``, or a memory
setting: any static setting of the JVM) costs the start of a second driver: its SparkSession, its
JVM's warm-up and its query's analysis. The web app asks for that driver as soon as such a proposal
is pending, so the approved command finds it ready and the running driver hands over at once:

- **Request**: string ``ss:runner:{job}:standby`` (:func:`sparkclient.contract.keys.standby_request`) =
  :meth:`StandbyRequest.to_json`, written with a Redis expiry of its ``ttl_s``: ``prepare`` with the
  proposal's knob values, or ``cancel`` (the proposal was withdrawn, rejected or expired). The web app
  writes it again on each reconcile beat while the proposal waits; a request that is not renewed
  expires, and the standby then exits on its own, so nothing leaks when the web app is gone.
- **Measured starts**: list ``ss:runner:{job}:standby:ready_s`` (:func:`sparkclient.contract.keys.standby_ready_times`),
  seconds from a standby's process start to ready, newest first, pushed by each standby as it says ready
  (:func:`record_ready_s`; the last :data:`READY_TIMES_KEPT`, for :data:`READY_TIMES_TTL_S`), read by the web app
  (:func:`read_ready_times_s`) for the time left of a standby's start on the job's host.
- **Report**: the handover hash ``ss:runner:{job}:handover`` (:func:`sparkclient.contract.keys.handover`),
  parsed by :meth:`StandbyStatus.from_mapping`: the standby's state, the proposal it was prepared
  for, its knob values and what it costs while it waits (resident memory of its process group, MB,
  and its CPU share, % of one core).

Redis contents are input: the parsers return a value or raise :class:`ProtocolError` naming the field.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import redis

from scaling.policy.numbers import is_finite_number
from sparkclient.contract import keys
from sparkclient.contract.messages import MAX_TEXT, ProtocolError, hash_text, knob_values

__all__ = ["DEFAULT_TTL_S", "READY_TIMES_KEPT", "READY_TIMES_TTL_S", "HandoverState", "StandbyAction",
           "StandbyRequest", "StandbyStatus", "read_ready_times_s", "read_standby_request", "read_standby_status",
           "record_ready_s", "send_standby_request"]

#: How long a request lives unless the web app writes it again, seconds.
DEFAULT_TTL_S = 180.0
#: The longest TTL accepted, seconds (a day).
MAX_TTL_S = 86400.0
#: How many measured standby starts are kept per job: the newest, so the figure follows the host's load.
READY_TIMES_KEPT = 5
#: How long the measured starts are kept after the newest, seconds (a week).
READY_TIMES_TTL_S = 7 * 86400


class HandoverState(StrEnum):
    """The ``state`` field of the handover hash (``sparkclient.runner.handover`` moves it)."""

    REQUESTED = "requested"  # the running driver asked the supervisor for a standby
    STARTING = "starting"  # the supervisor started it
    READY = "ready"  # the standby has its SparkSession, a warm JVM and its query prepared
    RELEASED = "released"  # the running driver stopped its query and released the lease
    CANCELLED = "cancelled"  # the running driver (or the supervisor) called the handover off
    FAILED = "failed"  # the standby could not start; ``error`` says why


class StandbyAction(StrEnum):
    """What the web app asks of the runner."""

    PREPARE = "prepare"  # start a standby driver with ``knobs`` and keep it ready
    CANCEL = "cancel"  # stop the standby prepared for ``proposal``


@dataclass(frozen=True)
class StandbyRequest:
    """Prepare (or cancel) a standby driver for ``proposal`` (its id, as text) with ``knobs`` (the full
    set of knob values; empty for ``cancel``); ``sent_at`` epoch s; ``ttl_s`` seconds it lives."""

    action: StandbyAction
    proposal: str
    knobs: dict[str, int] = field(default_factory=dict)
    sent_at: float = field(default_factory=time.time)
    ttl_s: float = DEFAULT_TTL_S

    def to_json(self) -> str:
        return json.dumps({"action": self.action.value, "proposal": self.proposal, "knobs": self.knobs,
                           "sent_at": self.sent_at, "ttl_s": self.ttl_s}, sort_keys=True)

    def live(self, now: float | None = None) -> bool:
        """Whether the request is still in force at ``now`` (epoch s): sent within its ``ttl_s``."""
        return (time.time() if now is None else now) <= self.sent_at + self.ttl_s

    @classmethod
    def from_json(cls, text: str | bytes | None) -> StandbyRequest:
        """Raises :class:`ProtocolError` naming the bad field."""
        try:
            data = json.loads(text or "")
        except (ValueError, TypeError) as exc:
            raise ProtocolError("standby", f"is not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise ProtocolError("standby", "must be a JSON object")
        try:
            action = StandbyAction(data.get("action"))
        except ValueError:
            raise ProtocolError("action", f"must be prepare or cancel, got {data.get('action')!r:.40}") from None
        proposal = data.get("proposal")
        if not isinstance(proposal, str) or not proposal or len(proposal) > 200:
            raise ProtocolError("proposal", f"must be a non-empty string of at most 200 characters, "
                                            f"got {proposal!r:.80}")
        knobs = knob_values("knobs", data.get("knobs", {}))
        if action is StandbyAction.PREPARE and not knobs:
            raise ProtocolError("knobs", "a prepare request needs the knob values")
        return cls(action=action, proposal=proposal, knobs=knobs, sent_at=_seconds("sent_at", data.get("sent_at")),
                   ttl_s=_seconds("ttl_s", data.get("ttl_s"), top=MAX_TTL_S))


def _seconds(name: str, value: Any, top: float = math.inf) -> float:
    if not is_finite_number(value) or not 0 <= value <= top:
        raise ProtocolError(name, f"must be a finite number of seconds in [0, {top:g}], got {value!r:.80}")
    return float(value)



def send_standby_request(client: redis.Redis, job: str, request: StandbyRequest) -> None:
    """Write ``request`` for ``job``'s runner; Redis drops it ``ttl_s`` seconds later unless written again."""
    client.set(keys.standby_request(job), request.to_json(), ex=max(1, math.ceil(request.ttl_s)))


def read_standby_request(client: redis.Redis, job: str, now: float | None = None) -> StandbyRequest | None:
    """The request in force for ``job`` (None: none, or past its TTL).

    Raises:
        ProtocolError: the stored request is malformed.
    """
    raw = client.get(keys.standby_request(job))
    if raw is None:
        return None
    request = StandbyRequest.from_json(raw)
    return request if request.live(now) else None


@dataclass(frozen=True)
class StandbyStatus:
    """A prepared standby as the handover hash reports it. ``state`` is empty when there is none;
    ``proposal`` is the proposal it was prepared for (empty: a standby a command asked for);
    ``rss_mb`` and ``cpu_pct`` (None: not measured yet) what its process group costs while it waits:
    resident memory, MB, and CPU, % of one core; ``spawned_at`` epoch s when its process started and
    ``ready_at`` epoch s (None before it is ready): :attr:`ready_s` is how long it took to be ready."""

    state: HandoverState | None = None
    proposal: str = ""
    knobs: dict[str, int] = field(default_factory=dict)
    rss_mb: float | None = None
    cpu_pct: float | None = None
    ready_at: float | None = None
    error: str = ""
    spawned_at: float | None = None

    @property
    def ready_s(self) -> float | None:
        """Seconds from its process's start to ready (None: not ready, or a start not stamped)."""
        if self.ready_at is None or self.spawned_at is None or self.ready_at < self.spawned_at:
            return None
        return self.ready_at - self.spawned_at

    @classmethod
    def from_mapping(cls, raw: Mapping[Any, Any]) -> StandbyStatus:
        """Parse the handover hash (bytes or str keys and values); unknown fields are ignored.

        Raises:
            ProtocolError: a field of the wrong type or size, naming it.
        """
        data = hash_text(raw)
        if not data.get("state"):
            return cls()
        try:
            state = HandoverState(data["state"])
        except ValueError:
            raise ProtocolError("state", f"unknown handover state {data['state']!r:.40}") from None
        text = {name: data.get(name, "") for name in ("proposal", "error")}
        for name, value in text.items():
            if len(value) > MAX_TEXT:
                raise ProtocolError(name, f"is longer than {MAX_TEXT} characters")
        try:
            knobs = json.loads(data["knobs"]) if data.get("knobs") else {}
        except ValueError:
            raise ProtocolError("knobs", "is not JSON") from None
        return cls(state=state, knobs=knob_values("knobs", knobs), **text,
                   **{name: _number(name, data.get(name)) for name in ("rss_mb", "cpu_pct", "ready_at", "spawned_at")})


def _number(name: str, text: str | None) -> float | None:
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise ProtocolError(name, f"must be a number, got {text!r:.40}") from None
    if not is_finite_number(value) or value < 0:
        raise ProtocolError(name, f"must be a finite number >= 0, got {text!r:.40}")
    return value


def read_standby_status(client: redis.Redis, job: str) -> StandbyStatus:
    """The standby of ``job`` as its handover hash reports it (``state`` None: there is none).

    Raises:
        ProtocolError: a malformed field.
    """
    return StandbyStatus.from_mapping(client.hgetall(keys.handover(job)))


def record_ready_s(client: redis.Redis, job: str, seconds: float) -> None:
    """Keep a standby's measured start (``seconds`` from its process's start to ready, finite, >= 0) as
    ``job``'s newest, with the :data:`READY_TIMES_KEPT` before it.

    Raises:
        ValueError: ``seconds`` is negative or not finite.
    """
    if not is_finite_number(seconds) or seconds < 0:
        raise ValueError(f"a standby's start must be a finite number of seconds >= 0, got {seconds!r}")
    key = keys.standby_ready_times(job)
    with client.pipeline(transaction=True) as pipe:
        pipe.lpush(key, repr(round(float(seconds), 3)))
        pipe.ltrim(key, 0, READY_TIMES_KEPT - 1)
        pipe.expire(key, READY_TIMES_TTL_S)
        pipe.execute()


def read_ready_times_s(client: redis.Redis, job: str) -> list[float]:
    """``job``'s measured standby starts (seconds, newest first; empty: none measured on its host yet).
    An entry that is not a finite number >= 0 is left out."""
    out = []
    for raw in client.lrange(keys.standby_ready_times(job), 0, READY_TIMES_KEPT - 1):
        try:
            value = float(raw)
        except (TypeError, ValueError):
            continue
        if is_finite_number(value) and value >= 0:
            out.append(value)
    return out
