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
"""

from __future__ import annotations

import glob
import json
import os
import re
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scaling.scenario.format import evaluate_text
from scaling.scenario.values import ScenarioError
from scaling.values.memory import MB
from sparkclient.collector.batchwindow import batch_end_s, progress_time_s
from sparkclient.collector.model_inputs import model_inputs
from sparkclient.collector.model_inputs import stateful_positions as detect_stateful
from sparkclient.collector.offsets import flatten_offsets
from sparkclient.collector.sample import JobSample, RatesUnavailable
from sparkclient.collector.sparkjson import Problem, SparkDataError, dicts, get_count, get_str
from sparkclient.collector.stages import batch_jobs, batch_stages, rest_time_s, stage_index
from sparkclient.collector.topology import sample_from_rest

__all__ = [
    "Captures",
    "RatesUnavailableError",
    "ScenarioRefusedError",
    "infer_trigger_interval_s",
    "load_captures",
    "sample_from_captures",
    "sample_to_scenario",
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
    or its jobs are not in REST any more), and
    :class:`ScenarioRefusedError` when the scaler's evaluator refuses the document it makes.
    """
    if not sample.vertices:
        raise ValueError(
            "the sample has no vertex: no completed micro-batch of run "
            f"{sample.run_id} had its jobs and stages in REST within the {sample.window_s:.1f} s window"
            + (f" ({'; '.join(sample.errors)})" if sample.errors else "")
        )
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
    for name in sorted(glob.glob(glob.escape(str(root / prefix)) + "app_sql*details*.json")):
        payload = _read_json(Path(name))
        sql.extend(payload if isinstance(payload, list) else [payload])
        used.append(Path(name).name)
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


def sample_from_captures(
    captures: Captures,
    *,
    trigger_interval_s: float | None = None,
    window_s: float | None = None,
    run_id: str | None = None,
) -> JobSample:
    """The sample of the newest run in the captures, over the last ``window_s`` seconds before
    its newest batch completed (default: every batch of the run in the capture).

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
    trigger = infer_trigger_interval_s(runs) if trigger_interval_s is None else trigger_interval_s
    return sample_from_rest(
        captures.jobs, captures.stages, progresses, captures.executors, run_id=run,
        trigger_interval_s=trigger, window_start_s=start, window_end_s=end, sql=captures.sql,
        app_id=captures.app_id, collected_at=end,
    )


# -- live --------------------------------------------------------------------------------------


def progresses_from_jobs(jobs: Sequence[Json], run_id: str, stages: Sequence[Json] = ()) -> list[Json]:
    """Minimal progress dicts rebuilt from the jobs of run ``run_id`` (one per batch: start,
    duration, no offsets), for a live application whose progress is not published anywhere.

    ``numInputRows`` is the sum of the ``inputRecords`` of the batch's stages (``/stages``): only
    source scans read input. It is ``None`` (unknown, not 0) when no stage of the batch reports
    input records, e.g. Python data sources, or the stages are not in ``stages``; the sample then
    says its rates are unavailable (:class:`sparkclient.collector.sample.RatesUnavailable`).
    """
    index = stage_index(stages)
    out: list[Json] = []
    for batch_id, job_list in sorted(batch_jobs(jobs, run_id).items()):
        if any(j.get("status") != "SUCCEEDED" or not j.get("completionTime") for j in job_list):
            continue
        starts = [rest_time_s(j.get("submissionTime")) for j in job_list]
        ends = [rest_time_s(j.get("completionTime")) for j in job_list]
        if any(t is None for t in starts + ends):
            continue
        start = min(t for t in starts if t is not None)
        end = max(t for t in ends if t is not None)
        duration_ms = int(round(max(0.0, end - start) * 1000))
        ordered, missing = batch_stages(job_list, index)
        rows = sum(get_count(stage, "inputRecords", f"stage {stage.get('stageId')}") for stage in ordered)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(start)) + f".{int(start * 1000) % 1000:03d}Z"
        out.append({"runId": run_id, "batchId": batch_id, "timestamp": stamp, "batchDuration": duration_ms,
                    "numInputRows": rows if rows > 0 and not missing else None,
                    "durationMs": {"addBatch": duration_ms, "triggerExecution": duration_ms},
                    "sources": []})
    return out


def newest_run_id(jobs: Sequence[Json], query: str) -> str | None:
    """The ``runId`` of the newest job whose description starts with the query name ``query``."""
    best: tuple[int, str] | None = None
    for job in jobs:
        description = job.get("description") or ""
        lines = description.splitlines()
        if not lines or lines[0].strip() != query:
            continue
        match = re.search(r"^\s*runId\s*=\s*(\S+)\s*$", description, re.MULTILINE)
        run = match.group(1) if match else job.get("jobGroup")
        if run and (best is None or int(job["jobId"]) > best[0]):
            best = (int(job["jobId"]), str(run))
    return best[1] if best else None
