"""The query progress the runner publishes, read back from Redis.

The runner's listener (:mod:`sparkclient.runner.progress`) XADDs ``event.progress.json`` to the stream
``ss:progress:{job}`` under field ``json``. Each entry is parsed into a dict here with its fields type-checked
(:func:`sparkclient.collector.batchwindow.check_progress`), or refused with a
:class:`sparkclient.collector.sparkjson.SparkDataError` naming the field.
"""

from __future__ import annotations

import json
import time
from typing import Any

import redis

from sparkclient.collector.batchwindow import batch_end_s, check_progress, progress_where
from sparkclient.collector.sparkjson import Problem, SparkDataError, get_dict
from sparkclient.contract import keys


def batch_end_epoch_s(progress: dict[str, Any]) -> float:
    """When the batch of ``progress`` completed, in epoch seconds
    (:func:`sparkclient.collector.batchwindow.batch_end_s`: ``timestamp + durationMs.triggerExecution``);
    the current time when it has no parsable timestamp."""
    try:
        return batch_end_s(progress)
    except ValueError:
        return time.time()


def ran_a_batch(progress: dict[str, Any]) -> bool:
    """Whether ``progress`` reports an executed micro-batch (not an idle, no-data trigger): its
    ``durationMs`` has ``addBatch``. Raises :class:`SparkDataError` when ``durationMs`` is not an object."""
    return "addBatch" in get_dict(progress, "durationMs", progress_where(progress))


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


def read_newest_progress(client: redis.Redis, job: str, count: int) -> list[dict[str, Any]]:
    """The newest ``count`` progress documents of ``job``, newest first (parsed as :func:`read_progress`'s).

    Raises:
        sparkclient.collector.sparkjson.SparkDataError: an entry that does not parse, naming it.
    """
    out = []
    for entry_id, fields in client.xrevrange(keys.progress(job), max="+", min="-", count=count):
        text = fields.get("json", fields.get(b"json"))
        if text is not None:
            out.append(parse_progress(text, f"{keys.progress(job)} entry {_text(entry_id)}"))
    return out


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def parse_progress(text: str | bytes, where: str = "progress") -> dict[str, Any]:
    """One published progress (``event.progress.json``) as a dict.

    Raises :class:`sparkclient.collector.sparkjson.SparkDataError` naming ``where`` when the text is not a
    JSON object (truncated, not UTF-8, nested too deep, or another JSON type), or naming the field
    when one is not what Spark writes (:func:`sparkclient.collector.batchwindow.check_progress`).
    """
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise SparkDataError(where, Problem.MALFORMED, f"a JSON progress object ({type(exc).__name__})",
                             _text(text)[:60]) from None
    if not isinstance(value, dict):
        raise SparkDataError(where, Problem.WRONG_TYPE, "a JSON progress object", value)
    return check_progress(value, where)
