"""The control protocol's messages: the typed rescale command, its result and the runner's status
(read as :class:`RunnerStatus`, written as :class:`StatusUpdate`), as they are written to and parsed
from Redis (:mod:`sparkclient.contract.control` moves them).

Redis contents are input: every ``from_*`` parser checks types and returns a value or raises
:class:`ProtocolError`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from enum import StrEnum
from typing import Any

from scaling.policy.numbers import is_finite_number

__all__ = [
    "hash_text",
    "knob_values",
    "MAX_TEXT",
    "FailureCode",
    "ProtocolError",
    "RescaleCommand",
    "RescalePath",
    "RescaleResult",
    "ResultStatus",
    "RunnerState",
    "RunnerStatus",
    "StandbyUse",
    "StatusUpdate",
]

#: The longest id, knob name or text field accepted from Redis, characters.
MAX_TEXT = 2000


class ProtocolError(ValueError):
    """A command, result or status read from Redis is malformed; ``field`` names the culprit."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(f"{field_name}: {message}")
        self.field = field_name


class RescalePath(StrEnum):
    """How a rescale was applied."""

    NONE = "none"                      # nothing to change, or refused before anything stopped
    IN_PLACE = "in-place"              # executors changed while the query ran
    IN_PROCESS = "in-process"          # query stopped and started again in the same driver
    STATE_REPARTITION = "state-repartition"  # query stopped, its state repartitioned offline, started again
    #                                          in the same driver
    DRIVER_RESTART = "driver-restart"  # a new driver process started after the old one stopped
    DRIVER_HANDOVER = "driver-handover"  # a new driver, started and warmed up before the old one stopped


class StandbyUse(StrEnum):
    """Which standby driver a rescale handed over to (``RescaleResult.standby``): one ready when the
    command arrived takes over at once; one started for the command costs its whole start first."""

    READY = "ready"        # prepared before the command (while its proposal was pending), ready when it came
    STARTING = "starting"  # prepared before the command, still starting when it came
    STARTED = "started"    # none prepared with the command's knobs: started for the command
    NONE = "none"          # no new driver (the query restarted in the same driver, or nothing stopped)


class ResultStatus(StrEnum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class FailureCode(StrEnum):
    """Why a rescale failed (the text in ``RescaleResult.error`` gives the details)."""

    MALFORMED_COMMAND = "malformed-command"
    OUT_OF_BOUNDS = "out-of-bounds"
    ABOVE_CAPACITY = "above-capacity"
    STATE_NOT_REPARTITIONABLE = "state-not-repartitionable"
    REPARTITION_FAILED = "repartition-failed"
    EXECUTOR_CHANGE_FAILED = "executor-change-failed"
    RESTART_FAILED = "restart-failed"
    NO_FIRST_BATCH = "no-first-batch"
    DRIVER_STOPPED = "driver-stopped"
    DRIVER_CRASHED = "driver-crashed"
    KEY_REUSED = "key-reused"  # the idempotency key was applied before with other knob values

    @property
    def retryable(self) -> bool:
        """Whether another attempt of the same command could succeed. The runner refuses a malformed
        command, knob values outside their bounds, and state it cannot repartition offline for what
        they are, before anything stops: the same command is refused again."""
        return self not in (FailureCode.MALFORMED_COMMAND, FailureCode.OUT_OF_BOUNDS,
                            FailureCode.STATE_NOT_REPARTITIONABLE, FailureCode.KEY_REUSED)


class RunnerState(StrEnum):
    STARTING = "starting"
    RUNNING = "running"
    RESTARTING = "restarting"
    STOPPED = "stopped"
    FAILED = "failed"  # the driver crashed; the supervisor restarts it after a back-off
    CRASH_LOOPING = "crash_looping"  # as many crashes in the window as the crash-loop rule's; restarted, backed off


def _text(name: str, value: Any, *, required: bool = True) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value) or len(value) > MAX_TEXT:
        raise ProtocolError(name, f"must be a {'non-empty ' if required else ''}string of at most "
                                  f"{MAX_TEXT} characters, got {value!r:.80}")
    return value


