"""One snapshot of a streaming query as a ``micro-batch`` scenario (SCENARIO.md).

``python -m sparkclient snapshot --captures DIR`` reads a folder of saved REST and progress JSON;
``python -m sparkclient snapshot --url http://host:4040 --query NAME`` reads a live application.
Either prints a scenario document that ``python -m scaling evaluate -`` accepts.

The sample becomes the model's inputs through :mod:`sparkclient.collector.model_inputs` (the Spark → model
mapping the webapp's evaluation uses too: vertices per stage position, stateful stages pinned,
per-second metrics over the window, the source's backlog and growth, the cluster), written here as
the scenario's ``vertices``, ``edges``, ``cluster`` and one ``steps`` entry. A source with dict
offsets gives its partition count as ``partitions``; a source whose backlog is unknown writes no
``backlog``.

A sample the loop would not plan a scale-down on (``JobSample.not_ready``) makes no scenario
(:class:`SampleNotReadyError`). The window of a snapshot starts after its run's first batch after a
start (:func:`window_after_start`), which carries a downtime's catch-up on a cold JVM.
"""

from __future__ import annotations

import glob
import json
import os
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scaling.scenario.format import evaluate_text
from scaling.scenario.values import ScenarioError
from scaling.values.memory import MB
from scaling.values.readiness import SampleIssue
from scaling.words.reason_text import not_ready_text
from sparkclient.collector.batchwindow import batch_end_s, progress_time_s, window_batches
from sparkclient.collector.model_inputs import model_inputs
from sparkclient.collector.model_inputs import stateful_positions as detect_stateful
from sparkclient.collector.offsets import flatten_offsets
from sparkclient.collector.readiness import run_start_batch
from sparkclient.collector.sample import JobSample, RatesUnavailable
from sparkclient.collector.sparkjson import Problem, SparkDataError, dicts, get_str
from sparkclient.collector.topology import sample_from_rest

__all__ = [
    "Captures",
    "RatesUnavailableError",
    "SampleNotReadyError",
    "ScenarioRefusedError",
    "infer_trigger_interval_s",
    "load_captures",
    "sample_from_captures",
    "sample_to_scenario",
    "window_after_start",
]

Json = dict[str, Any]

def _source_partitions(progress: Mapping[str, Any] | None) -> int | None:
    """Partitions of the first source of a progress, when its offsets are dicts."""
    if not progress:
        return None
    sources = progress.get("sources") or ()
    if not sources:
        return None
    for key in ("latestOffset", "endOffset"):
        flat = flatten_offsets(sources[0].get(key))
        if isinstance(flat, dict) and flat:
            return len(flat)
    return None


class RatesUnavailableError(ValueError):
    """The sample has no rates to build a scenario from (``reason``: :class:`RatesUnavailable`)."""

    def __init__(self, reason: RatesUnavailable, run_id: str) -> None:
        self.reason = reason
        super().__init__(
            f"rates unavailable for run {run_id} ({reason.value}): no progress is published and the source "
            "stages report no inputRecords; pass --redis-url with the runner's published progress, or "
            "attach sparkclient.runner.progress.RedisProgressListener to the query"
        )


class SampleNotReadyError(ValueError):
    """The sample is not ready (``issues``: its :class:`scaling.values.readiness.SampleIssue` values, rules in
    :mod:`sparkclient.collector.readiness`): the loop plans no scale-down on it, and no scenario is made of it."""

    def __init__(self, issues: tuple[SampleIssue, ...], run_id: str) -> None:
        self.issues = issues
        words = "; ".join(f"{issue.code}: {not_ready_text(str(issue.code), issue.data)}" for issue in issues)
        super().__init__(f"the sample of run {run_id} is not ready ({words}): no scenario is made of it")


class ScenarioRefusedError(ValueError):
    """The scenario built from a sample is one the scaler's own evaluator refuses
    (``python -m scaling evaluate``: parse, then run): the sample is not emitted. ``reason`` is the
    evaluator's :class:`scaling.scenario.format.ScenarioError` (or the ``ValueError`` of a non-finite number)."""

    def __init__(self, reason: ValueError, run_id: str) -> None:
        self.reason = reason
        super().__init__(f"the sample of run {run_id} makes a scenario the scaler refuses: {reason}")


