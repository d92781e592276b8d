"""The idempotency keys a runner applied, each with its first result, kept in the job's workdir.

Every attempt of one logical rescale carries the same ``idempotency_key``
(:class:`sparkclient.contract.messages.RescaleCommand`). A command whose result was lost (Redis went
away while the runner wrote it) is sent again after the web app's lease; the runner looks the key up
here and answers the repeat with the first result, :meth:`RescaleResult.replayed_as`, without
touching the query, as long as the knob values that apply set are still the ones running. Only a
succeeded apply is kept: a failed one changed nothing, so another attempt of it applies. A runner
that no longer runs the apply's knob values (it restarted, and Redis had lost ``ss:config:{job}``)
applies the repeat again, and that apply replaces the first in the store.

The file is ``<workdir>/applied-commands.json`` (:data:`FILE_NAME`), next to the job's checkpoint,
so it outlives a driver restart, a warm handover (both drivers share the workdir) and a Redis restart
that lost everything. It is rewritten atomically (temporary file, fsync, rename) and keeps the
newest :data:`KEEP` keys. Its contents are input: a file that does not parse is set aside as
``*.corrupt`` and the store starts empty (a repeat then applies again, as without keys).

Format (version 1)::

    {"version": 1, "applied": {"<key>": {"knobs": {...}, "result": {<RescaleResult JSON>},
                                         "recorded_at": <epoch s>}}}
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from sparkclient.contract.messages import FailureCode, ProtocolError, RescaleCommand, RescaleResult

log = logging.getLogger(__name__)

__all__ = ["FILE_NAME", "KEEP", "AppliedKeys", "AppliedRescale"]

#: The store's file name inside the job's workdir.
FILE_NAME = "applied-commands.json"
#: How many keys the store keeps (the newest); a rescale's attempts span minutes, not hundreds of rescales.
KEEP = 500
#: The file format's version.
VERSION = 1


@dataclass(frozen=True)
class AppliedRescale:
    """One applied key: the ``knobs`` its command asked for and its first ``result``."""

    knobs: dict[str, int]
    result: RescaleResult
    recorded_at: float


class AppliedKeys:
    """The applied idempotency keys of one job, in ``path`` (thread-safe; every call reads the file,
    so a driver sees what the driver before it recorded)."""

    def __init__(self, path: Path, keep: int = KEEP) -> None:
        self.path = Path(path)
        self.keep = keep
        self._lock = threading.Lock()

    @classmethod
    def in_workdir(cls, workdir: Path) -> AppliedKeys:
        """The store of the job whose workdir is ``workdir``."""
        return cls(Path(workdir) / FILE_NAME)

    def get(self, key: str) -> AppliedRescale | None:
        """The first apply of ``key``, or None when it was never applied (or ``key`` is empty)."""
        if not key:
            return None
        with self._lock:
            return self._load().get(key)

    def record(self, key: str, knobs: dict[str, int], result: RescaleResult) -> bool:
        """Keep ``result``, the result of a command with ``key`` and ``knobs`` that was applied (not
        answered from the store), before it is written to Redis. A failed result or an empty key is
        not recorded. Returns whether it was recorded.

        Raises:
            OSError: the file could not be written.
        """
        if not key or not result.succeeded:
            return False
        with self._lock:
            applied = self._load()
            applied.pop(key, None)
            applied[key] = AppliedRescale(dict(knobs), result, time.time())
            newest = sorted(applied.items(), key=lambda item: item[1].recorded_at)[-self.keep:]
            self._save(dict(newest))
        return True

    def answer(self, command: RescaleCommand, running: Mapping[str, int] | None) -> RescaleResult | None:
        """The answer to ``command`` when its key was applied before: the first result replayed
        (:meth:`RescaleResult.replayed_as`), or a ``key-reused`` failure when the first apply asked for
        other knob values. None when the command must be applied: no key, a new one, or the knob
        values ``running`` now (None: not known) are not those the first apply set."""
        first = self.get(command.idempotency_key)
        if first is None:
            return None
        if first.knobs != command.knobs:
            return RescaleResult.failed(
                command.id, FailureCode.KEY_REUSED, knobs=first.result.knobs if running is None else running,
                error=f"idempotency key {command.idempotency_key!r} was applied by command {first.result.id} "
                      f"with {first.knobs}, not {command.knobs}: a new rescale needs a new key")
        if running is not None and first.result.knobs is not None and dict(running) != first.result.knobs:
            log.warning("command %s: key %r was applied by %s, but the runner now runs %s, not %s: applying it "
                        "again", command.id, command.idempotency_key, first.result.id, dict(running),
                        first.result.knobs)
            return None
        return first.result.replayed_as(command.id)

    # file -------------------------------------------------------------------------------------

    def _load(self) -> dict[str, AppliedRescale]:
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return {}
        try:
            return _parse(text)
        except (ValueError, TypeError, KeyError, ProtocolError) as exc:
            aside = self.path.with_suffix(".corrupt")
            log.error("applied-keys store %s does not parse (%s): set aside as %s, starting empty",
                      self.path, exc, aside)
            os.replace(self.path, aside)
            return {}

    def _save(self, applied: dict[str, AppliedRescale]) -> None:
        data = {"version": VERSION, "applied": {
            key: {"knobs": entry.knobs, "result": json.loads(entry.result.to_json()),
                  "recorded_at": entry.recorded_at} for key, entry in applied.items()}}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{FILE_NAME}.", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w") as out:
                json.dump(data, out, sort_keys=True)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def _parse(text: str) -> dict[str, AppliedRescale]:
    """The store's file, parsed.

    Raises:
        ValueError, TypeError, KeyError, ProtocolError: it is not a version-1 store.
    """
    data = json.loads(text)
    if not isinstance(data, dict) or data.get("version") != VERSION or not isinstance(data.get("applied"), dict):
        raise ValueError(f"not a version-{VERSION} applied-keys store")
    applied = {}
    for key, entry in data["applied"].items():
        knobs = entry["knobs"]
        if not isinstance(knobs, dict) or not all(isinstance(v, int) for v in knobs.values()):
            raise ValueError(f"key {key!r}: knobs must be an object of integers")
        applied[str(key)] = AppliedRescale(dict(knobs), RescaleResult.from_json(json.dumps(entry["result"])),
                                           float(entry["recorded_at"]))
    return applied
