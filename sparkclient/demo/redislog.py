"""A partitioned, replayable log on Redis Streams (a small Kafka stand-in for the demo).

Layout (see :mod:`sparkclient.contract.keys`):

- K partitions, each a Redis Stream ``ss:log:{topic}:{p}`` whose entry ids are ``0-{offset}``.
  Offsets are dense and 1-based per partition: offset n is the n-th record ever appended to that
  partition. Redis 6.2 has no ``0-*`` auto-sequence, so a Lua script assigns the ids from the
  hash ``ss:log:{topic}:offsets`` (``{"p0": last offset, ...}``) in the same atomic step as the
  XADDs. Several writers, and restarted writers, therefore continue the same offset sequence.
- Meta hash ``ss:log:{topic}:meta`` = ``{partitions, retention}``.
- Retention keeps at most ``retention`` entries per partition (exact ``XTRIM MAXLEN`` after
  each append; 0 = unlimited).
- A record a reader needed but retention had already trimmed is *lost*; ``ss:log:{topic}:lost``
  counts them. Lost offsets are recorded as merged intervals per partition, so a replayed batch,
  or the same range read again with a different split, never counts an offset twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis

from sparkclient.contract import keys

# KEYS[1] = offsets hash, KEYS[2 .. K+1] = the partition streams.
# ARGV[1] = retention (0 = unlimited), then pairs (partition, payload).
# Returns the number of records appended.
_APPEND_LUA = """
local retention = tonumber(ARGV[1])
local counts = {}
for i = 2, #ARGV, 2 do
  local p = tonumber(ARGV[i])
  counts[p] = (counts[p] or 0) + 1
end
local next_offset = {}
for p, n in pairs(counts) do
  next_offset[p] = redis.call('HINCRBY', KEYS[1], 'p' .. p, n) - n
end
for i = 2, #ARGV, 2 do
  local p = tonumber(ARGV[i])
  next_offset[p] = next_offset[p] + 1
  redis.call('XADD', KEYS[p + 2], '0-' .. next_offset[p], 'v', ARGV[i + 1])
end
if retention > 0 then
  for p, _ in pairs(counts) do
    redis.call('XTRIM', KEYS[p + 2], 'MAXLEN', retention)
  end
