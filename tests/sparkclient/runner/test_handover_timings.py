"""Where a warm handover's time goes: each step stamps the handover hash, and the standby keeps the
stamps when it takes the checkpoint (``sparkclient.runner.handover``)."""

from __future__ import annotations

import threading

import pytest

from sparkclient.contract import keys
from sparkclient.contract.standby import READY_TIMES_KEPT, read_ready_times_s, record_ready_s
from sparkclient.runner.handover import (
    HandoverStep,
    keep_timings,
    mark,
    mark_as,
    open_prepared,
    read_timings,
    request_standby,
    wait_for_release,
)


def test_the_standby_keeps_every_steps_stamp_in_order_when_it_takes_the_checkpoint(redis_client):
    job = "timings"
    ready = threading.Timer(0.2, lambda: [mark(redis_client, job, step) for step in (
        HandoverStep.SPAWNED, HandoverStep.SESSION, HandoverStep.WARM, HandoverStep.PREPARED)]
        + [mark(redis_client, job, HandoverStep.READY, state="ready")])
    ready.start()
    assert request_standby(redis_client, job, "c1", {"cores": 2}, threading.Event(), timeout_s=10)[1] is None
    mark(redis_client, job, HandoverStep.RELEASED, state="released")
    kept = keep_timings(redis_client, job)
    redis_client.delete(keys.handover(job))  # the standby deletes the hash; the stamps stay
    assert read_timings(redis_client, job) == kept
    assert list(kept) == [step.value for step in HandoverStep]
    assert list(kept.values()) == sorted(kept.values())


def test_no_kept_timings_read_as_none(redis_client):
    assert read_timings(redis_client, "never") == {}
    redis_client.set(keys.handover_timings("broken"), "[1, 2")
    assert read_timings(redis_client, "broken") == {}


def test_a_standby_keeps_its_measured_start_when_it_says_ready(redis_client):
    """Its start (process start to ready) becomes the job's newest measured one, for the web app's
    expectation of a later standby's start on this host."""
    job = "starts"
    open_prepared(redis_client, job, "prepared-1-a", "1", {"cores": 2})
    spawned = float(redis_client.hget(keys.handover(job), "spawned_at"))
    stop = threading.Event()
    waiter = threading.Thread(target=wait_for_release, args=(redis_client, job, "prepared-1-a", stop))
    waiter.start()
    try:
        while not read_ready_times_s(redis_client, job):
            waiter.join(0.02)
            assert waiter.is_alive()
    finally:
        stop.set()
        waiter.join()
    ready = float(redis_client.hget(keys.handover(job), "ready_at"))
    assert read_ready_times_s(redis_client, job) == [pytest.approx(ready - spawned, abs=1e-3)]
    # a restarted running driver that asks again re-marks it ready: the start is kept once
    mark_as(redis_client, job, "prepared-1-a", state="requested")
    assert len(read_ready_times_s(redis_client, job)) == 1


def test_the_measured_starts_are_the_newest_few_and_refuse_a_non_figure(redis_client):
    for took_s in range(10):
        record_ready_s(redis_client, "bounded", float(took_s))
    assert read_ready_times_s(redis_client, "bounded") == [float(9 - i) for i in range(READY_TIMES_KEPT)]
    redis_client.lpush(keys.standby_ready_times("bounded"), "nan", "x")
    assert read_ready_times_s(redis_client, "bounded") == [9.0, 8.0, 7.0]  # the newest five, two unreadable
    assert read_ready_times_s(redis_client, "never") == []
    with pytest.raises(ValueError, match="finite number of seconds"):
        record_ready_s(redis_client, "bounded", float("nan"))
    with pytest.raises(ValueError, match="finite number of seconds"):
        record_ready_s(redis_client, "bounded", -1.0)
