"""A stand-in for ``sparkclient.runner.driver`` on the real Redis control channel (no Spark), speaking the same
typed protocol (:mod:`sparkclient.contract.control`): it reads ``ss:control:{job}`` and writes each command's
outcome where ``wait_result`` looks for it.

``answer(command, index)`` returns the result fields (``status``, ``error``, ...) for the
``index``-th command (0-based), or None to never answer it (a runner that lost the command).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import redis

from sparkclient.contract import keys
from sparkclient.contract.control import FailureCode, RescaleCommand, RescalePath, RescaleResult, ResultStatus, write_result


def succeed(command: dict, index: int) -> dict:
    return {"status": "succeeded", "path": "in-process", "downtime_s": 0.4}


class FakeRunner(threading.Thread):
    def __init__(self, redis_url: str, job: str, answer: Callable[[dict, int], dict | None] = succeed,
                 delay_s: float = 0.0) -> None:
        super().__init__(daemon=True, name=f"fake-runner-{job}")
        self.client = redis.Redis.from_url(redis_url, decode_responses=True)
        self.job, self.answer, self.delay_s = job, answer, delay_s
        self.commands: list[dict] = []
        self.received_at: list[float] = []
        self.stop_event = threading.Event()

    def run(self) -> None:
        cursor = "0-0"
        while not self.stop_event.is_set():
            response = self.client.xread({keys.control(self.job): cursor}, block=200, count=10)
            for _stream, entries in response or []:
                for entry_id, fields in entries:
                    cursor = entry_id
                    parsed = RescaleCommand.from_json(fields["json"])
                    command = {"id": parsed.id, "knobs": parsed.knobs, "config": parsed.knobs}
                    index = len(self.commands)
                    self.commands.append(command)
                    self.received_at.append(time.monotonic())
                    outcome = self.answer(command, index)
                    if outcome is None:
                        continue
                    if self.delay_s:
                        time.sleep(self.delay_s)
                    ok = outcome.get("status") == "succeeded"
                    result = RescaleResult(
                        id=parsed.id, status=ResultStatus(outcome.get("status", "succeeded")),
                        path=RescalePath(outcome.get("path", "in-process")),
                        downtime_s=float(outcome.get("downtime_s", 0.0)), knobs=parsed.knobs if ok else None,
                        error=outcome.get("error") or "", code=None if ok else FailureCode.RESTART_FAILED)
                    write_result(self.client, self.job, result)

    def stop(self) -> None:
        self.stop_event.set()
        self.join(timeout=5)


def record_answers(timeout_s: float = 10.0, poll_s: float = 0.05) -> dict:
    """Run the reconcile beat (in-process) until no execution attempt waits for its runner, as the
    beat does every ``SCALER_RECONCILE_INTERVAL_S``; returns the beat's summed counts. An execution
    attempt sends and returns, the beat records the runner's answer (issue 17)."""
    from webapp.loop.reconcile import workflow_reconcile  # noqa: PLC0415 - needs Django set up
    from webapp.proposals.models import Execution  # noqa: PLC0415

    deadline = time.monotonic() + timeout_s
    totals: dict[str, int] = {}
    while True:
        for key, count in workflow_reconcile().items():
            totals[key] = totals.get(key, 0) + count
        waiting = Execution.objects.filter(status="running", attempt_state="sent").exists()
        if not waiting or time.monotonic() > deadline:
            return totals
        time.sleep(poll_s)
