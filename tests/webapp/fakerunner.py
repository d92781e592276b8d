"""A stand-in for ``sparkclient.runner.driver`` on the real Redis control channel (no Spark), speaking the same
typed protocol (:mod:`sparkclient.contract.control`): it reads ``ss:control:{job}`` and writes each command's
outcome where ``wait_result`` looks for it.

``answer(command, index)`` returns the result fields (``status``, ``error``, ...) for the
``index``-th command (0-based), or None to never answer it (a runner that lost the command).
``first_batch_after_s`` in them dates the first batch on the new configuration (the result's
``first_batch_at``) that many seconds after the command was received.

With a ``workdir`` it keeps the idempotency keys it applied in the real runner's store
(:class:`sparkclient.runner.applied.AppliedKeys`, the same code the driver uses): a repeat of a key is
answered with the first result, as a replay, and is not applied again (unless ``values``, the knob
values it runs with, are no longer those of that apply). ``applied`` lists the commands
it applied, ``replays`` those it answered from the store. ``hold``, when given, is waited on between
applying a command and writing its result (a test stops Redis meanwhile: the write is lost, as a
real runner's is in an outage; ``lost`` lists those results).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import redis

from sparkclient.contract import keys
from sparkclient.contract.control import write_result
from sparkclient.contract.messages import FailureCode, RescaleCommand, RescalePath, RescaleResult, ResultStatus
from sparkclient.runner.applied import AppliedKeys


def succeed(command: dict, index: int) -> dict:
    return {"status": "succeeded", "path": "in-process", "downtime_s": 0.4}


class FakeRunner(threading.Thread):
    def __init__(self, redis_url: str, job: str, answer: Callable[[dict, int], dict | None] = succeed,
                 delay_s: float = 0.0, workdir: Path | None = None, hold: threading.Event | None = None,
                 values: dict[str, int] | None = None) -> None:
        super().__init__(daemon=True, name=f"fake-runner-{job}")
        self.client = redis.Redis.from_url(redis_url, decode_responses=True)
        self.job, self.answer, self.delay_s, self.hold = job, answer, delay_s, hold
        self.store = AppliedKeys.in_workdir(workdir) if workdir is not None else None
        self.values = values  # the knob values it runs with (None: not known), those of its last apply
        self.commands: list[dict] = []
        self.received_at: list[float] = []
        self.answered_at: list[float] = []  # time.monotonic() of each result written
        self.applied: list[RescaleCommand] = []
        self.replays: list[RescaleResult] = []
        self.lost: list[RescaleResult] = []
        self.stop_event = threading.Event()

    def run(self) -> None:
        cursor = "0-0"
        while not self.stop_event.is_set():
            try:
                response = self.client.xread({keys.control(self.job): cursor}, block=200, count=10)
            except (redis.ConnectionError, redis.TimeoutError):  # Redis is away: a runner waits for it
                self.stop_event.wait(0.2)
                continue
            for _stream, entries in response or []:
                for entry_id, fields in entries:
                    cursor = entry_id
                    self._handle(RescaleCommand.from_json(fields["json"]))

    def _handle(self, parsed: RescaleCommand) -> None:
        command = {"id": parsed.id, "knobs": parsed.knobs, "config": parsed.knobs}
        index = len(self.commands)
        self.commands.append(command)
        self.received_at.append(time.monotonic())
        received = time.time()
        replay = self.store.answer(parsed, self.values) if self.store is not None else None
        if replay is not None:
            self.replays.append(replay)
            self._write(replay)
            return
        outcome = self.answer(command, index)
        if outcome is None:
            return
        if self.delay_s:
            time.sleep(self.delay_s)
        ok = outcome.get("status") == "succeeded"
        result = RescaleResult(
            id=parsed.id, status=ResultStatus(outcome.get("status", "succeeded")),
            path=RescalePath(outcome.get("path", "in-process")),
            downtime_s=float(outcome.get("downtime_s", 0.0)), pause_s=float(outcome.get("pause_s", 0.0)),
            knobs=parsed.knobs if ok else None,
            error=outcome.get("error") or "", code=None if ok else FailureCode.RESTART_FAILED,
            first_batch_at=received + outcome["first_batch_after_s"] if "first_batch_after_s" in outcome else None)
        if self.store is not None:
            self.store.record(parsed.idempotency_key, parsed.knobs, result)
        if ok:
            self.values = dict(parsed.knobs)
            self.applied.append(parsed)
        if self.hold is not None:
            self.hold.wait(timeout=60)
        self._write(result)

    def _write(self, result: RescaleResult) -> None:
        try:
            write_result(self.client, self.job, result)
            self.answered_at.append(time.monotonic())
        except (redis.ConnectionError, redis.TimeoutError):
            self.lost.append(result)

    def stop(self) -> None:
        self.stop_event.set()
        self.join(timeout=5)


def record_answers(timeout_s: float = 10.0, poll_s: float = 0.05) -> dict:
    """Run the reconcile beat (in-process) until no execution attempt waits for its runner, as the
    beat does every ``SCALER_RECONCILE_INTERVAL_S``; returns the beat's summed counts. An execution
    attempt sends and returns, the beat records the runner's answer."""
    from webapp.loop.reconcile import workflow_reconcile  # noqa: PLC0415 - needs Django set up
    from webapp.proposals.models import Execution  # noqa: PLC0415 - needs Django set up

    deadline = time.monotonic() + timeout_s
    totals: dict[str, int] = {}
    while True:
        for key, count in workflow_reconcile().items():
            totals[key] = totals.get(key, 0) + count
        waiting = Execution.objects.filter(status="running", attempt_state="sent").exists()
        if not waiting or time.monotonic() > deadline:
            return totals
        time.sleep(poll_s)
