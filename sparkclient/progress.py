"""Publish each ``StreamingQueryProgress`` of a job to Redis, and read them back.

The listener XADDs ``event.progress.json`` (the JSON string Spark renders; ``json.dumps`` of the
progress object fails on its UUIDs) to the stream ``ss:progress:{job}`` under field ``json``,
capped at about :data:`PROGRESS_MAXLEN` entries, and stamps ``last_batch_at`` (epoch s) on the
runner status hash ``ss:runner:{job}``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

import redis
from pyspark.sql.streaming import StreamingQueryListener

from sparkclient import keys

log = logging.getLogger(__name__)

PROGRESS_MAXLEN = 2000


def batch_end_epoch_s(progress: dict[str, Any]) -> float:
    """When the batch of ``progress`` completed, in epoch seconds (:func:`sparkclient.batchwindow.batch_end_s`:
    ``timestamp + durationMs.triggerExecution``); the current time when it has no parsable timestamp."""
    from sparkclient.batchwindow import batch_end_s  # noqa: PLC0415 - keeps the listener's import light

    try:
        return batch_end_s(progress)
    except ValueError:
        return time.time()


def ran_a_batch(progress: dict[str, Any]) -> bool:
    """Whether ``progress`` reports an executed micro-batch (not an idle, no-data trigger)."""
    return "addBatch" in progress.get("durationMs", {})


class RedisProgressListener(StreamingQueryListener):
    """Publishes query progress of ``job`` to Redis.

    Args:
        redis_url: the Redis server.
        job: the job name (keys ``ss:progress:{job}`` and ``ss:runner:{job}``).
        on_progress: optional callback given each parsed progress dict after publishing (the
            runner measures rescale downtime with it). Exceptions it raises are logged, not raised.
    """

    def __init__(self, redis_url: str, job: str,
                 on_progress: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.client = redis.Redis.from_url(redis_url, decode_responses=True)
        self.job = job
        self.on_progress = on_progress

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        text = event.progress.json
        try:
            with self.client.pipeline(transaction=False) as pipe:
                pipe.xadd(keys.progress(self.job), {"json": text}, maxlen=PROGRESS_MAXLEN, approximate=True)
                pipe.hset(keys.runner(self.job), "last_batch_at", repr(time.time()))
                pipe.execute()
        except redis.RedisError:
            log.exception("could not publish the progress of job %s", self.job)
        if self.on_progress is not None:
            try:
                self.on_progress(json.loads(text))
            except Exception:  # noqa: BLE001 - a listener must never break the query
                log.exception("progress callback of job %s failed", self.job)

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        pass


def read_progress(client: redis.Redis, job: str, since_ms: int | None = None) -> list[dict[str, Any]]:
    """The progress documents of ``job`` in publication order.

    Args:
        client: a Redis client.
        job: the job name.
        since_ms: only progress published strictly after this epoch time, in milliseconds
            (the stream's entry ids are publication times); None returns all that are kept.
    """
    start = "-" if since_ms is None else f"{int(since_ms) + 1}-0"
    entries = client.xrange(keys.progress(job), min=start, max="+")
    out = []
    for entry_id, fields in entries:
        text = fields.get("json", fields.get(b"json"))
        if text is None:
            continue
        out.append(parse_progress(text, f"{keys.progress(job)} entry {_text(entry_id)}"))
    return out


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def parse_progress(text: str | bytes, where: str = "progress") -> dict[str, Any]:
    """One published progress (``event.progress.json``) as a dict.

    Raises :class:`sparkclient.sparkjson.SparkDataError` naming ``where`` when the text is not a
    JSON object (truncated, not UTF-8, nested too deep, or another JSON type). The fields inside
    are checked where they are read (:func:`sparkclient.batchwindow.window_batches`).
    """
    from sparkclient.sparkjson import Problem, SparkDataError  # noqa: PLC0415

    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise SparkDataError(where, Problem.MALFORMED, f"a JSON progress object ({type(exc).__name__})",
                             _text(text)[:60]) from None
    if not isinstance(value, dict):
        raise SparkDataError(where, Problem.WRONG_TYPE, "a JSON progress object", value)
    return value