def _evaluable(doc: Json, run_id: str) -> Json:
    """``doc`` when ``python -m scaling evaluate`` accepts it, else :class:`ScenarioRefusedError`."""
    try:
        evaluate_text(json.dumps(doc, allow_nan=False))
    except (ScenarioError, ValueError) as exc:  # ValueError: a NaN or infinity json refuses to write
        raise ScenarioRefusedError(exc, run_id) from None
    return doc


def sample_to_scenario(
    sample: JobSample,
    *,
    source_progress: Mapping[str, Any] | None = None,
    stateful_positions: Sequence[int] | None = None,
    policy: Mapping[str, Any] | None = None,
    min_executors: int = 1,
    max_executors: int = 16,
) -> Json:
    """The ``micro-batch`` scenario document of one sample (see the module docstring).

    ``source_progress``: a progress of the same run, for the source's partition count;
    ``stateful_positions``: stage positions to pin (default:
    :func:`sparkclient.collector.model_inputs.stateful_positions`). The mapping is
    :func:`sparkclient.collector.model_inputs.model_inputs`, the one the webapp's evaluation uses.
    Raises ``ValueError`` when the sample has no vertex (no completed batch of the run in the window,
    or its jobs are not in REST any more), :class:`SampleNotReadyError` when it is not ready,
    :class:`RatesUnavailableError` when it has no rates, and
    :class:`ScenarioRefusedError` when the scaler's evaluator refuses the document it makes.
    """
    if not sample.vertices:
        raise ValueError(
            "the sample has no vertex: no completed micro-batch of run "
            f"{sample.run_id} had its jobs and stages in REST within the {sample.window_s:.1f} s window"
            + (f" ({'; '.join(sample.errors)})" if sample.errors else "")
        )
    if sample.not_ready:
        raise SampleNotReadyError(sample.not_ready, sample.run_id)
    if sample.rates_unavailable is not None:
        raise RatesUnavailableError(sample.rates_unavailable, sample.run_id)
    if not sample.window_s > 0:
        raise ValueError(
            f"the sample of run {sample.run_id} spans no time (window_s={sample.window_s}); widen the window")
    sources = len({u.index for u in sample.backlog_unknown})
    all_unknown = bool(sample.backlog_unknown) and sample.backlog == 0 and sources >= 1
    pinned = detect_stateful(sample) if stateful_positions is None else frozenset(stateful_positions)
    inputs = model_inputs([sample], adjustable=lambda v: v.position not in pinned,
                          source_partitions=_source_partitions(source_progress),
                          min_executors=min_executors, max_executors=max(max_executors, sample.executors))
    vertices: list[Json] = []
    for v in inputs.topology.vertices:
        vertex: Json = {"id": v.id, "name": v.name, "parallelism": v.parallelism}
        if v.source:
            vertex["source"] = True
            if v.partitions:
                vertex["partitions"] = v.partitions
        if not v.adjustable:
            vertex["adjustable"] = False
        vertices.append(vertex)
    metrics: dict[str, Json] = {}
    for v in inputs.topology.vertices:
        m = inputs.metrics[v.id]
        row: Json = {"records_in_per_s": round(m.records_in_per_s or 0.0, 6),
                     "records_out_per_s": round(m.records_out_per_s or 0.0, 6),
                     "busy_time_ms_per_s": round(m.busy_time_ms_per_s or 0.0, 6),
                     "batch_overhead_s": round(m.batch_overhead_s, 6)}
        if m.true_processing_rate is not None:
            row["true_processing_rate"] = round(m.true_processing_rate, 6)
        if m.busy_time_max_ms_per_s is not None:
            row["busy_time_max_ms_per_s"] = round(m.busy_time_max_ms_per_s, 6)
        if v.source:
            if not all_unknown:
                row["backlog"] = m.backlog
            row["backlog_growth_per_s"] = round(m.backlog_growth_per_s, 6)
        metrics[v.id] = row
    cluster = inputs.cluster
    doc: Json = {
        "format": 1,
        "mode": "micro-batch",
        "cluster": {
            "executors": cluster.executors,
            "cores_per_executor": cluster.cores_per_executor,
            "min_executors": cluster.min_executors,
            "max_executors": cluster.max_executors,
        },
        "trigger_interval_s": cluster.trigger_interval_s,
        "vertices": vertices,
        "edges": [{"from": e.source, "to": e.target, "ship": "hash"} for e in inputs.topology.edges],
        "steps": [{"at_s": round(sample.collected_at, 3), "metrics": metrics, "executors": cluster.executors}],
    }
    doc["steps"][0].update(_step_extras(sample, inputs.batch_durations_s))
    if policy:
        doc["policy"] = dict(policy)
    return _evaluable(doc, sample.run_id)


