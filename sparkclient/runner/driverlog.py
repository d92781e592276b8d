"""Where a runner's drivers log, and what a dead driver's log says killed its query: the supervisor names it
beside the Python error.

A driver whose JVM dies (an ``OutOfMemoryError`` in a task, say) reports what its Python side saw next,
often a ``ConnectionRefusedError`` from py4j; the cause is in the JVM's lines of the same log, after
Spark's ``Query ... terminated with error``.

A driver that raises on its way down writes a **crash record** (:func:`write_crash`, ``crash.json`` in
its work directory): the exception that killed it, reduced to its root (:func:`root_exception`: a
Python error raised inside Spark, a ``foreachBatch`` function's or a UDF's, is named by its own class,
not by the ``StreamingQueryException`` around it).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = ["CRASH_FILE", "TAIL_BYTES", "Crash", "crash_of", "driver_log", "query_failure", "read_crash",
           "root_exception", "write_crash"]

#: The crash record's file name, in the driver's work directory.
CRASH_FILE = "crash.json"
#: The longest exception message kept, characters.
MAX_MESSAGE = 1000
#: Python's exceptions of a Python side that lost its JVM: the JVM's own cause, in the log, says more.
JVM_LOST = frozenset({"ConnectionRefusedError", "ConnectionResetError", "BrokenPipeError",
                      "py4j.protocol.Py4JNetworkError", "Py4JNetworkError", "py4j.protocol.Py4JError"})
_PY_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning)): ?(.*)$")


def driver_log(workdir: Path) -> Path:
    """Where every driver of a runner logs (the running one and its standby, Spark's lines and the
    query's errors): ``<workdir>/driver.log``, ``workdir`` being the runner's ``--workdir``."""
    return workdir / "driver.log"


#: How much of the log's end is read, bytes.
TAIL_BYTES = 256 * 1024
_TERMINATED = re.compile(r"ERROR MicroBatchExecution: Query .* terminated with error")
_EXCEPTION = re.compile(r"^(?:Caused by: )?((?:[A-Za-z_$][\w$]*\.)+[A-Z][\w$]*(?:Exception|Error)\b(?::.*)?)$")
#: A line of the trace: a frame, an elided count, a blank, or a Spark heading inside the trace.
_TRACE = re.compile(r"^(?:\s+at |\s*\.\.\. \d+ more|\s*$|Driver stacktrace:|Caused by: |\S+(?:Exception|Error)\b)")


def query_failure(path: Path, *, since: int = 0) -> str | None:
    """The root cause of the last query the log at ``path`` says terminated with an error, in what
    was written after byte ``since``: the last ``Caused by:`` of that trace, else its first exception
    line (at most 300 characters), e.g. ``java.lang.OutOfMemoryError: Java heap space``. None when the
    last :data:`TAIL_BYTES` name no such query, or the log cannot be read."""
    try:
        with path.open("rb") as log:
            log.seek(max(since, path.stat().st_size - TAIL_BYTES))
            lines = log.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return None
    starts = [i for i, line in enumerate(lines) if _TERMINATED.search(line)]
    if not starts:
        return None
    found: list[tuple[bool, str]] = []
    for line in lines[starts[-1] + 1:]:
        if not _TRACE.match(line):
            break
        match = _EXCEPTION.match(line.strip())
        if match:
            found.append((line.startswith("Caused by: "), match.group(1)))
    caused = [text for is_cause, text in found if is_cause]
    if caused:
        return caused[-1][:300]
    return found[0][1][:300] if found else None


@dataclass(frozen=True)
class Crash:
    """What killed a driver: the exception's class (dotted for a JVM one) and its message."""

    exception: str
    message: str


def root_exception(exc: BaseException) -> Crash:
    """The root of ``exc``: the exception line that ends the last traceback its text holds (a Python
    error raised inside Spark), else the last ``Caused by:`` its text names, else ``exc`` itself;
    the message cut to :data:`MAX_MESSAGE` characters."""
    text = str(exc)
    if "Traceback (most recent call last):" in text:
        tail = text.rsplit("Traceback (most recent call last):", 1)[1].splitlines()
        found = [m for m in (_PY_EXCEPTION.match(line) for line in tail) if m]
        if found:
            return Crash(found[0].group(1), found[0].group(2).strip()[:MAX_MESSAGE])
    causes = [line.strip().removeprefix("Caused by: ") for line in text.splitlines()
              if line.strip().startswith("Caused by: ")]
    if causes:
        return _split(causes[-1])
    return Crash(type(exc).__name__, text.strip().splitlines()[0][:MAX_MESSAGE] if text.strip() else "")


def _split(line: str) -> Crash:
    name, _sep, message = line.partition(":")
    return Crash(name.strip(), message.strip()[:MAX_MESSAGE])


def write_crash(workdir: Path, exc: BaseException) -> None:
    """Write ``exc``'s crash record (:func:`root_exception`) to ``workdir``; an unwritable folder is
    ignored (the log still holds the trace)."""
    try:
        (workdir / CRASH_FILE).write_text(json.dumps(asdict(root_exception(exc))))
    except OSError:
        pass


def read_crash(workdir: Path) -> Crash | None:
    """The crash record in ``workdir`` (removed once read), or None when there is none or it is malformed."""
    path = workdir / CRASH_FILE
    try:
        data = json.loads(path.read_text())
        path.unlink()
        return Crash(str(data["exception"])[:300], str(data["message"])[:MAX_MESSAGE])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def crash_of(workdir: Path, log: Path, *, since: int = 0) -> Crash | None:
    """What killed the driver of ``workdir``: its crash record, unless that names a Python side that
    lost its JVM (:data:`JVM_LOST`) and the log names the query's JVM cause (:func:`query_failure`
    after byte ``since``); the JVM cause alone when there is no record; None when neither says."""
    record = read_crash(workdir)
    if record is not None and record.exception not in JVM_LOST:
        return record
    cause = query_failure(log, since=since)
    return _split(cause) if cause else record
