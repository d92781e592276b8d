"""A Nexmark-style event generator writing to a :class:`~sparkclient.demo.redislog.PartitionedLog`.

The Nexmark model: persons, auctions and bids in the proportion 1:3:46 out of every 50 events.
Every bid references an auction and a person that were generated before it; auctions reference an
existing seller. Each event is a JSON object with ``type`` ("person" | "auction" | "bid"),
its ids and ``date_time`` = generation time in epoch milliseconds.

Runtime control (see :mod:`sparkclient.contract.keys`):

- ``ss:gen:{topic}:rate`` (float, events/s) is re-read every :data:`RATE_POLL_S` seconds;
  0 pauses the generator (no writes at all). :func:`sparkclient.contract.load.set_rate` sets it.
- ``ss:gen:{topic}:counts`` = ``{person, auction, bid, total}`` is incremented in the same
  MULTI/EXEC transaction as the log append, so after the generator stops ``counts["bid"]`` is
  exactly the number of bid records in the log. The counts also give the next event number and
  ids, so a restarted generator continues the sequence (run one generator per topic at a time).

CLI::

    python -m sparkclient.demo.generator [--redis-url URL] --topic nexmark --partitions 4 --rate 200 \
        [--retention N] [--max-events N]

The Redis URL is ``--redis-url``, else ``$SPARKSCALER_REDIS_URL`` (with the password of the file
``$SPARKSCALER_REDIS_PASSWORD_FILE`` when set), else redis://127.0.0.1:6379/0.

runs until SIGTERM/SIGINT (clean exit, the batch in hand is written) or ``--max-events``.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import signal
import threading
import time
from dataclasses import dataclass

import redis

from sparkclient.contract import keys
from sparkclient.contract.credentials import control_redis_url
from sparkclient.contract.load import get_rate, set_rate
from sparkclient.demo.redislog import PartitionedLog

log = logging.getLogger(__name__)

#: Nexmark proportions: out of every 50 events, 1 person, 3 auctions, 46 bids.
PERSON_PROPORTION = 1
AUCTION_PROPORTION = 3
BID_PROPORTION = 46
PROPORTION_DENOMINATOR = PERSON_PROPORTION + AUCTION_PROPORTION + BID_PROPORTION

#: Seconds between two writes (small batches keep event times fresh).
BATCH_INTERVAL_S = 0.05
#: Seconds between two reads of the rate key.
RATE_POLL_S = 0.25
#: Most events one batch may carry, as seconds of the current rate (bounds bursts after stalls).
MAX_BURST_S = 0.5
#: Number of recent auctions bids pick from (Nexmark's "hot" auctions).
HOT_AUCTIONS = 100
#: Number of recent persons bidders pick from.
ACTIVE_PEOPLE = 1000

_FIRST_NAMES = ["Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"]
_LAST_NAMES = ["Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"]
_CITIES = ["Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent"]
_STATES = ["AZ", "CA", "ID", "OR", "WA", "WY"]
_CHANNELS = ["Google", "Facebook", "Baidu", "Apple"]


def read_counts(client: redis.Redis, topic: str) -> dict[str, int]:
    """Events written so far: ``{"person", "auction", "bid", "total"}`` (0 when absent)."""
    raw = client.hgetall(keys.gen_counts(topic))
    decoded = {(k.decode() if isinstance(k, bytes) else k): int(v) for k, v in raw.items()}
    return {name: decoded.get(name, 0) for name in ("person", "auction", "bid", "total")}


def event_type(event_number: int) -> str:
    """The type of the ``event_number``-th event (0-based) in Nexmark's 1:3:46 cycle."""
    position = event_number % PROPORTION_DENOMINATOR
    if position < PERSON_PROPORTION:
        return "person"
    if position < PERSON_PROPORTION + AUCTION_PROPORTION:
        return "auction"
    return "bid"


@dataclass
class NexmarkModel:
    """The generator's position: the next event number and the ids handed out so far.

    ``next_event`` = events generated; ``persons``/``auctions`` = ids handed out (ids are 1-based,
    so the last person's id is ``persons``).
    """

    next_event: int = 0
    persons: int = 0
    auctions: int = 0
    seed: int = 42

    def __post_init__(self) -> None:
        self._random = random.Random(self.seed + self.next_event)

    @classmethod
    def from_counts(cls, counts: dict[str, int], seed: int = 42) -> NexmarkModel:
        """Continue after the events recorded in ``counts`` (see :func:`read_counts`)."""
        return cls(next_event=counts["total"], persons=counts["person"], auctions=counts["auction"], seed=seed)

    def next_event_dict(self, now_ms: int) -> dict:
        """Generate the next event as a JSON-ready dict with ``date_time = now_ms``."""
        rnd = self._random
        kind = event_type(self.next_event)
        self.next_event += 1
        if kind == "person":
            self.persons += 1
            name = f"{rnd.choice(_FIRST_NAMES)} {rnd.choice(_LAST_NAMES)}"
            return {
                "type": "person", "id": self.persons, "name": name,
                "email_address": f"{name.replace(' ', '.').lower()}@example.com",
                "credit_card": " ".join(f"{rnd.randrange(10000):04d}" for _ in range(4)),
                "city": rnd.choice(_CITIES), "state": rnd.choice(_STATES), "date_time": now_ms,
            }
        if kind == "auction":
            self.auctions += 1
            initial_bid = rnd.randint(1, 1000)
            return {
                "type": "auction", "id": self.auctions, "item_name": f"item-{self.auctions}",
                "description": "a Nexmark auction", "initial_bid": initial_bid,
                "reserve": initial_bid + rnd.randint(1, 1000), "date_time": now_ms,
                "expires": now_ms + rnd.randint(10_000, 60_000),
                "seller": self._existing_person(rnd), "category": rnd.randint(10, 19),
            }
        auction = max(1, self.auctions - rnd.randrange(min(self.auctions, HOT_AUCTIONS)))
        return {
            "type": "bid", "auction": auction, "bidder": self._existing_person(rnd),
            "price": rnd.randint(1, 10_000), "channel": rnd.choice(_CHANNELS),
            "url": f"https://www.nexmark.com/item.htm?query=1&channel_id={rnd.randrange(10_000)}",
            "date_time": now_ms, "extra": "",
        }

    def _existing_person(self, rnd: random.Random) -> int:
        return max(1, self.persons - rnd.randrange(min(self.persons, ACTIVE_PEOPLE)))