def _step_extras(sample: JobSample, batch_durations_s: Sequence[float]) -> Json:
    """The step's optional keys: ``batch_durations_s`` and ``memory`` (:func:`_step_memory`), when known."""
    extras: Json = {}
    if batch_durations_s:
        extras["batch_durations_s"] = [round(d, 6) for d in batch_durations_s]
    memory = _step_memory(sample)
    if memory:
        extras["memory"] = memory
    return extras


def _step_memory(sample: JobSample) -> Json:
    """The step's ``memory`` (docs/SCENARIO.md) from the sample's memory signals, MB per executor: the
    heap maximum and peak of the executor closest to its maximum (a 0 peak is not a measurement), the
    GC share, the state stores' memory over the executors; ``{}`` when none was measured."""
    memory = sample.memory
    if memory is None:
        return {}
    out: Json = {}
    if memory.heap_max_bytes:
        out["heap_max_mb"] = round(memory.heap_max_bytes / MB, 3)
        if memory.heap_peak_bytes:
            out["heap_peak_mb"] = round(memory.heap_peak_bytes / MB, 3)
    if memory.gc_share is not None:
        out["gc_share"] = round(memory.gc_share, 6)
    if memory.state_stores:
        state = sum(s.total_bytes for s in memory.state_stores) / max(1, sample.executors)
        out["state_mb"] = round(state / MB, 3)
    return out


# -- captures ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Captures:
    """The REST and progress JSON of one application saved in a folder (see :func:`load_captures`)."""

    jobs: list[Json]
    stages: list[Json]
    executors: list[Json]
    progresses: list[Json]
    sql: list[Json]
    app_id: str
    files: tuple[str, ...]


def _read_json(path: Path) -> Any:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def load_captures(directory: str | os.PathLike[str], prefix: str | None = None) -> Captures:
    """Read ``<prefix>app_jobs.json``, ``<prefix>app_stages.json``, ``<prefix>app_executors.json``,
    ``<prefix>recentProgress.json`` (else ``<prefix>lastProgress.json``), ``<prefix>app_sql*details*.json``
    and ``<prefix>applications.json`` (all but jobs, stages and progress optional) from ``directory``.

    ``prefix`` defaults to the one prefix that has an ``app_jobs.json`` (``p1_`` in the Spark 4.3.0
    fixtures). Raises ``FileNotFoundError`` naming what is missing, ``ValueError`` when several
    prefixes qualify.
    """
    root = Path(directory)
    if not root.is_dir():
        raise FileNotFoundError(f"captures folder {root} does not exist")
    if prefix is None:
        found = sorted(p.name[: -len("app_jobs.json")] for p in root.glob("*app_jobs.json"))
        if not found:
            raise FileNotFoundError(f"no *app_jobs.json in {root}: save /api/v1/applications/<id>/jobs there")
        if len(found) > 1:
            raise ValueError(f"several captures in {root} ({', '.join(repr(f) for f in found)}); pass --prefix")
        prefix = found[0]

    def need(name: str) -> Path:
        path = root / f"{prefix}{name}"
        if not path.is_file():
            raise FileNotFoundError(f"{path} is missing")
        return path

    used: list[str] = []
    jobs = _read_json(need("app_jobs.json"))
    stages = _read_json(need("app_stages.json"))
    used += [f"{prefix}app_jobs.json", f"{prefix}app_stages.json"]
    progress_path = root / f"{prefix}recentProgress.json"
    if not progress_path.is_file():
        progress_path = need("lastProgress.json")
    raw_progress = _read_json(progress_path)
    progresses = raw_progress if isinstance(raw_progress, list) else [raw_progress]
    used.append(progress_path.name)
    executors: list[Json] = []
    executors_path = root / f"{prefix}app_executors.json"
    if executors_path.is_file():
        executors = _read_json(executors_path)
        used.append(executors_path.name)
    sql: list[Json] = []
    for path in sorted(root.glob(glob.escape(prefix) + "app_sql*details*.json")):
        payload = _read_json(path)
        sql.extend(payload if isinstance(payload, list) else [payload])
        used.append(path.name)
    app_id = ""
    app_path = root / f"{prefix}app.json"
    if app_path.is_file():
        app_id = str(_read_json(app_path).get("id", ""))
        used.append(app_path.name)
    return Captures(jobs=jobs, stages=stages, executors=executors, progresses=progresses, sql=sql,
                    app_id=app_id, files=tuple(used))


