"""Publish each ``StreamingQueryProgress`` of a job to Redis (the collector reads them back:
:mod:`sparkclient.collector.progress`).

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

from sparkclient.contract import keys
from sparkclient.contract.control import write_status
from sparkclient.contract.messages import StatusUpdate

log = logging.getLogger(__name__)

PROGRESS_MAXLEN = 2000


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
                write_status(pipe, self.job, StatusUpdate(last_batch_at=time.time()))
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
