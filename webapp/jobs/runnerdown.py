"""Why a job's runner is down, as a coded health reason (``Job.health_reason``): its driver crashed,
or crashes in a loop (``sparkclient.runner.crashloop``), with what killed it. The words are in
``webapp.proposals.reason_text``."""

from __future__ import annotations

from enum import StrEnum

from sparkclient.contract.messages import RunnerState, RunnerStatus

__all__ = ["RunnerDown", "runner_down_reason"]


class RunnerDown(StrEnum):
    """Why the runner is down (``Job.health_reason["code"]``); data: ``exit_code``, ``exception``,
    ``message``, ``log_path``, ``crashes``, ``window_s``, ``restart_at`` (epoch s)."""

    CRASHED = "runner_crashed"
    CRASH_LOOPING = "runner_crash_looping"


_CODES = {RunnerState.FAILED: RunnerDown.CRASHED, RunnerState.CRASH_LOOPING: RunnerDown.CRASH_LOOPING}


def runner_down_reason(status: RunnerStatus) -> dict | None:
    """``{"code", "data"}`` for a runner whose supervisor reported a crash (state ``failed`` or
    ``crash_looping`` with an exit code), else None."""
    code = _CODES.get(RunnerState(status.state)) if status.state else None
    if code is None or not status.exit_code:
        return None
    return {"code": str(code), "data": {
        "exit_code": status.exit_code, "exception": status.exception, "message": status.exception_message,
        "log_path": status.log_path, "crashes": status.crashes, "window_s": status.crash_window_s,
        "restart_at": status.restart_at}}