class Generator:
    """Writes Nexmark events to the log ``topic`` at the rate held in Redis.

    Args:
        client: a Redis client.
        topic: the log's name.
        partitions: K, used to create the log if it does not exist yet.
        retention: entries kept per partition (0 = unlimited).
    """

    def __init__(self, client: redis.Redis, topic: str, partitions: int, retention: int = 0) -> None:
        self.client = client
        self.topic = topic
        self.log = PartitionedLog(client, topic)
        self.log.create(partitions, retention)
        self.partitions = partitions
        self.model = NexmarkModel.from_counts(read_counts(client, topic))
        self.stop_event = threading.Event()

    def write_batch(self, n: int, now_ms: int | None = None) -> int:
        """Generate and write ``n`` events in one MULTI/EXEC transaction (log + counts).

        Events are spread round-robin over the partitions by event number.

        Returns:
            The number of events written.
        """
        if n <= 0:
            return 0
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        records: list[tuple[int, str]] = []
        per_type = {"person": 0, "auction": 0, "bid": 0}
        for _ in range(n):
            partition = self.model.next_event % self.partitions
            event = self.model.next_event_dict(now_ms)
            per_type[event["type"]] += 1
            records.append((partition, json.dumps(event, separators=(",", ":"))))
        counts_key = keys.gen_counts(self.topic)
        with self.client.pipeline(transaction=True) as pipe:
            self.log.append(records, pipeline=pipe)
            for name, count in per_type.items():
                if count:
                    pipe.hincrby(counts_key, name, count)
            pipe.hincrby(counts_key, "total", n)
            pipe.execute()
        return n

    def run(self, max_events: int | None = None) -> int:
        """Write events until :meth:`stop` is called or ``max_events`` have been written.

        The rate is re-read from Redis every :data:`RATE_POLL_S` s; at rate 0 nothing is written.

        Returns:
            The number of events written by this call.
        """
        written = 0
        owed = 0.0  # events due but not yet written (token bucket)
        rate = get_rate(self.client, self.topic) or 0.0
        last_poll = last_tick = time.monotonic()
        while not self.stop_event.is_set():
            now = time.monotonic()
            if now - last_poll >= RATE_POLL_S:
                rate = get_rate(self.client, self.topic) or 0.0
                last_poll = now
            if rate <= 0:
                owed = 0.0
            else:
                owed = min(owed + rate * (now - last_tick), max(1.0, rate * MAX_BURST_S))
            last_tick = now
            n = int(owed)
            if max_events is not None:
                n = min(n, max_events - written)
            if n > 0:
                self.write_batch(n)
                owed -= n
                written += n
            if max_events is not None and written >= max_events:
                break
            self.stop_event.wait(BATCH_INTERVAL_S)
        return written

    def stop(self) -> None:
        """Ask :meth:`run` to return after the batch in hand (safe from signal handlers)."""
        self.stop_event.set()


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m sparkclient.demo.generator", description=__doc__.split("\n")[0])
    parser.add_argument("--redis-url", default=control_redis_url(),
                        help="the log's Redis, password in the URL (default: $SPARKSCALER_REDIS_URL with the "
                             "password of the file $SPARKSCALER_REDIS_PASSWORD_FILE when set, which keeps the "
                             "password out of the process list, else redis://127.0.0.1:6379/0)")
    parser.add_argument("--topic", default="nexmark")
    parser.add_argument("--partitions", type=int, default=4, help="K, log partitions")
    parser.add_argument("--rate", type=float, default=None,
                        help="events/s written to ss:gen:{topic}:rate at start (default: keep the "
                             "current value, or 100 when there is none)")
    parser.add_argument("--retention", type=int, default=0, help="entries kept per partition (0 = all)")
    parser.add_argument("--max-events", type=int, default=None, help="stop after this many events")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    client = redis.Redis.from_url(args.redis_url, decode_responses=True)
    if args.rate is not None:
        set_rate(client, args.topic, args.rate)
    elif get_rate(client, args.topic) is None:
        set_rate(client, args.topic, 100.0)
    generator = Generator(client, args.topic, args.partitions, args.retention)

    def _on_signal(signum: int, _frame: object) -> None:
        log.info("signal %d: stopping", signum)
        generator.stop()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    log.info("writing to %s (%d partitions) at %s events/s", args.topic, args.partitions,
             get_rate(client, args.topic))
    written = generator.run(max_events=args.max_events)
    log.info("stopped after %d events; counts %s", written, read_counts(client, args.topic))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
