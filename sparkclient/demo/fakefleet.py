"""A fleet of fake running jobs for the fleet benchmark: one process that plays, for each job, the
Spark driver (a fake Spark UI replaying the recorded capture, :mod:`sparkclient.demo.fakeui`) and the
runner (its status hash and the progress of each completed micro-batch on Redis, as
:mod:`sparkclient.runner` publishes them).

Every job replays the same capture from the same start, so the jobs' UIs answer the same bytes
(built once per batch) and the process's own CPU stays small next to the collector's.

Run ``python -m sparkclient.demo.fakefleet --jobs JOBS.json --redis URL --urls URLS.json``:
``JOBS.json`` is a JSON list of job names; the process writes ``{job: ui_url}`` to ``URLS.json``
once every UI listens, then publishes until SIGTERM or SIGINT, and writes ``{"requests": total,
"per_job": {job: n}}`` to ``--stats`` on exit.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import threading
import time
from pathlib import Path

import redis

from sparkclient.contract import control, keys
from sparkclient.contract.messages import RunnerState, StatusUpdate
from sparkclient.demo.fakeui import FakeUis, replay_answer
from sparkclient.demo.replay import Capture, Replay

#: The replayed query's knobs (``local[2]``, a rate source of 2 partitions, 4 shuffle partitions), as
#: a runner declares them (:class:`sparkclient.contract.spec.Knob` dicts).
KNOBS = [
    {"name": "cores", "default": 2, "min": 1, "max": 8, "sets": "executors", "description": ""},
    {"name": "source_partitions", "default": 2, "min": 1, "max": 16, "sets": "source_partitions", "description": ""},
    {"name": "state_partitions", "default": 4, "min": 1, "max": 64, "sets": "state_partitions", "description": ""},
]
CONFIG = {"cores": 2, "source_partitions": 2, "state_partitions": 4}
#: Its physical plan's stages (:mod:`sparkclient.contract.binding`): per batch a source stage and a
#: stateful aggregation after a 4-partition shuffle.
PLAN_STAGES = [
    {"input": "source", "partitions": None, "stateful": False, "operators": ["MicroBatchScan"]},
    {"input": "shuffle", "partitions": 4, "stateful": True, "operators": ["StateStoreSave"]},
]
#: Progress entries kept per job's stream (approximate ``MAXLEN``), as the runner trims it.
STREAM_KEEP = 200
#: Seconds of replayed history published at start, so that the first collection has batches.
BACKFILL_S = 30.0


def publish_statuses(client: redis.Redis, urls: dict[str, str], replay: Replay) -> None:
    """Each job's runner status: running, its UI, the capture's app and run ids, the knob values and
    the plan stages."""
    pipe = client.pipeline(transaction=False)
    for job, url in urls.items():
        pipe.delete(keys.runner(job))
        control.write_status(pipe, job, StatusUpdate(
            state=RunnerState.RUNNING, pid=os.getpid(), ui_url=url, app_id=replay.capture.app_id,
            query_name="ds2q", run_id=replay.capture.run_id, knobs=dict(CONFIG),
            plan_stages=json.dumps(PLAN_STAGES), trigger_interval_s=replay.trigger_s,
            started_at=replay.start_s))
    pipe.execute()


def publish_progress(client: redis.Redis, jobs: list[str], replay: Replay, *, stop: threading.Event,
                     published: int = -1) -> None:
    """XADD each replay batch's progress to every job's stream once it completed, until ``stop``."""
    while not stop.is_set():
        newest = replay.completed(time.time())
        if newest > published:
            pipe = client.pipeline(transaction=False)
            for k in range(published + 1, newest + 1):
                text = json.dumps(replay.progress(k))
                for job in jobs:
                    pipe.xadd(keys.progress(job), {"json": text}, maxlen=STREAM_KEEP, approximate=True)
            pipe.execute()
            published = newest
        stop.wait(0.2)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m sparkclient.demo.fakefleet", description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=Path, required=True, help="JSON list of job names")
    parser.add_argument("--redis", required=True, help="the Redis URL the web app reads")
    parser.add_argument("--urls", type=Path, required=True, help="where to write {job: ui_url}")
    parser.add_argument("--stats", type=Path, help="where to write the request counts on exit")
    args = parser.parse_args(argv)
    jobs = [str(j) for j in json.loads(args.jobs.read_text())]
    replay = Replay(Capture.load(), start_s=time.time() - BACKFILL_S)
    uis = FakeUis(len(jobs), replay_answer(replay), record=False).start()
    urls = dict(zip(jobs, uis.urls, strict=True))
    client = redis.Redis.from_url(args.redis)
    publish_statuses(client, urls, replay)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    tmp = args.urls.with_suffix(".tmp")
    tmp.write_text(json.dumps(urls))
    tmp.replace(args.urls)
    try:
        publish_progress(client, jobs, replay, stop=stop)
    finally:
        uis.stop()
        if args.stats:
            counts = {job: uis.counts[i] for i, job in enumerate(jobs)}
            args.stats.write_text(json.dumps({"requests": sum(counts.values()), "per_job": counts}))


if __name__ == "__main__":
    main()
