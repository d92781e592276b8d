"""Where a runner's drivers log, and what a dead driver's log says killed its query: the supervisor names it
beside the Python error.

A driver whose JVM dies (an ``OutOfMemoryError`` in a task, say) reports what its Python side saw next,
often a ``ConnectionRefusedError`` from py4j; the cause is in the JVM's lines of the same log, after
Spark's ``Query ... terminated with error``.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["TAIL_BYTES", "driver_log", "query_failure"]

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
