"""A restart's first batch finishes its command (``sparkclient.runner.firstbatch``): with its pause,
downtime and the end of that batch, the end of the rescale's time to effect."""

from __future__ import annotations

from sparkclient.contract.messages import FailureCode, RescalePath, ResultStatus, StandbyUse
from sparkclient.runner.firstbatch import FirstBatchWatch


def _progress_at(run_id: str, start: str, trigger_ms: int) -> dict:
    return {"runId": run_id, "timestamp": start, "durationMs": {"addBatch": 10, "triggerExecution": trigger_ms}}


def test_the_first_batch_of_a_new_run_reports_when_it_ended():
    written = []
    watch = FirstBatchWatch(written.append)
    last_end = 1_700_000_000.0  # 2023-11-14T22:13:20Z
    watch.expect(command_id="c1", path=RescalePath.IN_PROCESS, knobs={"cores": 2}, requested_at=last_end + 0.5,
                 last_batch_end=last_end, old_run_id="old")
    assert watch.on_batch(_progress_at("old", "2023-11-14T22:13:21.000Z", 500)) is None  # the stopped run's
    assert watch.on_batch(_progress_at("new", "2023-11-14T22:13:22.000Z", 1500)) is not None
    [result] = written
    assert result.succeeded and result.first_batch_at == last_end + 3.5
    assert (result.pause_s, result.downtime_s) == (2.0, 3.5)
    assert result.standby is StandbyUse.NONE  # restarted in this driver


def test_a_handovers_first_batch_reports_the_standby_it_ran_on():
    written = []
    watch = FirstBatchWatch(written.append)
    watch.expect(command_id="c1", path=RescalePath.DRIVER_HANDOVER, knobs={"cores": 2}, requested_at=1_700_000_000.0,
                 last_batch_end=None, old_run_id=None, standby=StandbyUse.READY)
    watch.on_batch(_progress_at("new", "2023-11-14T22:13:22.000Z", 1500))
    assert [r.standby for r in written] == [StandbyUse.READY]


def test_a_nothing_to_change_waiting_for_its_first_batch_fails_when_the_driver_stops():
    """Nothing pends for the next driver: the stop answers it, so the web app's back-off decides."""
    written = []
    watch = FirstBatchWatch(written.append)
    watch.expect(command_id="c1", path=RescalePath.NONE, knobs={"p": 2}, requested_at=1.0, last_batch_end=None,
                 old_run_id=None)
    watch.abandon()
    assert [(r.status, r.code) for r in written] == [(ResultStatus.FAILED, FailureCode.DRIVER_STOPPED)]