def infer_trigger_interval_s(progresses: Sequence[Json]) -> float:
    """The processing-time trigger, estimated as the median gap between consecutive batch starts
    of batches that ran shorter than that gap; 0 when there are fewer than two batches."""
    starts = sorted({progress_time_s(p) for p in progresses
                     if isinstance(p.get("durationMs"), Mapping) and "addBatch" in p["durationMs"]})
    gaps = [round(b - a, 3) for a, b in zip(starts, starts[1:]) if b > a]
    return float(statistics.median(gaps)) if gaps else 0.0


def window_after_start(progresses: Sequence[Json], run_id: str, start_s: float | None, end_s: float) -> float | None:
    """The start of the window ``[start_s, end_s)`` of run ``run_id`` (epoch seconds; None: the whole run),
    moved past the run's first batch after a start when the window holds it and a later batch
    (:func:`sparkclient.collector.readiness.run_start_batch`: that batch carries the downtime's catch-up on
    a cold JVM, and the loop's stabilization interval skips it); else ``start_s``. ``progresses``: the
    query's progress dicts (any run). Raises ``SparkDataError`` for a malformed progress."""
    batches = window_batches(progresses, run_id=run_id, window_start_s=start_s, window_end_s=end_s).batches
    first = run_start_batch(progresses, batches, run_id)
    if first is None:
        return start_s
    after = max(batch_end_s(p) for p in batches if p["batchId"] == first) + 0.001
    return after if any(batch_end_s(p) >= after for p in batches) else start_s


def sample_from_captures(
    captures: Captures,
    *,
    trigger_interval_s: float | None = None,
    window_s: float | None = None,
    run_id: str | None = None,
    from_start: bool = False,
) -> JobSample:
    """The sample of the newest run in the captures, over the last ``window_s`` seconds before
    its newest batch completed (default: every batch of the run in the capture), after the run's first
    batch after a start (:func:`window_after_start`; ``from_start=True`` keeps it, and the sample is then
    not ready).

    The batches and the time they span follow :func:`sparkclient.collector.batchwindow.window_batches`, the
    rule a live collect uses too. Raises ``ValueError`` (:class:`sparkclient.collector.sparkjson.SparkDataError`
    for malformed captures, naming the field) when the captures hold no usable progress.
    """
    progresses = dicts(captures.progresses, "progress")
    if not progresses:
        raise SparkDataError("progress", Problem.MISSING, "at least one progress in the captures", [])
    newest = max(progresses, key=progress_time_s)
    run = run_id or get_str(newest, "runId", "progress")
    runs = [p for p in progresses if p.get("runId") == run]
    if not runs:
        raise ValueError(f"no progress of run {run} in the captures")
    end = max(batch_end_s(p) for p in runs) + 0.001
    start = end - window_s if window_s else None
    if not from_start:
        start = window_after_start(progresses, run, start, end)
    trigger = infer_trigger_interval_s(runs) if trigger_interval_s is None else trigger_interval_s
    return sample_from_rest(
        captures.jobs, captures.stages, progresses, captures.executors, run_id=run,
        trigger_interval_s=trigger, window_start_s=start, window_end_s=end, sql=captures.sql,
        app_id=captures.app_id, collected_at=end,
    )
