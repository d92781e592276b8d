"""A command whose path raises (the driver's JVM died under it) is never left without an answer
(:meth:`sparkclient.runner.rescale.RescalePaths.leave_to_next_driver`, called by the driver's
``_handle``), on a real ``redis-server``."""

from __future__ import annotations

import json

import pytest

from sparkclient.contract import control, keys
from sparkclient.contract.messages import FailureCode, RescaleCommand, RescalePath, StatusUpdate
from sparkclient.contract.spec import Knob, KnobTarget
from sparkclient.runner.driver import Driver
from sparkclient.runner.handover import read_pending, record_pending

JOB = "orders"
KNOBS = [Knob("cores", default=1, min=1, max=4, sets=KnobTarget.EXECUTORS),
         Knob("state_partitions", default=2, min=1, max=8, sets=KnobTarget.STATE_PARTITIONS),
         Knob("memory_mb", default=512, min=512, max=4096, sets=KnobTarget.MEMORY)]
RUNNING = {"cores": 1, "state_partitions": 2, "memory_mb": 512}
DIED = ConnectionRefusedError(111, "Connection refused")


class _Applied:
    def answer(self, command, running):
        return None

    def record(self, key, knobs, result):
        pass


def _driver(client, *, state_on_checkpoint: bool = False) -> Driver:
    """A driver with Spark left out: its knobs, Redis and the command bookkeeping ``_handle`` uses."""
    driver = object.__new__(Driver)
    driver.spec = type("Spec", (), {"knobs": KNOBS})()
    driver.job, driver.client, driver.values, driver.capacity = JOB, client, dict(RUNNING), 0
    driver.executors_knob, driver.shuffle_knob = KNOBS[0], KNOBS[1]
    driver.checkpoint = "/checkpoint" if state_on_checkpoint else ""
    driver.applied, driver._in_flight = _Applied(), {}
    return driver


def _handle_dying(driver: Driver, knobs: dict, command_id: str = "c1") -> None:
    """``_handle`` of one command whose path raises as a dead JVM's py4j does."""
    def rescale(command):
        raise DIED
    driver._rescale = rescale
    command = RescaleCommand(id=command_id, knobs=knobs, idempotency_key="k1")
    with pytest.raises(ConnectionRefusedError):
        driver._handle("1-0", {"json": command.to_json()})


def test_a_checked_command_becomes_a_pending_driver_restart_with_its_knobs_stored(redis_client):
    control.write_status(redis_client, JOB, StatusUpdate(last_batch_at=1_000.0))
    _handle_dying(_driver(redis_client), {**RUNNING, "memory_mb": 1024})
    pending = read_pending(redis_client, JOB)
    assert (pending["id"], pending["path"], pending["knobs"]) == ("c1", RescalePath.DRIVER_RESTART, {
        **RUNNING, "memory_mb": 1024})
    assert pending["last_batch_end_epoch_s"] == 1_000.0 and pending["idempotency_key"] == "k1"
    assert json.loads(redis_client.get(keys.config(JOB)))["memory_mb"] == 1024  # the next driver starts on it
    assert control.get_result(redis_client, JOB, "c1") is None  # its first batch answers
    assert redis_client.get(keys.control_cursor(JOB)) == "1-0"


def test_without_a_published_batch_the_downtime_counts_from_when_the_command_was_taken(redis_client):
    _handle_dying(_driver(redis_client), {**RUNNING, "cores": 2})
    pending = read_pending(redis_client, JOB)
    assert pending["last_batch_end_epoch_s"] is None and pending["requested_at"] > 0


def test_a_handover_already_pending_is_left_as_it_is(redis_client):
    handover = {"id": "c0", "path": RescalePath.DRIVER_HANDOVER.value, "knobs": RUNNING}
    record_pending(redis_client, JOB, handover, RUNNING)
    _handle_dying(_driver(redis_client), {**RUNNING, "memory_mb": 1024})
    assert read_pending(redis_client, JOB)["id"] == "c0"
    assert control.get_result(redis_client, JOB, "c1") is None


def test_a_command_outside_the_bounds_fails_as_it_would_have(redis_client):
    _handle_dying(_driver(redis_client), {**RUNNING, "cores": 9})
    assert read_pending(redis_client, JOB) is None
    assert control.get_result(redis_client, JOB, "c1").code is FailureCode.OUT_OF_BOUNDS


def test_a_command_that_needs_the_state_repartitioned_fails_with_the_driver_s_error(redis_client, monkeypatch):
    monkeypatch.setattr("sparkclient.runner.rescale.checkpoint_has_state", lambda checkpoint: True)
    _handle_dying(_driver(redis_client, state_on_checkpoint=True), {**RUNNING, "state_partitions": 4})
    result = control.get_result(redis_client, JOB, "c1")
    assert read_pending(redis_client, JOB) is None
    assert result.code is FailureCode.DRIVER_CRASHED and "ConnectionRefusedError" in result.error
    assert json.loads(redis_client.get(keys.config(JOB)) or "{}").get("state_partitions") in (None, 2)
