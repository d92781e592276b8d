"""Whether a sample is ready: the collector's part of ``scaling.values.readiness`` (the codes, their data
and their words live there). A sample is not ready when

- **missing stages**: a batch of the window is left out of the vertices because its stages are not
  in ``/stages`` (dropped past ``spark.ui.retainedStages``): the vertices then hold fewer batches
  than the rates;
- **the SQL plan is unusable for a query with more than one source**: the newest batch reads more
  sources than the sample has source vertices while a stage has no plan operators (its name fell
  back to ``stage N``): the edges fell back to a chain, so a join's second scan reads as a
  downstream stage with no records in, and the sources' share of the backlog and arrival is wrong.
  A union read in one stage (one source vertex, named from the plan) is not this;
- **the first batch after a start**: a batch of the window is the run's first (batch 0, or the
  query's previous batch belongs to another run): it carries the catch-up of the downtime on a
  cold JVM. The web app's stabilization interval covers a restart whose previous run's progress
  is older than the progress it reads;
- **a restart inside the window**: a batch of another run of the query completed in it;
- **implausible cores**: the executors report more cores than the cluster or host has
  (``max_cores``, the runner's capacity);
- **an implausible rate**: a source's batches carried more rows than its own limit allows
  (:attr:`sparkclient.collector.sources.SourcesReport.over_limit`; the rate source's
  ``rowsPerSecond``; Kafka's ``maxOffsetsPerTrigger`` is not in the progress).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scaling.values.readiness import NotReady, SampleIssue
from sparkclient.collector.batchwindow import BatchWindow, batch_end_s, query_progresses
from sparkclient.collector.offsets import progress_sources
from sparkclient.collector.sample import VertexSample
from sparkclient.collector.sources import SourcesReport

__all__ = ["run_start_batch", "sample_issues"]

Json = Mapping[str, Any]


def sample_issues(progresses: Sequence[Json], window: BatchWindow, *, run_id: str, window_start_s: float | None,
                  vertices: Sequence[VertexSample], missing_stage_batches: Sequence[int], cores: int,
                  max_cores: int | None, sources: SourcesReport) -> tuple[SampleIssue, ...]:
    """The issues of a sample (module docstring), in :class:`scaling.values.readiness.NotReady` order; ``()``
    when it is ready.

    ``progresses``: the query's progress dicts (any run); ``window``: the sample's batches;
    ``window_start_s``: the window's start, epoch seconds (None: the whole run, no restart check);
    ``missing_stage_batches``: batch ids left out for stages missing from ``/stages``; ``cores``:
    the executors' cores; ``max_cores``: the cores the cluster or host has (None: unknown)."""
    batches = window.batches
    issues: list[SampleIssue] = []
    if missing_stage_batches:
        issues.append(SampleIssue(NotReady.MISSING_STAGES, {"batches": len(missing_stage_batches),
                                                             "of": len(batches)}))
    if batches and vertices:
        in_progress = len(progress_sources(batches[-1]))
        source_stages = sum(1 for v in vertices if v.is_source)
        unnamed = any(v.name == f"stage {v.position}" for v in vertices)
        if in_progress > 1 and source_stages < in_progress and unnamed:
            issues.append(SampleIssue(NotReady.SQL_PLAN_UNUSABLE, {"sources": in_progress,
                                                                    "source_stages": source_stages}))
    query = _query(progresses, run_id)
    first = _first_batch(query, batches, run_id)
    if first is not None:
        issues.append(SampleIssue(NotReady.FIRST_BATCH, {"batch_id": first}))
    if window_start_s is not None:
        others = {p["batchId"] for p in query if p.get("runId", run_id) != run_id
                  and window_start_s <= batch_end_s(p) < window.end_s}
        if others:
            issues.append(SampleIssue(NotReady.RESTART_IN_WINDOW, {"batches": len(others)}))
    if max_cores is not None and max_cores > 0 and cores > max_cores:
        issues.append(SampleIssue(NotReady.IMPLAUSIBLE_CORES, {"cores": cores, "limit": max_cores}))
    for index, rate, limit in sources.over_limit:
        issues.append(SampleIssue(NotReady.IMPLAUSIBLE_RATE, {"source": index, "rate_per_s": rate,
                                                               "limit_per_s": limit}))
    return tuple(issues)


def run_start_batch(progresses: Sequence[Json], batches: Sequence[Json], run_id: str) -> int | None:
    """The id of the batch of ``batches`` that is its run's first after a start (the module docstring's
    first batch: batch 0, or a batch whose previous batch of the query belongs to another run); None if
    none. ``progresses``: the query's progress dicts (any run). Raises ``SparkDataError`` for a malformed one."""
    return _first_batch(_query(progresses, run_id), batches, run_id)


def _query(progresses: Sequence[Json], run_id: str) -> list[Json]:
    return [p for p in query_progresses(progresses, run_id) if isinstance(p.get("batchId"), int)]


def _first_batch(query: Sequence[Json], batches: Sequence[Json], run_id: str) -> int | None:
    """The id of the window's batch that is its run's first after a start: batch 0, or a batch
    whose previous batch of the query (by id, in ``query``) belongs to another run. None if none."""
    run_of = {int(p["batchId"]): p.get("runId", run_id) for p in query}
    for progress in batches:
        batch_id = int(progress["batchId"])
        earlier = [b for b in run_of if b < batch_id]
        if batch_id == 0 or (earlier and run_of[max(earlier)] != run_id):
            return batch_id
    return None
