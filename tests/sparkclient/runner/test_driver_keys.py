"""The driver's use of its idempotency-key store: a repeat is answered without touching the query,
and an apply is kept before its result goes to Redis (no Spark: the rescale itself is stubbed)."""

from __future__ import annotations

import pytest
import redis

from sparkclient.contract import control
from sparkclient.contract.messages import RescaleCommand, RescalePath, RescaleResult, ResultStatus
from sparkclient.demo.redisproc import free_port
from sparkclient.runner.applied import AppliedKeys
from sparkclient.runner.driver import Driver

JOB = "keys"
KNOBS = {"cores": 2, "shuffle_partitions": 8}


class StubbedDriver(Driver):
    """A driver without Spark: its rescale writes the result a restart's first batch would."""

    def __init__(self, client: redis.Redis, workdir) -> None:
        self.job, self.client, self.values = JOB, client, dict(KNOBS)
        self.applied = AppliedKeys.in_workdir(workdir)
        self._in_flight = {}
        self.rescaled: list[str] = []

    def _rescale(self, command: RescaleCommand) -> None:
        self.rescaled.append(command.id)
        self._write_result(RescaleResult(id=command.id, status=ResultStatus.SUCCEEDED, path=RescalePath.IN_PROCESS,
                                         downtime_s=2.0, pause_s=1.5, knobs=command.knobs))


def _entry(command: RescaleCommand) -> dict[str, str]:
    return {"json": command.to_json()}


def test_a_repeat_is_answered_from_the_store_and_does_not_rescale(redis_client, tmp_path):
    driver = StubbedDriver(redis_client, tmp_path)
    first = RescaleCommand(id="p1-a1", knobs=KNOBS, idempotency_key="p1-r1")
    driver._handle("1-0", _entry(first))
    repeat = RescaleCommand(id="p1-a2", knobs=KNOBS, idempotency_key="p1-r1")
    driver._handle("2-0", _entry(repeat))
    assert driver.rescaled == ["p1-a1"]
    answer = control.get_result(redis_client, JOB, "p1-a2")
    assert answer.replay_of == "p1-a1" and answer.succeeded and (answer.path, answer.pause_s) == ("in-process", 1.5)
    other = RescaleCommand(id="p2-a1", knobs=KNOBS, idempotency_key="p2-r1")
    driver._handle("3-0", _entry(other))  # another rescale applies
    assert driver.rescaled == ["p1-a1", "p2-a1"]


def test_an_apply_is_kept_even_when_its_result_cannot_be_written(redis_client, tmp_path):
    down = redis.Redis(port=free_port(), decode_responses=True, socket_connect_timeout=0.5)  # nothing listens
    driver = StubbedDriver(down, tmp_path)
    command = RescaleCommand(id="p1-a1", knobs=KNOBS, idempotency_key="p1-r1")
    driver._in_flight[command.id] = (command.idempotency_key, command.knobs)
    with pytest.raises(redis.ConnectionError):
        driver._rescale(command)  # the restart happened; Redis is away when its result is written
    restarted = StubbedDriver(redis_client, tmp_path)  # a new driver on the same workdir, Redis back
    restarted._handle("5-0", _entry(RescaleCommand(id="p1-a2", knobs=KNOBS, idempotency_key="p1-r1")))
    assert restarted.rescaled == []
    assert control.get_result(redis_client, JOB, "p1-a2").replay_of == "p1-a1"
