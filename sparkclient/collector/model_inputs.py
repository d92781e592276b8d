"""The Spark → model mapping: collected samples (:class:`sparkclient.collector.sample.JobSample`) as the scaling
model's inputs (``scaling.Topology``, ``scaling.MetricWindow``, ``scaling.ClusterState``).

One module for both readers of a sample: the webapp's evaluation (a window of stored snapshots,
``webapp.loop.evaluate``) and the snapshot CLI (one live or captured sample written as a scenario,
:mod:`sparkclient.collector.snapshot`). The rules:

- **Vertices.** One vertex per stage position of the newest sample (``v0``, ``v1``, ...), named after
  its plan operators, with its tasks of the newest batch as ``parallelism``; the sources (the
  stages without an input stage) are marked ``source``. Whether a vertex is adjustable is the
  caller's rule (``adjustable``): the webapp binds stages to knobs, the CLI pins stateful stages
  (:func:`stateful_positions`). Edges come from the vertex upstream lists.
- **Metrics.** Each sample gives one :class:`scaling.VertexMeasurement` per vertex: its counts over the
  vertex's span (``VertexSample.span_s``, else the sample's ``window_s``), each source's backlog and
  backlog growth (arrival rate from the offsets − the source's input rate; with several source
  vertices, as a join of two streams has, the query's backlog and arrival are shared out by the
  records each read, :func:`source_shares`), and the batch overhead
  weighted by the batches. A sample without the vertex (no batch completed in it) counts zeros over
  its ``window_s``. ``MetricWindow.from_measurements`` turns them into the window's averages.
- **Cluster.** ``executors × cores_per_executor`` is the task slots of the newest sample. The webapp's
  executors knob counts cores, so it models them as executors of one core (``cores_per_executor=1``,
  as ``scaling.ClusterState`` models ``local[N]``); without it the executors come from ``/executors``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from scaling.values.metrics import ClusterState, MetricWindow, VertexMeasurement, VertexMetrics
from scaling.values.topology import Edge, Topology, Vertex
from sparkclient.collector.sample import JobSample, VertexSample

__all__ = ["STATEFUL_OPERATORS", "ModelInputs", "cluster_state", "measurements", "model_inputs",
           "source_shares", "stateful_positions"]

#: Plan node names of stateful streaming operators (Spark 4.x).
STATEFUL_OPERATORS = (
    "StateStoreSave",
    "StateStoreRestore",
    "SessionWindowStateStoreSave",
    "SessionWindowStateStoreRestore",
    "StreamingDeduplicate",
    "StreamingDeduplicateWithinWatermark",
    "StreamingSymmetricHashJoin",
    "FlatMapGroupsWithState",
    "TransformWithState",
    "TransformWithStateInPandas",
    "FlatMapGroupsInPandasWithState",
)


def _is_stateful_name(name: str) -> bool:
    operators = {part.strip() for part in name.split("→")}
    return any(op in operators for op in STATEFUL_OPERATORS)


def stateful_positions(sample: JobSample) -> frozenset[int]:
    """Stage positions whose partitions the checkpoint pins: those running a stateful operator
    (:data:`STATEFUL_OPERATORS`); without operator names, the last vertex of a query that reports
    state (``state_rows`` or ``state_bytes``) when it has more than one vertex."""
    pinned = {v.position for v in sample.vertices if _is_stateful_name(v.name)}
    if not pinned and (sample.state_rows or sample.state_bytes) and len(sample.vertices) > 1:
        pinned = {sample.vertices[-1].position}
    return frozenset(pinned)


@dataclass(frozen=True)
class ModelInputs:
    """A window of samples as the model's inputs.

    - ``topology``: the newest sample's vertices and edges;
    - ``window``: one measurement per sample and vertex (``scaling.MetricWindow``);
    - ``metrics``: ``window.aggregate()``, per vertex id (records/s, ms per s);
    - ``cluster``: the newest sample's task slots and the executor bounds;
    - ``batch_durations_s``: the mean batch duration of each sample that completed a batch, seconds;
    - ``mean_batch_s``: the mean duration of the window's batches (each sample's mean weighted by its
      batches), seconds, 0 for none.
    """

    topology: Topology
    window: MetricWindow
    metrics: dict[str, VertexMetrics]
    cluster: ClusterState
    batch_durations_s: tuple[float, ...]
    mean_batch_s: float


def measurements(sample: JobSample, vertex_ids: Sequence[str]) -> dict[str, VertexMeasurement]:
    """One sample's ``{vertex_id: VertexMeasurement}`` for the vertices ``vertex_ids`` (see the module
    docstring). Raises ``scaling.values.metrics.MetricsError`` for a count out of its domain."""
    by_id = {v.vertex_id: v for v in sample.vertices}
    shares = source_shares(sample)
    out: dict[str, VertexMeasurement] = {}
    for vertex_id in vertex_ids:
        v: VertexSample | None = by_id.get(vertex_id)
        if v is None:
            out[vertex_id] = VertexMeasurement(span_s=sample.window_s, tasks=1, busy_s=0.0, records_in=0,
                                               records_out=0)
            continue
        span_s = v.span_s or sample.window_s
        source: dict[str, float] = {}
        if v.is_source:
            share = shares.get(vertex_id, 0.0)
            source = {"backlog": float(sample.backlog) * share,
                      "backlog_growth_per_s": sample.arrival_rate_per_s * share
                      - (v.records_in / span_s if span_s > 0 else 0.0)}
        out[vertex_id] = VertexMeasurement(
            span_s=span_s, tasks=max(1, v.tasks), busy_s=v.busy_s, busy_max_s=v.busy_max_s,
            records_in=v.records_in, records_out=v.records_out, batch_overhead_s=sample.batch_overhead_s,
            batches=sample.batches, **source)
    return out


def source_shares(sample: JobSample) -> dict[str, float]:
    """Each source vertex's share of the query's backlog and arrival rate, ``{vertex_id: share}``
    summing to 1: its records in over all source vertices' (a join of two streams reads two sources,
    and the query's progress gives their backlog and arrival as one sum), equal shares when no
    source vertex read a record. One source vertex has the whole."""
    sources = [v for v in sample.vertices if v.is_source]
    total = sum(v.records_in for v in sources)
    return {v.vertex_id: (v.records_in / total if total > 0 else 1.0 / len(sources)) for v in sources}


def cluster_state(sample: JobSample, *, cores_per_executor: int | None = None, min_executors: int = 1,
                  max_executors: int = 16) -> ClusterState:
    """The cluster of the newest sample: ``cores_per_executor`` given (the webapp: 1, its executors
    knob counts cores) or taken from ``/executors`` (cores ÷ executors). The executors may lie above
    ``max_executors`` (the plan then scales down to it); ``min_executors`` is lowered to ``max_executors``.
    The trigger interval defaults to 1 s when the query has none."""
    if cores_per_executor is None:
        executors = max(1, sample.executors)
        cores_per_executor = max(1, sample.cores // executors) if sample.cores else 1
    else:
        executors = max(1, (sample.cores or 1) // max(1, cores_per_executor))
    max_executors = max(1, max_executors)
    return ClusterState(executors=executors, cores_per_executor=cores_per_executor,
                        min_executors=max(1, min(min_executors, max_executors)), max_executors=max_executors,
                        trigger_interval_s=sample.trigger_interval_s if sample.trigger_interval_s > 0 else 1.0)


def model_inputs(samples: Sequence[JobSample], *, adjustable: Callable[[VertexSample], bool],
                 source_partitions: int | None = None, cores_per_executor: int | None = None,
                 min_executors: int = 1, max_executors: int = 16) -> ModelInputs:
    """The model's inputs for a window of ``samples`` (oldest first) of one query run.

    ``adjustable(vertex)`` says whether the planner may change a vertex's parallelism;
    ``source_partitions`` bounds the source vertex (dict offsets' partition count). Raises
    ``ValueError`` when the newest sample has no vertex (no completed batch with its stages in REST).
    """
    if not samples or not samples[-1].vertices:
        raise ValueError("the newest sample has no vertex: no completed micro-batch had its jobs and stages in REST")
    latest = samples[-1]
    vertices = tuple(
        Vertex(id=v.vertex_id, name=v.name, parallelism=max(1, v.tasks), source=v.is_source,
               adjustable=adjustable(v), partitions=source_partitions if v.is_source and source_partitions else None)
        for v in latest.vertices)
    edges = tuple(Edge(source=u, target=v.vertex_id) for v in latest.vertices for u in v.upstream)
    ids = [v.id for v in vertices]
    window = MetricWindow.from_measurements(measurements(s, ids) for s in samples)
    batches = sum(s.batches for s in samples)
    return ModelInputs(
        topology=Topology(vertices, edges), window=window, metrics=window.aggregate(),
        cluster=cluster_state(latest, cores_per_executor=cores_per_executor, min_executors=min_executors,
                              max_executors=max_executors),
        batch_durations_s=tuple(s.batch_duration_s for s in samples if s.batches),
        mean_batch_s=sum(s.batch_duration_s * s.batches for s in samples) / batches if batches else 0.0)
