"""``redislog``: a PySpark Python streaming data source reading a :class:`PartitionedLog`.

Usage::

    spark.dataSource.register(RedisLogDataSource)
    df = (spark.readStream.format("redislog")
          .option("redis_url", url).option("topic", "nexmark")
          .option("numPartitions", 2).option("maxRecordsPerBatch", 0).load())

Options:

- ``redis_url`` (required), ``topic`` (required).
- ``numPartitions``: Spark input partitions, i.e. tasks of the source stage (default K, the log's
  partitions). The batch's records are cut into that many contiguous, equal chunks over the
  partitions in order: fewer tasks than K make one task read several log partitions, more split
  a partition's offset range.
- ``maxRecordsPerBatch``: admission control, most records per micro-batch (0 = unlimited), spread
  over the log partitions in proportion to their backlog.
- ``startingOffsets``: ``earliest`` (default; offset 0 of every partition) or ``latest``.

Offsets are ``{"p0": n0, ..., "pK-1": nK-1}`` (last offset included). Schema:
``value STRING, partition INT, offset LONG``; replays read the same offsets, so they are
deterministic. ``latestOffset`` takes the read limit (PySpark >= 4.2 admission control) and
``reportLatestOffset`` returns the true latest offsets, so a query progress shows
``sources[0].latestOffset`` (backlog = latestOffset - endOffset).

Executors need pyarrow and ``PYSPARK_PYTHON`` pointing at an interpreter that can import
``sparkclient`` (the runner sets both).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

import redis
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows
from pyspark.sql.types import StructType

from sparkclient.demo.redislog import PartitionedLog

log = logging.getLogger(__name__)

SCHEMA = "value STRING, partition INT, offset LONG"

#: One slice of a log partition: (partition index, start offset exclusive, end offset inclusive).
Slice = tuple[int, int, int]


def plan_slices(start: dict[str, int], end: dict[str, int], num_tasks: int) -> list[list[Slice]]:
    """Cut the records of ``(start, end]`` into ``num_tasks`` contiguous chunks of equal size.

    The ranges of partitions p0, p1, ... are laid end to end and cut every ``ceil(total/num_tasks)``
    records, so the chunks differ by at most one chunk size and tasks read whole partitions where
    they can. Returns exactly ``num_tasks`` lists (some may be empty when there are few records).

    Raises:
        ValueError: ``num_tasks < 1``.
    """
    if num_tasks < 1:
        raise ValueError(f"numPartitions must be >= 1, got {num_tasks}")
    ranges = [(int(name[1:]), int(start.get(name, 0)), int(end[name]))
              for name in sorted(end, key=lambda n: int(n[1:]))]
    ranges = [(p, s, e) for p, s, e in ranges if e > s]
    total = sum(e - s for _, s, e in ranges)
    chunks: list[list[Slice]] = [[] for _ in range(num_tasks)]
    if total == 0:
        return chunks
    chunk_size = -(-total // num_tasks)
    task, room = 0, chunk_size
    for p, s, e in ranges:
        while s < e:
            take = min(room, e - s)
            chunks[task].append((p, s, s + take))
            s += take
            room -= take
            if room == 0 and task < num_tasks - 1:
                task, room = task + 1, chunk_size
    return chunks


def limit_offsets(start: dict[str, int], latest: dict[str, int], max_rows: int) -> dict[str, int]:
    """The end offsets reading at most ``max_rows`` records from ``start``, spread over partitions
    in proportion to their backlog (largest remainders get the leftover rows)."""
    backlog = {name: max(0, latest[name] - int(start.get(name, 0))) for name in latest}
    total = sum(backlog.values())
    if total <= max_rows:
        return dict(latest)
    share = {name: max_rows * b // total for name, b in backlog.items()}
    leftover = max_rows - sum(share.values())
    by_remainder = sorted(backlog, key=lambda n: (max_rows * backlog[n]) % total, reverse=True)
    for name in by_remainder[:leftover]:
        share[name] += 1
    return {name: int(start.get(name, 0)) + share[name] for name in latest}


class RedisLogStreamReader(DataSourceStreamReader):
    """Reads micro-batches from the log; pickled to executors (the Redis client is lazy)."""

    def __init__(self, options: dict[str, str]) -> None:
        # Spark hands options over case-insensitively (lower-cased keys): match them that way
        options = {key.lower(): value for key, value in options.items()}
        try:
            self.redis_url = options["redis_url"]
            self.topic = options["topic"]
        except KeyError as exc:
            raise ValueError(f"the redislog source needs option {exc.args[0]!r}") from None
        self.max_records_per_batch = int(options.get("maxrecordsperbatch", "0") or 0)
        if self.max_records_per_batch < 0:
            raise ValueError(f"maxRecordsPerBatch must be >= 0 (0 = unlimited), got {self.max_records_per_batch}")
        self.starting_offsets = options.get("startingoffsets", "earliest").lower()
        if self.starting_offsets not in ("earliest", "latest"):
            raise ValueError(f"startingOffsets must be 'earliest' or 'latest', got {self.starting_offsets!r}")
        self._log: Any = None
        self.log_partitions = self._partitioned_log().partitions()
        num = options.get("numpartitions")
        self.num_tasks = int(num) if num else self.log_partitions
        if self.num_tasks < 1:
            raise ValueError(f"numPartitions must be >= 1, got {self.num_tasks}")
        self._latest: dict[str, int] | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_log"] = None  # Redis connections do not pickle; executors open their own
        return state

    def _partitioned_log(self) -> Any:
        if self._log is None:
            self._log = PartitionedLog(redis.Redis.from_url(self.redis_url, decode_responses=True), self.topic)
        return self._log

    def initialOffset(self) -> dict:
        if self.starting_offsets == "latest":
            return self._partitioned_log().latest_offsets()
        return {f"p{p}": 0 for p in range(self.log_partitions)}

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.max_records_per_batch > 0:
            return ReadMaxRows(self.max_records_per_batch)
        return ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        latest = self._partitioned_log().latest_offsets()
        # never move backwards (e.g. a log recreated under a running query)
        latest = {name: max(value, int(start.get(name, 0))) for name, value in latest.items()}
        self._latest = latest
        if isinstance(limit, ReadMaxRows):
            return limit_offsets(start, latest, limit.max_rows)
        return latest

    def reportLatestOffset(self) -> dict | None:
        return self._latest if self._latest is not None else self._partitioned_log().latest_offsets()

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        return [InputPartition(chunk) for chunk in plan_slices(start, end, self.num_tasks)]

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        plog = self._partitioned_log()
        for p, s, e in partition.value:
            records, lost = plog.read(p, s, e)
            if lost:
                log.warning("log %s partition %d: %d records in (%d, %d] were trimmed by retention",
                            self.topic, p, lost, s, e)
            for offset, value in records:
                yield (value, p, offset)

    def commit(self, end: dict) -> None:
        """Nothing to do: the log keeps records until retention trims them."""


class RedisLogDataSource(DataSource):
    """The ``redislog`` data source (streaming reads only)."""

    @classmethod
    def name(cls) -> str:
        return "redislog"

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return RedisLogStreamReader(dict(self.options))
