"""Where a warm handover's time goes: each step stamps the handover hash, and the standby keeps the
stamps when it takes the checkpoint (``sparkclient.runner.handover``)."""

from __future__ import annotations

import threading

from sparkclient.contract import keys
from sparkclient.runner.handover import HandoverStep, keep_timings, mark, read_timings, request_standby


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
