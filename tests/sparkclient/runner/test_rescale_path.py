"""The path a rescale reports names the offline state repartition when one happened."""

from __future__ import annotations

import pytest

from sparkclient.contract import keys
from sparkclient.contract.messages import RescaleCommand, RescalePath
from sparkclient.runner import rescale
from sparkclient.runner.rescale import RescalePaths


class _FirstBatch:
    def __init__(self) -> None:
        self.paths: list[RescalePath] = []

    def expect(self, *, path, **_kwargs) -> None:
        self.paths.append(path)


class _Hashes:
    """The one Redis call ``_restart`` makes itself: the status write (``HSET``), recorded."""

    def __init__(self) -> None:
        self.written: list[tuple[str, dict]] = []

    def hset(self, key: str, mapping: dict) -> None:
        self.written.append((key, mapping))


class _Driver(RescalePaths):
    """The driver state ``_restart`` reads, with Spark and Redis left out."""

    def __init__(self) -> None:
        self.first_batch = _FirstBatch()
        self.query = type("Query", (), {"runId": "run-1"})()
        self.values = {"state_partitions": 2}
        self.job = "orders"
        self.client = _Hashes()

    def _repartition_offline(self, command, old, new, last_end):
        return True, last_end

    def _start_query(self):
        return self.query

    def _commit_values(self, values) -> None:
        self.values = dict(values)


@pytest.mark.parametrize(("repartition", "path"), [(True, RescalePath.STATE_REPARTITION),
                                                   (False, RescalePath.IN_PROCESS)])
def test_a_restart_in_the_same_driver_reports_whether_it_repartitioned_state(monkeypatch, repartition, path):
    monkeypatch.setattr(rescale, "stop_between_batches", lambda *a, **k: 1.0)
    driver = _Driver()
    command = RescaleCommand(id="c1", knobs={"state_partitions": 3}, idempotency_key="k1")
    driver._restart(command, {"state_partitions": 2}, {"state_partitions": 3}, repartition=repartition,
                    new_driver=False)
    assert driver.first_batch.paths == [path]
    assert driver.client.written == [(keys.runner("orders"), {"state": "restarting"})]


_BATCH = {"runId": "run-1", "batchId": 0, "durationMs": {"addBatch": 900, "triggerExecution": 1000}}
_IDLE = {"runId": "run-1", "batchId": 0, "durationMs": {"triggerExecution": 2}}


@pytest.mark.parametrize(("progresses", "answered"), [([], False), ([_IDLE], False), ([_BATCH, _IDLE], True)])
def test_nothing_to_change_is_answered_only_once_a_batch_ran_on_the_configuration(progresses, answered):
    """Before a batch of the running query completed, "nothing to change" waits for that batch (or its
    timeout's ``no-first-batch``): an idle trigger is not a batch."""
    driver = _Driver()
    driver.query.recentProgress = progresses
    written = []
    driver._write_result = written.append
    driver._nothing_to_change(RescaleCommand(id="c1", knobs={"state_partitions": 2}, idempotency_key="k1"),
                              {"state_partitions": 2})
    assert [(r.status, r.path) for r in written] == ([("succeeded", RescalePath.NONE)] if answered else [])
    assert driver.first_batch.paths == ([] if answered else [RescalePath.NONE])
