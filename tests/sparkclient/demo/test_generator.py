"""Tests of the Nexmark generator on a real Redis server."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest

from sparkclient.contract import keys
from sparkclient.contract.load import get_rate, set_rate
from sparkclient.demo.generator import Generator, event_type, read_counts
from sparkclient.demo.redislog import PartitionedLog
from tests.repo import ROOT


def _all_events(client, topic):
    log = PartitionedLog(client, topic)
    events = []
    for p, latest in enumerate(log.latest_offsets().values()):
        records, lost = log.read(p, 0, latest)
        assert lost == 0
        events.extend((p, off, json.loads(v)) for off, v in records)
    return events


def test_event_types_follow_the_1_3_46_cycle():
    types = [event_type(n) for n in range(100)]
    assert types.count("person") == 2 and types.count("auction") == 6 and types.count("bid") == 92
    assert types[:5] == ["person", "auction", "auction", "auction", "bid"]


def test_counts_match_the_log_and_references_exist(redis_client):
    gen = Generator(redis_client, "nx", partitions=3)
    for _ in range(10):
        gen.write_batch(50)
    counts = read_counts(redis_client, "nx")
    assert counts == {"person": 10, "auction": 30, "bid": 460, "total": 500}

    events = _all_events(redis_client, "nx")
    by_type = {t: [e for _, _, e in events if e["type"] == t] for t in ("person", "auction", "bid")}
    assert {t: len(v) for t, v in by_type.items()} == {"person": 10, "auction": 30, "bid": 460}
    persons = {e["id"] for e in by_type["person"]}
    auctions = {e["id"] for e in by_type["auction"]}
    assert persons == set(range(1, 11)) and auctions == set(range(1, 31))
    for bid in by_type["bid"]:
        assert bid["auction"] in auctions and bid["bidder"] in persons
        assert {"price", "date_time"} <= bid.keys()
    # round-robin: partitions differ by at most one record
    assert sorted(PartitionedLog(redis_client, "nx").latest_offsets().values()) == [166, 167, 167]


def test_restarted_generator_continues_ids_and_offsets(redis_client):
    Generator(redis_client, "nx", partitions=2).write_batch(50)
    again = Generator(redis_client, "nx", partitions=2)
    again.write_batch(50)
    events = [e for _, _, e in _all_events(redis_client, "nx")]
    assert sorted(e["id"] for e in events if e["type"] == "person") == [1, 2]
    assert sorted(e["id"] for e in events if e["type"] == "auction") == [1, 2, 3, 4, 5, 6]
    assert read_counts(redis_client, "nx")["total"] == 100


def test_set_rate_validates(redis_client):
    set_rate(redis_client, "nx", 12.5)
    assert get_rate(redis_client, "nx") == 12.5
    with pytest.raises(ValueError, match="rate must be"):
        set_rate(redis_client, "nx", -1)


def wait_for_total(redis_client, topic: str, at_least: int, *, stall_s: float = 30.0) -> int:
    """Poll the topic's total until it reaches ``at_least``; fail only when it stops growing for
    ``stall_s`` (bounded by progress, not by a wall-clock budget a loaded machine would miss)."""
    last, last_change = -1, time.monotonic()
    while True:
        total = read_counts(redis_client, topic)["total"]
        if total >= at_least:
            return total
        if total != last:
            last, last_change = total, time.monotonic()
        assert time.monotonic() - last_change < stall_s, f"stuck at {total} records, waiting for {at_least}"
        time.sleep(0.05)


def test_rate_is_followed_and_zero_pauses(redis_client):
    """The generator writes at most the set rate (an upper bound: a loaded machine can only be
    slower), keeps writing, stops at rate 0, and resumes at the new rate."""
    set_rate(redis_client, "nx", 200)
    gen = Generator(redis_client, "nx", partitions=2)
    thread = threading.Thread(target=gen.run, daemon=True)
    started = time.monotonic()
    thread.start()
    try:
        first = wait_for_total(redis_client, "nx", 200)
        assert first <= 200 * (time.monotonic() - started) + 200, first  # the rate, plus one tick's burst

        set_rate(redis_client, "nx", 0)
        time.sleep(0.6)  # > RATE_POLL_S: the pause is seen
        paused = read_counts(redis_client, "nx")["total"]
        time.sleep(0.6)
        assert read_counts(redis_client, "nx")["total"] == paused

        set_rate(redis_client, "nx", 1000)
        wait_for_total(redis_client, "nx", paused + 300)
    finally:
        gen.stop()
        thread.join(timeout=5)
    assert not thread.is_alive()


def test_cli_stops_on_sigterm_and_counts_are_exact(redis_server, redis_client):
    proc = subprocess.Popen(
        [sys.executable, "-m", "sparkclient.demo.generator", "--redis-url", redis_server.url, "--topic", "cli",
         "--partitions", "4", "--rate", "500"],
        cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    try:
        deadline = time.monotonic() + 15
        while read_counts(redis_client, "cli")["total"] < 300 and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0
    counts = read_counts(redis_client, "cli")
    events = _all_events(redis_client, "cli")
    assert counts["total"] == len(events) >= 300
    assert counts["bid"] == sum(1 for _, _, e in events if e["type"] == "bid")


def test_cli_max_events(redis_server, redis_client):
    subprocess.run(
        [sys.executable, "-m", "sparkclient.demo.generator", "--redis-url", redis_server.url, "--topic", "m",
         "--partitions", "2", "--rate", "2000", "--max-events", "250", "--retention", "100"],
        cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, check=True, timeout=30,
    )
    assert read_counts(redis_client, "m")["total"] == 250
    assert redis_client.xlen(keys.log_stream("m", 0)) == 100
