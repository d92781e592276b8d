"""The recorded Spark 4.3.0 capture replayed in the present (``sparkclient.demo.replay``) and served by
fake UIs (``sparkclient.demo.fakeui``): the collector reads it as a live query, every window, across
the replay's cycles."""

from __future__ import annotations

import json

import httpx
import pytest

from sparkclient.collector.collect import collect_sample
from sparkclient.collector.rest import SparkRestClient
from sparkclient.demo.fakeui import FakeUis, replay_answer
from sparkclient.demo.replay import Capture, Replay, parse_time

START_S = 1_800_000_000.0


@pytest.fixture(scope="module")
def replay() -> Replay:
    return Replay(Capture.load(), start_s=START_S)


def test_batches_repeat_with_increasing_ids_times_and_offsets(replay):
    docs = [replay.progress(k) for k in range(3 * replay.n)]
    ids = [d["batchId"] for d in docs]
    times = [parse_time(d["timestamp"]) for d in docs]
    offsets = [(d["sources"][0]["startOffset"], d["sources"][0]["endOffset"]) for d in docs]
    assert ids == list(range(replay.first, replay.first + 3 * replay.n))
    assert all(b - a == pytest.approx(replay.trigger_s, abs=0.01) for a, b in zip(times, times[1:]))
    assert times[0] == pytest.approx(START_S, abs=0.001)
    # the rate source's offsets are its seconds since creation: contiguous across cycles
    assert all(b[0] == a[1] for a, b in zip(offsets, offsets[1:]))
    assert replay.completed(START_S - 1) == -1
    assert replay.completed(replay.end_s(7)) == 7 and replay.completed(replay.end_s(7) - 0.001) == 6


def test_the_jobs_and_stages_listed_are_the_completed_batches(replay):
    now = replay.end_s(2 * replay.n + 5) + 0.01
    jobs = json.loads(replay.body("jobs", now))
    stages = {s["stageId"]: s for s in json.loads(replay.body("stages", now))}
    batches = [int(j["description"].rsplit("batch = ", 1)[1]) for j in jobs]
    newest = replay.first + 2 * replay.n + 5
    assert batches == list(range(newest, newest - replay.n, -1))
    assert len({j["jobId"] for j in jobs}) == len(jobs)
    for job in jobs:
        assert all(f"batch = {job['description'].rsplit('batch = ', 1)[1]}" in stages[s]["description"]
                   for s in job["stageIds"])
        assert parse_time(job["completionTime"]) <= now


@pytest.mark.parametrize("cycle_offset", [0, 5, 11])  # windows inside one cycle and across two
def test_the_collector_reads_every_window_of_the_replay_as_a_live_query(replay, cycle_offset):
    clock = [0.0]
    uis = FakeUis(1, replay_answer(replay, clock=lambda: clock[0])).start()
    try:
        k = 2 * replay.n + cycle_offset
        clock[0] = now = replay.end_s(k) + 0.5
        progresses = [replay.progress(i) for i in range(k + 1) if replay.end_s(i) > now - 90]
        client = SparkRestClient(uis.urls[0])
        try:
            sample = collect_sample(client, replay.capture.app_id, progresses, run_id=replay.capture.run_id,
                                    trigger_interval_s=replay.trigger_s, window_s=15.0, now_s=now)
        finally:
            client.close()
    finally:
        uis.stop()
    assert sample.errors == ()
    assert sample.batches in (7, 8)  # 2 s batches whose end times vary with their durations
    assert sample.arrival_rate_per_s == pytest.approx(2000.0)  # the rate source's 2000 rows/s
    assert [v.tasks for v in sample.vertices] == [2, 4]  # 2 source partitions, 4 shuffle partitions
    assert "MicroBatchScan" in sample.vertices[0].name and "StateStoreSave" in sample.vertices[1].name
    assert all(0 < v.busy_max_s * v.tasks <= v.busy_s * 1.2 for v in sample.vertices)


def test_unknown_paths_and_ids_are_json_404s(replay):
    uis = FakeUis(2, replay_answer(replay, clock=lambda: replay.end_s(30) + 1)).start()
    try:
        base = f"{uis.urls[1]}/api/v1/applications/{replay.capture.app_id}"
        assert httpx.get(f"{base}/sql/1").status_code == 404
        assert httpx.get(f"{base}/stages/1/0/taskSummary").status_code == 404
        assert httpx.get(f"{base}/environment").json() == {"message": "no such resource"}
        assert httpx.get(f"{base}/sql/x").status_code == 400
        assert httpx.get(f"{uis.urls[0]}/api/v1/applications").json()[0]["id"] == replay.capture.app_id
    finally:
        uis.stop()
    assert uis.counts == {1: 4, 0: 1}