def _number(name: str, value: Any, *, allow_none: bool = False) -> float | None:
    if value is None and allow_none:
        return None
    if not is_finite_number(value) or value < 0:
        raise ProtocolError(name, f"must be a finite number >= 0, got {value!r:.80}")
    return float(value)


def hash_text(raw: Mapping[Any, Any]) -> dict[str, str]:
    """A Redis hash as read (bytes or str keys and values) with every key and value as ``str``."""
    return {(k.decode() if isinstance(k, bytes) else str(k)): (v.decode() if isinstance(v, bytes) else str(v))
            for k, v in raw.items()}


def knob_values(name: str, value: Any) -> dict[str, int]:
    """``value`` as ``{knob name: integer}`` (at most 200 knobs, names of 1-64 characters). Raises
    :class:`ProtocolError` naming ``name`` (or ``name.knob``) otherwise."""
    if not isinstance(value, Mapping) or len(value) > 200:
        raise ProtocolError(name, f"must be an object of knob name -> integer, got {value!r:.80}")
    out = {}
    for key, number in value.items():
        if not isinstance(key, str) or not key or len(key) > 64 or isinstance(number, bool) \
                or not isinstance(number, int):
            raise ProtocolError(f"{name}.{key}", f"must be an integer, got {number!r:.80}")
        out[key] = number
    return out


