"""The simulator's bookkeeping: a source's log with retention, and the per-vertex sums of one collect
interval. Shared by both engines (:mod:`scaling.sim.continuous_engine`, :mod:`scaling.sim.micro_batch_engine`)."""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

__all__ = ["EPSILON_RECORDS", "Accumulator", "SourceLog"]

#: Records below this count as none.
EPSILON_RECORDS = 1e-6


class SourceLog:
    """A source's partitioned log, as chunks ``[arrival_time_s, records]`` oldest first; ``total``
    records held, ``lost`` records expired unread."""

    __slots__ = ("chunks", "total", "lost")

    def __init__(self) -> None:
        self.chunks: deque[list[float]] = deque()
        self.total = 0.0
        self.lost = 0.0

    def append(self, at_s: float, records: float) -> None:
        """``records`` arrived at ``at_s`` seconds."""
        if records > 0:
            self.chunks.append([at_s, records])
            self.total += records

    def expire(self, now_s: float, retention_s: float) -> None:
        """Drop (and count as lost) the records older than ``retention_s`` at ``now_s``."""
        cutoff = now_s - retention_s
        while self.chunks and self.chunks[0][0] < cutoff:
            self.lost += self.chunks[0][1]
            self.total -= self.chunks.popleft()[1]
        if not self.chunks:
            self.total = 0.0

    def take(self, records: float) -> float:
        """Remove up to ``records`` oldest records; returns the arrival time of the oldest taken."""
        oldest = self.chunks[0][0] if self.chunks else math.inf
        left = records
        while left > EPSILON_RECORDS and self.chunks:
            chunk = self.chunks[0]
            if chunk[1] <= left:
                left -= chunk[1]
                self.chunks.popleft()
            else:
                chunk[1] -= left
                left = 0.0
        self.total = max(0.0, self.total - (records - left)) if self.chunks else 0.0
        return oldest

    def oldest_s(self) -> float:
        """Arrival time of the oldest record held, seconds; ``inf`` when empty."""
        return self.chunks[0][0] if self.chunks and self.total > EPSILON_RECORDS else math.inf


@dataclass
class Accumulator:
    """One vertex's sums over a collect interval: records in and out, busy core-seconds, the busiest
    task's busy seconds (micro-batch: paced, ``scaling.values.metrics.paced_task_busy_s``), and for a source
    the records that arrived and (a generator) could not be emitted."""

    records_in: float = 0.0
    records_out: float = 0.0
    busy_core_s: float = 0.0
    busy_max_s: float = 0.0
    arrived: float = 0.0
    unmet: float = 0.0
