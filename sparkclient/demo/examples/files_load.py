"""Load for the file-source example: writes JSON click files into its inbox at a steady rate.

    python -m sparkclient.demo.examples.files_load --inbox var/jobs/files/inbox --rate 200 [--file-rows 100] \
        [--redis-url redis://... --topic files]

Each file holds ``--file-rows`` clicks (one JSON object a line); files are written to a temporary name
and renamed, so the file source never reads a half-written file. ``--seconds`` bounds the run. With
``--redis-url`` (default ``$SPARKSCALER_REDIS_URL``), the rate (rows/s) can be changed while it runs
through the generator-rate key of ``--topic`` (the dashboard's load control, ``manage.py demo_load``);
the last written total goes to the generator-count key, so a test can compare the sink with what was
written.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import redis

from scaling.policy.numbers import is_finite_number
from sparkclient.contract import keys
from sparkclient.contract.credentials import control_redis_url


def write_file(inbox: Path, seq: int, rows: int, rng: random.Random) -> None:
    """Write one file of ``rows`` clicks atomically (temp name, then rename)."""
    now = time.time()
    lines = [json.dumps({"user": rng.randrange(10_000), "page": f"/p/{rng.randrange(50)}",
                         "ts": datetime.fromtimestamp(now, UTC).isoformat(), "ms": int(now * 1000)})
             for _ in range(rows)]
    tmp = inbox / f".clicks-{seq:09d}.json.tmp"
    tmp.write_text("\n".join(lines) + "\n")
    os.replace(tmp, inbox / f"clicks-{seq:09d}.json")


def read_rate(client, topic: str, default: float) -> float:
    """The rate set for ``topic`` (rows/s), else ``default``; a non-finite or out-of-range value is ignored."""
    if client is None:
        return default
    try:
        value = float(client.get(keys.gen_rate(topic)) or default)
    except (ValueError, TypeError, redis.RedisError):
        return default
    return value if is_finite_number(value) and 0 <= value <= 1_000_000 else default


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inbox", required=True)
    parser.add_argument("--rate", type=float, default=100.0, help="clicks per second")
    parser.add_argument("--file-rows", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=0.0, help="stop after this long (0: run until killed)")
    parser.add_argument("--redis-url", default=control_redis_url() if os.environ.get("SPARKSCALER_REDIS_URL") else None,
                        help="read the rate from (and count rows into) this Redis (default: $SPARKSCALER_REDIS_URL "
                             "with the password of the file $SPARKSCALER_REDIS_PASSWORD_FILE, which keeps the "
                             "password out of the process list; none when unset)")
    parser.add_argument("--topic", default="files")
    args = parser.parse_args(argv)
    if not (is_finite_number(args.rate) and args.rate >= 0 and args.file_rows >= 1):
        parser.error("--rate must be finite and >= 0, --file-rows >= 1")
    inbox = Path(args.inbox)
    inbox.mkdir(parents=True, exist_ok=True)
    client = redis.Redis.from_url(args.redis_url, decode_responses=True) if args.redis_url else None
    if client is not None:
        client.setnx(keys.gen_rate(args.topic), args.rate)
    rng = random.Random(7)
    seq = max([int(p.stem.split("-")[1]) for p in inbox.glob("clicks-*.json")] or [0]) + 1
    started, owed = time.monotonic(), 0.0
    last = started
    while not args.seconds or time.monotonic() - started < args.seconds:
        now = time.monotonic()
        owed += read_rate(client, args.topic, args.rate) * (now - last)
        last = now
        while owed >= args.file_rows:
            write_file(inbox, seq, args.file_rows, rng)
            seq, owed = seq + 1, owed - args.file_rows
            if client is not None:
                client.hincrby(keys.gen_counts(args.topic), "total", args.file_rows)
        time.sleep(0.1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