def _object(text: str | bytes | None, what: str) -> dict[str, Any]:
    try:
        data = json.loads(text or "")
    except (ValueError, TypeError) as exc:
        raise ProtocolError(what, f"is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ProtocolError(what, "must be a JSON object")
    return data


@dataclass(frozen=True)
class RescaleCommand:
    """Ask a runner to run with ``knobs`` (the full set of knob values; ``id`` is the attempt's id).

    ``idempotency_key`` names the logical rescale: every attempt of it carries the same key, and a
    runner that applied the key once answers a repeat with that first result
    (:mod:`sparkclient.runner.applied`) instead of applying it again. Empty: no key (each command
    applies). A runner that does not know the field ignores it and applies every attempt.
    """

    id: str
    knobs: dict[str, int]
    action: str = "rescale"
    idempotency_key: str = ""

    def to_json(self) -> str:
        data: dict[str, Any] = {"id": self.id, "action": self.action, "knobs": self.knobs}
        if self.idempotency_key:
            data["idempotency_key"] = self.idempotency_key
        return json.dumps(data, sort_keys=True)

    @staticmethod
    def id_of(text: str | bytes | None) -> str | None:
        """The ``id`` of a command that may not parse (to fail it by its id): a non-empty string of
        at most 200 characters, else None."""
        try:
            raw = json.loads(text or "").get("id")
        except (ValueError, AttributeError):
            return None
        return raw if isinstance(raw, str) and 0 < len(raw) <= 200 else None

    @classmethod
    def from_json(cls, text: str | bytes | None) -> RescaleCommand:
        """Raises :class:`ProtocolError` naming the bad field."""
        data = _object(text, "command")
        if data.get("action") != "rescale":
            raise ProtocolError("action", f"must be 'rescale', got {data.get('action')!r:.40}")
        return cls(id=_text("id", data.get("id")), knobs=knob_values("knobs", data.get("knobs")),
                   idempotency_key=_text("idempotency_key", data.get("idempotency_key"), required=False))


@dataclass(frozen=True)
class RescaleResult:
    """The outcome of one command.

    Attributes:
        downtime_s: seconds from the last batch's end before the stop to the first batch's end after
            (0 for ``in-place``): the pause plus the first (catch-up) batch.
        pause_s: seconds from the last batch's end before the stop (or the stop) to the first batch's
            start after: the time no batch ran (0 for ``in-place``).
        knobs: the knob values running after the command (the old ones when it failed).
        executor_change_s: seconds until the cluster showed the new executor count (in place).
        replay_of: the id of the earlier command whose apply this answers, when the command's
            idempotency key had been applied already (the other fields are that first result's:
            its path, downtime, pause and ``completed_at``); None when this command was applied.
        first_batch_at: epoch s of the end of the first batch on the new configuration (a restart's
            first batch; for ``in-place``, when the cluster showed the new executors); None when
            nothing changed, the command failed, or the runner did not say.
        standby: the standby driver a succeeded rescale ran on (:class:`StandbyUse`); None when the
            command failed or the runner did not say (one that predates the field).
    """

    id: str
    status: ResultStatus
    path: RescalePath
    downtime_s: float = 0.0
    pause_s: float = 0.0
    knobs: dict[str, int] | None = None
    error: str = ""
    code: FailureCode | None = None
    completed_at: float = field(default_factory=time.time)
    executor_change_s: float | None = None
    replay_of: str | None = None
    first_batch_at: float | None = None
    standby: StandbyUse | None = None

    @property
    def succeeded(self) -> bool:
        return self.status is ResultStatus.SUCCEEDED

    def to_json(self) -> str:
        data = asdict(self)
        data.update(status=self.status.value, path=self.path.value, code=self.code.value if self.code else None,
                    standby=self.standby.value if self.standby else None,
                    downtime_s=round(self.downtime_s, 3), pause_s=round(self.pause_s, 3))
        return json.dumps(data, sort_keys=True)

    @classmethod
    def failed(cls, command_id: str, code: FailureCode, error: str, *, path: RescalePath = RescalePath.NONE,
               knobs: Mapping[str, int] | None = None) -> RescaleResult:
        """A failure result."""
        return cls(id=command_id, status=ResultStatus.FAILED, path=path, code=code, error=error[:MAX_TEXT],
                   knobs=dict(knobs) if knobs is not None else None)

    @classmethod
    def from_json(cls, text: str | bytes | None) -> RescaleResult:
        """Raises :class:`ProtocolError` naming the bad field."""
        data = _object(text, "result")
        try:
            status, path = ResultStatus(data.get("status")), RescalePath(data.get("path"))
            code = FailureCode(data["code"]) if data.get("code") is not None else None
        except ValueError as exc:
            raise ProtocolError("status/path/code", str(exc)) from None
        try:
            standby = StandbyUse(data["standby"]) if data.get("standby") is not None else None
        except ValueError:
            raise ProtocolError("standby", f"unknown standby use {data.get('standby')!r:.40}") from None
        knobs = data.get("knobs")
        return cls(id=_text("id", data.get("id")), status=status, path=path,
                   downtime_s=_number("downtime_s", data.get("downtime_s", 0.0)),
                   pause_s=_number("pause_s", data.get("pause_s", 0.0)),
                   knobs=knob_values("knobs", knobs) if knobs is not None else None,
                   error=_text("error", data.get("error"), required=False), code=code,
                   completed_at=_number("completed_at", data.get("completed_at", 0.0)),
                   executor_change_s=_number("executor_change_s", data.get("executor_change_s"), allow_none=True),
                   replay_of=_text("replay_of", data["replay_of"]) if data.get("replay_of") is not None else None,
                   first_batch_at=_number("first_batch_at", data.get("first_batch_at"), allow_none=True),
                   standby=standby)

    def replayed_as(self, command_id: str) -> RescaleResult:
        """This (first) result as the answer to a repeat of its command, ``command_id``: the same
        outcome, path, downtime, pause and ``completed_at``, with ``replay_of`` = this result's id."""
        return replace(self, id=command_id, replay_of=self.replay_of or self.id)


@dataclass(frozen=True)
class RunnerStatus:
    """The runner's status hash, parsed. Empty strings stand for "not reported".

    ``knob_specs`` is the pipeline's knob declarations (JSON, :func:`sparkclient.contract.spec.knobs_to_json`);
    ``knobs`` the running values; ``capacity`` the most executors the cluster can give (0 unknown);
    ``plan_stages`` the plan-derived stage list (JSON, :mod:`sparkclient.contract.binding`);
    ``trigger_interval_s`` the query's processing-time trigger (0 unknown).
    The last crash, as the supervisor saw it (:mod:`sparkclient.runner.crashloop`): the driver's
    ``exit_code`` (negative: the signal that killed it; 0 while no crash is reported), the ``exception``
    class and its ``exception_message`` (empty when the driver left none), its ``log_path``, the
    ``crashes`` within the last ``crash_window_s`` seconds, and ``restart_at`` (epoch s) when the next
    driver starts.
    """

    state: str = ""
    pid: int = 0
    supervisor_pid: int = 0
    ui_url: str = ""
    app_id: str = ""
    master: str = ""
    pipeline: str = ""
    query_name: str = ""
    query_id: str = ""
    run_id: str = ""
    knobs: dict[str, int] = field(default_factory=dict)
    knob_specs: str = ""
    plan_stages: str = ""
    capacity: int = 0
    trigger_interval_s: float = 0.0
    checkpoint: str = ""
    lease_token: str = ""
    started_at: float = 0.0
    last_batch_at: float = 0.0
    error: str = ""
    exit_code: int = 0
    exception: str = ""
    exception_message: str = ""
    log_path: str = ""
    crashes: int = 0
    crash_window_s: float = 0.0
    restart_at: float = 0.0

    @property
    def running(self) -> bool:
        return self.state == RunnerState.RUNNING

    @classmethod
    def from_mapping(cls, raw: Mapping[Any, Any]) -> RunnerStatus:
        """Parse a status hash (bytes or str keys and values); unknown fields are ignored.

        Raises:
            ProtocolError: a field of the wrong type or size, naming it.
        """
        data = hash_text(raw)
        values: dict[str, Any] = {}
        for f in cls.__dataclass_fields__.values():
            text = data.get(f.name)
            if text is None or text == "":
                continue
            if len(text) > 100_000:
                raise ProtocolError(f.name, "is too long")
            if f.name == "state":
                try:
                    values[f.name] = RunnerState(text).value
                except ValueError:
                    raise ProtocolError("state", f"unknown runner state {text!r:.40}") from None
            elif f.name == "knobs":
                values[f.name] = knob_values("knobs", _object(text, "knobs"))
            elif f.type in ("int", int):
                try:
                    values[f.name] = int(text)
                except ValueError:
                    raise ProtocolError(f.name, f"must be an integer, got {text!r:.40}") from None
            elif f.type in ("float", float):
                try:
                    number = float(text)
                except ValueError:
                    raise ProtocolError(f.name, f"must be a number, got {text!r:.40}") from None
                values[f.name] = _number(f.name, number)
            else:
                values[f.name] = text
        return cls(**values)


@dataclass(frozen=True)
class StatusUpdate:
    """What a writer of the runner's status hash writes (:func:`sparkclient.contract.control.write_status`):
    the fields of :class:`RunnerStatus`, each None (left as it is) or its value (``""`` or 0 writes
    "not reported"). The supervisor, the driver and the progress listener each write their own fields."""

    state: RunnerState | None = None
    pid: int | None = None
    supervisor_pid: int | None = None
    ui_url: str | None = None
    app_id: str | None = None
    master: str | None = None
    pipeline: str | None = None
    query_name: str | None = None
    query_id: str | None = None
    run_id: str | None = None
    knobs: Mapping[str, int] | None = None
    knob_specs: str | None = None
    plan_stages: str | None = None
    capacity: int | None = None
    trigger_interval_s: float | None = None
    checkpoint: str | None = None
    lease_token: str | None = None
    started_at: float | None = None
    last_batch_at: float | None = None
    error: str | None = None
    exit_code: int | None = None
    exception: str | None = None
    exception_message: str | None = None
    log_path: str | None = None
    crashes: int | None = None
    crash_window_s: float | None = None
    restart_at: float | None = None

    def to_mapping(self) -> dict[str, str]:
        """The hash fields written, as the strings :meth:`RunnerStatus.from_mapping` parses (``knobs``
        as JSON with sorted keys, numbers as ``str``)."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        return {name: json.dumps(dict(value), sort_keys=True) if name == "knobs" else str(value)
                for name, value in values.items() if value is not None}
