"""Tests of the partitioned log on a real Redis server."""

from __future__ import annotations

import pytest

from sparkclient.contract import keys
from sparkclient.demo.redislog import LogNotFoundError, PartitionedLog


def test_offsets_are_dense_and_one_based_per_partition(redis_client):
    log = PartitionedLog(redis_client, "t")
    log.create(partitions=3)
    log.append([(0, "a"), (1, "b"), (0, "c"), (2, "d"), (0, "e")])
    log.append([(1, "f")])

    assert log.latest_offsets() == {"p0": 3, "p1": 2, "p2": 1}
    assert redis_client.xrange(keys.log_stream("t", 0)) == [
        ("0-1", {"v": "a"}), ("0-2", {"v": "c"}), ("0-3", {"v": "e"})]


def test_offsets_continue_across_handles(redis_client):
    PartitionedLog(redis_client, "t").create(2)
    PartitionedLog(redis_client, "t").append([(0, "a"), (1, "b")])
    second = PartitionedLog(redis_client, "t")  # e.g. a restarted generator
    second.append([(0, "c")])
    assert second.latest_offsets() == {"p0": 2, "p1": 1}
    assert second.read(0, 0, 2) == ([(1, "a"), (2, "c")], 0)


def test_latest_offsets_of_empty_log_are_zero(redis_client):
    log = PartitionedLog(redis_client, "t")
    log.create(4)
    assert log.latest_offsets() == {"p0": 0, "p1": 0, "p2": 0, "p3": 0}


def test_read_ranges_are_start_exclusive_end_inclusive(redis_client):
    log = PartitionedLog(redis_client, "t")
    log.create(1)
    log.append([(0, f"r{i}") for i in range(1, 11)])
    assert log.read(0, 3, 5) == ([(4, "r4"), (5, "r5")], 0)
    assert log.read(0, 5, 5) == ([], 0)
    records, lost = log.read(0, 0, 10)
    assert [o for o, _ in records] == list(range(1, 11)) and lost == 0
    with pytest.raises(ValueError, match="bad offset range"):
        log.read(0, 5, 4)


def test_create_is_idempotent_and_refuses_other_partition_count(redis_client):
    log = PartitionedLog(redis_client, "t")
    log.create(2, retention=10)
    log.create(2, retention=20)
    assert log.retention() == 20
    with pytest.raises(ValueError, match="already exists with 2 partitions"):
        PartitionedLog(redis_client, "t").create(3)


def test_missing_log_raises_a_clear_error(redis_client):
    with pytest.raises(LogNotFoundError, match="start the generator"):
        PartitionedLog(redis_client, "nope").latest_offsets()


def test_append_refuses_unknown_partition(redis_client):
    log = PartitionedLog(redis_client, "t")
    log.create(2)
    with pytest.raises(ValueError, match="outside"):
        log.append([(2, "x")])


def test_retention_trims_and_reader_counts_lost_once(redis_client):
    log = PartitionedLog(redis_client, "t")
    log.create(1, retention=5)
    log.append([(0, f"r{i}") for i in range(1, 13)])  # offsets 1..12, keeps 8..12
    assert redis_client.xlen(keys.log_stream("t", 0)) == 5
    assert log.latest_offsets() == {"p0": 12}

    records, lost = log.read(0, 2, 10)  # needs 3..10, 3..7 are gone
    assert [o for o, _ in records] == [8, 9, 10]
    assert lost == 5
    assert log.lost() == 5

    log.read(0, 2, 10)  # a replayed batch does not count again
    assert log.lost() == 5
    log.read(0, 0, 4)  # overlapping, different split: only 1..2 are new
    assert log.lost() == 7
    log.read(0, 4, 6)  # fully inside counted range
    assert log.lost() == 7


def test_fully_trimmed_range_is_lost(redis_client):
    log = PartitionedLog(redis_client, "t")
    log.create(1, retention=2)
    log.append([(0, "x")] * 6)
    assert log.read(0, 0, 3) == ([], 3)
    assert log.lost() == 3


def test_read_pages_large_ranges(redis_client):
    log = PartitionedLog(redis_client, "t")
    log.create(1)
    log.append([(0, "x")] * 12_000)
    records, lost = log.read(0, 100, 11_900)
    assert len(records) == 11_800 and records[0][0] == 101 and records[-1][0] == 11_900 and lost == 0
