"""The demo pipeline's sink: an SQLite table of windowed counts, written idempotently.

Table ``window_counts(window_start INTEGER epoch ms, key INTEGER, count INTEGER,
PRIMARY KEY(window_start, key))``. Each micro-batch of the update-mode aggregation carries the
*current* count of every window it changed, so an UPSERT (``ON CONFLICT DO UPDATE SET
count = excluded.count``) makes a replayed batch harmless: the sink converges to the same rows.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from contextlib import closing
from pathlib import Path

_SCHEMA = """
CREATE TABLE IF NOT EXISTS window_counts (
    window_start INTEGER NOT NULL,
    key INTEGER NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (window_start, key)
)
"""

_UPSERT = """
INSERT INTO window_counts (window_start, key, count) VALUES (?, ?, ?)
ON CONFLICT (window_start, key) DO UPDATE SET count = excluded.count
"""


def _connect(sink_path: str | Path) -> sqlite3.Connection:
    conn = sqlite3.connect(str(sink_path), timeout=30.0)
    conn.execute("PRAGMA journal_mode=WAL")
    return conn


def ensure_sink(sink_path: str | Path) -> None:
    """Create the database file and the ``window_counts`` table if missing."""
    Path(sink_path).parent.mkdir(parents=True, exist_ok=True)
    with closing(_connect(sink_path)) as conn, conn:
        conn.execute(_SCHEMA)


def upsert_counts(sink_path: str | Path, rows: Iterable[tuple[int, int, int]]) -> int:
    """Upsert ``(window_start_ms, key, count)`` rows in one transaction; returns the row count."""
    batch = list(rows)
    if not batch:
        return 0
    with closing(_connect(sink_path)) as conn, conn:
        conn.execute(_SCHEMA)
        conn.executemany(_UPSERT, batch)
    return len(batch)


def sink_total(sink_path: str | Path) -> int:
    """``SUM(count)`` over the table: the number of bids counted so far (0 if nothing yet)."""
    if not Path(sink_path).exists():
        return 0
    with closing(_connect(sink_path)) as conn:
        try:
            (total,) = conn.execute("SELECT COALESCE(SUM(count), 0) FROM window_counts").fetchone()
        except sqlite3.OperationalError:  # table not created yet
            return 0
    return int(total)


def read_counts(sink_path: str | Path) -> list[tuple[int, int, int]]:
    """All ``(window_start_ms, key, count)`` rows, ordered by window and key."""
    if not Path(sink_path).exists():
        return []
    with closing(_connect(sink_path)) as conn:
        return [tuple(r) for r in conn.execute(
            "SELECT window_start, key, count FROM window_counts ORDER BY window_start, key")]