end
return (#ARGV - 1) / 2
"""

# KEYS[1] = hash {partition field: JSON list of disjoint [lo, hi] intervals}, KEYS[2] = lost counter.
# ARGV = field, lo, hi (inclusive). Adds the offsets of [lo, hi] not yet counted; returns that number.
_RECORD_LOST_LUA = """
local raw = redis.call('HGET', KEYS[1], ARGV[1])
local intervals = {}
if raw then intervals = cjson.decode(raw) end
local lo = tonumber(ARGV[2])
local hi = tonumber(ARGV[3])
local covered = 0
local merged_lo, merged_hi = lo, hi
local out = {}
for _, r in ipairs(intervals) do
  local a, b = tonumber(r[1]), tonumber(r[2])
  if b < merged_lo - 1 or a > merged_hi + 1 then
    table.insert(out, {a, b})
  else
    local ol, oh = math.max(a, lo), math.min(b, hi)
    if oh >= ol then covered = covered + (oh - ol + 1) end
    merged_lo, merged_hi = math.min(merged_lo, a), math.max(merged_hi, b)
  end
end
table.insert(out, {merged_lo, merged_hi})
table.sort(out, function(x, y) return x[1] < y[1] end)
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(out))
local added = (hi - lo + 1) - covered
if added > 0 then redis.call('INCRBY', KEYS[2], added) end
return added
"""

_READ_PAGE = 5000


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _offset_of(entry_id: Any) -> int:
    return int(_text(entry_id).split("-", 1)[1])


class LogNotFoundError(LookupError):
    """The log has no meta hash: nobody created it yet."""


class PartitionedLog:
    """A handle on the partitioned log ``topic`` (cheap to create; holds no state but the client).

    Args:
        client: a Redis client (``decode_responses`` either way).
        topic: the log's name, e.g. ``"nexmark"``.
    """

    def __init__(self, client: redis.Redis, topic: str) -> None:
        if not topic or ":" in topic:
            raise ValueError(f"topic must be a non-empty name without ':', got {topic!r}")
        self.client = client
        self.topic = topic
        self._partitions: int | None = None
        self._retention: int | None = None
        self._append_script = client.register_script(_APPEND_LUA)
        self._lost_script = client.register_script(_RECORD_LOST_LUA)

    # --- lifecycle -----------------------------------------------------------------------

    def create(self, partitions: int, retention: int = 0) -> None:
        """Create the log, or check that an existing one has ``partitions`` partitions.

        Idempotent. The retention of an existing log is updated to ``retention``.

        Args:
            partitions: K, the number of partitions (>= 1).
            retention: the most entries kept per partition; 0 keeps everything.

        Raises:
            ValueError: ``partitions < 1`` or ``retention < 0``, or the log exists with a different
                number of partitions (changing K would re-key every record: delete the log's
                ``ss:log:{topic}:*`` keys first, or use a new topic).
        """
        if partitions < 1:
            raise ValueError(f"partitions must be >= 1, got {partitions}")
        if retention < 0:
            raise ValueError(f"retention must be >= 0 (0 = unlimited), got {retention}")
        meta_key = keys.log_meta(self.topic)
        created = self.client.hsetnx(meta_key, "partitions", partitions)
        if not created:
            existing = int(_text(self.client.hget(meta_key, "partitions")))
            if existing != partitions:
                raise ValueError(
                    f"log {self.topic!r} already exists with {existing} partitions, not {partitions}: "
                    f"use --partitions {existing}, or a new topic, or delete the keys "
                    f"'{keys.PREFIX}log:{self.topic}:*' first"
                )
        self.client.hset(meta_key, "retention", retention)
        self._partitions, self._retention = partitions, retention

    def exists(self) -> bool:
        """Whether the log's meta hash exists."""
        return bool(self.client.exists(keys.log_meta(self.topic)))

    def _load_meta(self) -> None:
        meta = self.client.hgetall(keys.log_meta(self.topic))
        if not meta:
            raise LogNotFoundError(
                f"log {self.topic!r} does not exist (no {keys.log_meta(self.topic)}): start the "
                f"generator (python -m sparkclient.demo.generator --topic {self.topic}) or call create()"
            )
        meta = {_text(k): _text(v) for k, v in meta.items()}
        self._partitions = int(meta["partitions"])
        self._retention = int(meta.get("retention", 0))

    def partitions(self) -> int:
        """K, the number of partitions.

        Raises:
            LogNotFoundError: the log does not exist.
        """
        if self._partitions is None:
            self._load_meta()
        assert self._partitions is not None
        return self._partitions

    def retention(self) -> int:
        """The most entries kept per partition (0 = unlimited), as read from the meta hash.

        Raises:
            LogNotFoundError: the log does not exist.
        """
        self._load_meta()
        assert self._retention is not None
        return self._retention

    # --- writing -------------------------------------------------------------------------

    def append(self, records: Sequence[tuple[int, bytes | str]],
               pipeline: redis.client.Pipeline | None = None) -> int:
        """Append ``records`` = ``[(partition, payload), ...]`` atomically (one Lua script).

        Args:
            records: partition index (0-based) and payload of each record, in order.
            pipeline: when given, the script is queued on it (e.g. a MULTI/EXEC pipeline that
                also updates counters) and the caller executes it; nothing is sent here.

        Returns:
            The number of records queued or appended.

        Raises:
            ValueError: a partition index is outside ``[0, K)``.
            LogNotFoundError: the log does not exist.
        """
        if not records:
            return 0
        k = self.partitions()
        args: list[Any] = [self._retention or 0]
        for partition, payload in records:
            if not 0 <= partition < k:
                raise ValueError(f"partition {partition} is outside [0, {k}) of log {self.topic!r}")
            args.append(partition)
            args.append(payload)
        script_keys = [keys.log_offsets(self.topic)] + [keys.log_stream(self.topic, p) for p in range(k)]
        self._append_script(keys=script_keys, args=args, client=pipeline or self.client)
        return len(records)

    # --- reading -------------------------------------------------------------------------

    def latest_offsets(self) -> dict[str, int]:
        """The last offset of each partition, ``{"p0": n0, ..., "pK-1": nK-1}`` (0 when empty).

        Raises:
            LogNotFoundError: the log does not exist.
        """
        k = self.partitions()
        raw = self.client.hgetall(keys.log_offsets(self.topic))
        current = {_text(f): int(_text(v)) for f, v in raw.items()}
        return {f"p{p}": current.get(f"p{p}", 0) for p in range(k)}

    def read(self, partition: int, start_exclusive: int,
             end_inclusive: int) -> tuple[list[tuple[int, str]], int]:
        """Read the records with offsets in ``(start_exclusive, end_inclusive]`` of one partition.

        Records that retention trimmed away are reported as lost and added (once per offset,
        whoever reads them and however often) to :meth:`lost`.

        Args:
            partition: the partition index (0-based).
            start_exclusive: the offset already consumed (0 = from the beginning).
            end_inclusive: the last offset to read; must not exceed the partition's latest offset.

        Returns:
            ``([(offset, payload), ...], lost_count)``, payloads decoded as UTF-8.

        Raises:
            ValueError: ``end_inclusive < start_exclusive`` or a negative offset.
        """
        if start_exclusive < 0 or end_inclusive < start_exclusive:
            raise ValueError(
                f"bad offset range ({start_exclusive}, {end_inclusive}] for partition {partition}"
            )
        if end_inclusive == start_exclusive:
            return [], 0
        stream = keys.log_stream(self.topic, partition)
        records: list[tuple[int, str]] = []
        cursor = start_exclusive + 1
        while cursor <= end_inclusive:
            page = self.client.xrange(stream, min=f"0-{cursor}", max=f"0-{end_inclusive}",
                                      count=_READ_PAGE)
            if not page:
                break
            for entry_id, fields in page:
                value = fields.get("v", fields.get(b"v"))
                records.append((_offset_of(entry_id), _text(value)))
            cursor = records[-1][0] + 1
            if len(page) < _READ_PAGE:
                break
        first_needed = start_exclusive + 1
        if records:
            last_missing = records[0][0] - 1
        else:
            latest = self.latest_offsets().get(f"p{partition}", 0)
            last_missing = min(end_inclusive, latest)
        lost = 0
        if last_missing >= first_needed:
            lost = last_missing - first_needed + 1
            self._record_lost(partition, first_needed, last_missing)
        return records, lost

    def _record_lost(self, partition: int, lo: int, hi: int) -> int:
        return int(self._lost_script(
            keys=[keys.log_lost_upto(self.topic), keys.log_lost(self.topic)],
            args=[f"p{partition}", lo, hi],
        ))

    def lost(self) -> int:
        """How many records readers needed after retention had trimmed them (distinct offsets)."""
        value = self.client.get(keys.log_lost(self.topic))
        return int(_text(value)) if value is not None else 0

    def delete(self) -> None:
        """Delete every key of the log (partitions, meta, offsets, lost counters)."""
        k = self._partitions
        if k is None:
            try:
                k = self.partitions()
            except LogNotFoundError:
                k = 0
        names = [keys.log_meta(self.topic), keys.log_offsets(self.topic), keys.log_lost(self.topic),
                 keys.log_lost_upto(self.topic)] + [keys.log_stream(self.topic, p) for p in range(k)]
        self.client.delete(*names)
        self._partitions = self._retention = None
