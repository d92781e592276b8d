"""``python -m sparkclient snapshot``: print one snapshot of a running query, or of saved captures, as a
``micro-batch`` scenario (SCENARIO.md); the CLI's module docstring (:mod:`sparkclient.__main__`) has the
usage and the exit codes. The mapping is :mod:`sparkclient.collector.snapshot`'s."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import redis

from sparkclient.collector.collect import collect_sample
from sparkclient.collector.jobruns import newest_run_id, progresses_from_jobs
from sparkclient.collector.progress import read_progress
from sparkclient.collector.rest import SparkRestClient
from sparkclient.collector.sample import JobSample
from sparkclient.collector.snapshot import (
    SampleNotReadyError,
    infer_trigger_interval_s,
    load_captures,
    sample_from_captures,
    sample_to_scenario,
    window_after_start,
)
from sparkclient.collector.stages import BATCH_STAGE_STATUSES

__all__ = ["add_arguments", "run"]

Json = dict[str, Any]

#: The exit status when the sample is not ready (no scenario printed).
NOT_READY = 3


def add_arguments(snap: argparse.ArgumentParser) -> None:
    """The ``snapshot`` command's flags."""
    where = snap.add_mutually_exclusive_group(required=True)
    where.add_argument("--captures", help="folder of saved REST and progress JSON")
    where.add_argument("--url", help="Spark UI root of a live driver, e.g. http://127.0.0.1:4040")
    snap.add_argument("--prefix", help="capture file prefix (default: the one with app_jobs.json)")
    snap.add_argument("--query", help="streaming query name (live mode)")
    snap.add_argument("--app-id", help="application id (live mode; default: the first one)")
    snap.add_argument("--redis-url", help="Redis with the runner's published progress (live mode)")
    snap.add_argument("--job", help="runner job name of the progress stream (default: --query)")
    snap.add_argument("--window-s", type=float, help="metrics window, seconds (captures: all batches; live: 60)")
    snap.add_argument("--trigger-interval-s", type=float, help="trigger interval, seconds (default: inferred)")
    snap.add_argument("--min-executors", type=int, default=1)
    snap.add_argument("--max-executors", type=int, default=16)
    snap.add_argument("--timeout-s", type=float, default=10.0, help="per REST request, seconds")


def run(args: argparse.Namespace) -> int:
    """Print the scenario document to stdout, notes and the collect time to stderr; the exit code."""
    try:
        return _snapshot(args)
    except SampleNotReadyError as exc:
        print(f"refused: {exc}".replace("\n", " "), file=sys.stderr)
        return NOT_READY
    except (OSError, ValueError) as exc:
        print(f"error: {exc}".replace("\n", " "), file=sys.stderr)
        return 1
    except Exception as exc:  # SparkRestError and friends: one line, exit 1
        print(f"error: {type(exc).__name__}: {exc}".replace("\n", " "), file=sys.stderr)
        return 1


def _snapshot(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    if args.captures:
        captures = load_captures(args.captures, args.prefix)
        sample = sample_from_captures(captures, trigger_interval_s=args.trigger_interval_s,
                                      window_s=args.window_s)
        source_progress = next((p for p in reversed(captures.progresses) if p.get("runId") == sample.run_id), None)
    else:
        live = _live_sample(args)
        if live is None:
            return 1
        sample, source_progress = live
    doc = sample_to_scenario(sample, source_progress=source_progress, min_executors=args.min_executors,
                             max_executors=args.max_executors)
    elapsed = time.perf_counter() - started
    for note in sample.errors:
        print(f"note: {note}", file=sys.stderr)
    print(f"collected run {sample.run_id}: {sample.batches} batch(es), {len(sample.vertices)} vertices "
          f"in {elapsed * 1000:.0f} ms", file=sys.stderr)
    json.dump(doc, sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")
    return 0


def _live_sample(args: argparse.Namespace) -> tuple[JobSample, Json | None] | None:
    """The sample of the query's newest run read from a live driver, and its newest progress;
    None (the error printed) when no job of the query is listed."""
    with SparkRestClient(args.url, timeout_s=args.timeout_s) as client:
        app_id = args.app_id or client.applications()[0]["id"]
        jobs = client.jobs(app_id)
        run_id = newest_run_id(jobs, args.query)
        if run_id is None:
            print(f"error: no job of a streaming query named {args.query!r} in {args.url} "
                  f"(application {app_id})", file=sys.stderr)
            return None
        progresses = []
        if args.redis_url:
            # every run: the previous run's last batch gives a catch-up batch its span
            progresses = read_progress(redis.Redis.from_url(args.redis_url), args.job or args.query)
        if not any(p.get("runId") == run_id for p in progresses):
            print("note: no published progress; batches rebuilt from /jobs and /stages (input rows from the "
                  "stages' inputRecords; no offsets, so no backlog)",
                  file=sys.stderr)
            progresses = progresses_from_jobs(jobs, run_id, client.stages(app_id, BATCH_STAGE_STATUSES))
        if args.trigger_interval_s is None:
            trigger = infer_trigger_interval_s([p for p in progresses if p.get("runId") == run_id])
        else:
            trigger = args.trigger_interval_s
        now_s = time.time()
        start_s = window_after_start(progresses, run_id, now_s - (args.window_s or 60.0), now_s)
        sample = collect_sample(client, app_id, progresses, run_id=run_id, trigger_interval_s=trigger,
                                window_s=now_s - start_s, now_s=now_s)
    return sample, next((p for p in reversed(progresses) if p.get("runId") == run_id), None)
