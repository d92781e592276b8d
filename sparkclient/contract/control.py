"""The runner's control protocol: typed command, result and status, over Redis.

One module for the runner, the web app and the test fakes alike. The messages and their parsers are
in :mod:`sparkclient.contract.messages`; Redis contents are input: every ``from_*`` parser checks types
and returns a value or raises :class:`~sparkclient.contract.messages.ProtocolError`.

- **Command**: stream ``ss:control:{job}``, field ``json`` = :meth:`RescaleCommand.to_json`.
- **Result**: string ``ss:control:{job}:result:{id}`` = :meth:`RescaleResult.to_json`.
- **Status**: hash ``ss:runner:{job}``, written by :func:`write_status` (a :class:`StatusUpdate`: the
  fields it sets) and read by :func:`read_status` (a :class:`RunnerStatus`).

The connection authenticates: put the password in the URL (``redis://:PASSWORD@host:6379/0``, or
``redis://USER:PASSWORD@...`` with Redis ACLs). :func:`connect` turns a refused password into
:class:`ControlAuthError` with what to do.
"""

from __future__ import annotations

import time
from urllib.parse import urlsplit, urlunsplit

import redis

from sparkclient.contract import keys
from sparkclient.contract.messages import (
    RescaleCommand,
    RescaleResult,
    RunnerStatus,
    StatusUpdate,
)

__all__ = [
    "ControlAuthError",
    "ControlUnreachable",
    "connect",
    "get_result",
    "read_status",
    "send_command",
    "wait_result",
    "write_result",
    "write_status",
]


class ControlAuthError(RuntimeError):
    """Redis refused the control channel's credentials."""


class ControlUnreachable(RuntimeError):
    """Nothing answers at the control channel's Redis URL."""


def connect(url: str) -> redis.Redis:
    """A decoded-strings client on ``url``, checked with a PING.

    Raises:
        ControlAuthError: Redis refused the password (or needs one).
        ControlUnreachable: nothing answers at ``url``.
    """
    client = redis.Redis.from_url(url, decode_responses=True)
    try:
        client.ping()
    except (redis.AuthenticationError, redis.exceptions.AuthenticationWrongNumberOfArgsError) as exc:
        raise ControlAuthError(
            f"Redis at {_safe_url(url)} refused the credentials ({exc}): put the password in the URL, "
            "redis://:PASSWORD@host:port/db (or set SPARKSCALER_REDIS_URL)") from None
    except redis.ConnectionError as exc:
        raise ControlUnreachable(f"no Redis answers at {_safe_url(url)} ({exc}): start it, or pass the right "
                                 "--redis-url / SPARKSCALER_REDIS_URL") from None
    except redis.ResponseError as exc:
        if "NOAUTH" in str(exc) or "WRONGPASS" in str(exc):
            raise ControlAuthError(
                f"Redis at {_safe_url(url)} needs a password ({exc}): use redis://:PASSWORD@host:port/db "
                "(or set SPARKSCALER_REDIS_URL)") from None
        raise
    return client


def _safe_url(url: str) -> str:
    """``url`` with any password masked."""
    parts = urlsplit(url)
    if parts.password:
        host = parts.hostname or ""
        netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
        return urlunsplit(parts._replace(netloc=netloc))
    return url


def send_command(client: redis.Redis, job: str, command: RescaleCommand) -> None:
    """Append ``command`` to the job's control stream."""
    client.xadd(keys.control(job), {"json": command.to_json()})


def write_result(client: redis.Redis, job: str, result: RescaleResult) -> None:
    """Store the outcome of a command (the runner's side)."""
    client.set(keys.control_result(job, result.id), result.to_json())


def get_result(client: redis.Redis, job: str, command_id: str) -> RescaleResult | None:
    """The outcome of command ``command_id``, or None while there is none.

    Raises:
        ProtocolError: the stored result is malformed.
    """
    raw = client.get(keys.control_result(job, command_id))
    return RescaleResult.from_json(raw) if raw is not None else None


def wait_result(client: redis.Redis, job: str, command_id: str, timeout_s: float,
                poll_s: float = 0.2) -> RescaleResult:
    """Wait for the outcome of command ``command_id``.

    Raises:
        TimeoutError: no outcome within ``timeout_s`` seconds; the message gives the runner's state.
        ProtocolError: the stored result or status is malformed.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        result = get_result(client, job, command_id)
        if result is not None:
            return result
        if time.monotonic() >= deadline:
            status = read_status(client, job)
            raise TimeoutError(
                f"no result for command {command_id!r} of job {job!r} after {timeout_s:.0f} s "
                f"(runner state={status.state!r}, error={status.error!r}): is "
                f"`python -m sparkclient run --job {job}` running?")
        time.sleep(poll_s)


def read_status(client: redis.Redis, job: str) -> RunnerStatus:
    """The parsed runner status of ``job`` (all fields empty when no runner ever reported).

    Raises:
        ProtocolError: a malformed field.
    """
    return RunnerStatus.from_mapping(client.hgetall(keys.runner(job)))


def write_status(client: redis.Redis, job: str, update: StatusUpdate) -> None:
    """Write the fields ``update`` sets to the job's status hash (the others are left as they are);
    ``client`` may be a pipeline, the write then is one of its commands. An update that sets nothing
    writes nothing."""
    mapping = update.to_mapping()
    if mapping:
        client.hset(keys.runner(job), mapping=mapping)
