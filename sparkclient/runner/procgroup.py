"""End a process group: SIGTERM, then SIGKILL to what survives (psutil).

The supervisor's drivers, the standalone cluster's master and worker, and the demo's children each
run in a session of their own, so their process group holds them and everything they started (a
JVM, Python workers, a pool). :func:`end_process_group` is the one place that ends such a group;
:mod:`sparkclient.runner.supervisor`, :mod:`sparkclient.demo.cluster` and ``sparkclient.demo.processes`` call it.
"""

from __future__ import annotations

import logging
import os
import signal

import psutil

__all__ = ["end_process_group", "group_members", "yield_cpu"]

log = logging.getLogger(__name__)


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except (ProcessLookupError, PermissionError):
        return None


def group_members(pgid: int) -> list[psutil.Process]:
    """The processes of process group ``pgid`` (zombies included), read from ``/proc``."""
    return [p for p in psutil.process_iter(["pid"]) if _pgid(p.pid) == pgid]


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _signal(processes: list[psutil.Process], sig: signal.Signals) -> None:
    for proc in processes:
        try:
            proc.send_signal(sig)  # psutil checks that the pid still names the same process
        except psutil.NoSuchProcess:
            pass


def end_process_group(pgid: int, *, grace_s: float = 0.0, term_wait_s: float = 5.0,
                      kill_wait_s: float = 5.0, what: str = "process group") -> list[int]:
    """End every process of group ``pgid``: wait ``grace_s`` seconds for them to exit on their own,
    SIGTERM the rest, wait ``term_wait_s`` seconds, SIGKILL what survives and wait ``kill_wait_s``
    seconds; a last SIGKILL goes to anything that joined the group meanwhile. Our own exited
    children are reaped on the way (their ``Popen.returncode`` then reads 0).

    ``what`` names the group in the warnings logged when a signal is needed after a grace period.
    Returns the pids still alive at the end (normally none).
    """
    members = group_members(pgid)
    if grace_s > 0:
        _gone, alive = psutil.wait_procs(members, timeout=grace_s)
    else:
        alive = members
    for sig, wait_s in ((signal.SIGTERM, term_wait_s), (signal.SIGKILL, kill_wait_s)):
        if not alive:
            break
        if grace_s > 0 or sig == signal.SIGKILL:
            log.warning("%s %d outlived its grace: sending %s to %s", what, pgid, sig.name, [p.pid for p in alive])
        _signal(alive, sig)
        _gone, alive = psutil.wait_procs(alive, timeout=wait_s)
    late = [p for p in group_members(pgid) if _running(p)]
    if late:
        _signal(late, signal.SIGKILL)
        _gone, still = psutil.wait_procs(late, timeout=kill_wait_s)
        alive = list({p.pid: p for p in [*alive, *still]}.values())
    return [p.pid for p in alive]


def yield_cpu(pid: int | None = None, niceness: int = 19) -> None:
    """Give the CPU away: set ``niceness`` on process ``pid`` (this one by default) and every
    descendant (its JVM, Python workers). A driver that handed over does this while it shuts down,
    so that the new driver's first batches get the cores. Processes that vanish are skipped."""
    try:
        root = psutil.Process(pid or os.getpid())
        processes = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    for proc in processes:
        try:
            proc.nice(niceness)
        except psutil.Error:
            continue
