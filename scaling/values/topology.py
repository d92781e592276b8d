"""Job vertices and edges of a streaming job, and the topology they form (a DAG, checked)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from functools import cached_property
from graphlib import CycleError, TopologicalSorter

from scaling.policy.numbers import is_finite_number

SHIP_STRATEGIES = ("forward", "hash", "rebalance")


class TopologyError(ValueError):
    """The topology is not a valid DAG (unknown vertex, duplicate id, cycle, bad value)."""


class PinCause(StrEnum):
    """Why a stage's partitions are pinned, where known (``Vertex.pin_cause``; the values of the
    binding's ``sparkclient.contract.binding.PinReason``)."""

    NO_KNOB = "no-knob"            # no knob sets the stage's tasks
    SHUFFLE_DEFAULT = "shuffle-default"  # no knob sets the shuffle: it runs the session's spark.sql.shuffle.partitions
    STATE_STORE = "state-store"    # the checkpoint's state store cannot be repartitioned offline (not RocksDB)
    SINK_LOG = "sink-log"          # the sink's own batch log would miss the offline repartition's batch


@dataclass(frozen=True)
class Vertex:
    """A job vertex: in Spark, one stage of the micro-batch job; in Flink, an operator chain. Raises
    ``TopologyError`` for an empty id, a count below 1 or a retention that is not a finite number > 0."""

    id: str  # stable across batches and restarts
    name: str = ""  # the plan operators it runs, for people (``MicroBatchScan → Filter → Project``)
    parallelism: int = 1  # current number of tasks (partitions) or subtasks
    max_parallelism: int = 32768  # upper bound for the parallelism (Flink's key groups)
    partitions: int | None = None  # number of source partitions, for a source; bounds its parallelism
    source: bool = False  # whether the vertex reads from an external source
    adjustable: bool = True  # False pins the parallelism (e.g. a stateful stage whose checkpoint fixes it)
    #: for a source, how long its log keeps records, seconds (None: unknown); the micro-batch plan warns when
    #: the backlog's age nears it.
    retention_s: float | None = None
    #: for a stage that is not adjustable, why (None: not known); it chooses the action of a pinned bottleneck
    #: (``scaling.values.findings``).
    pin_cause: PinCause | None = None

    def __post_init__(self) -> None:
        if self.retention_s is not None and not (is_finite_number(self.retention_s) and self.retention_s > 0):
            raise TopologyError(f"vertices[{self.id}].retention_s: must be a finite number > 0, got {self.retention_s}")
        if not self.id:
            raise TopologyError("vertices[].id: must be a non-empty string")
        if self.parallelism < 1:
            raise TopologyError(f"vertices[{self.id}].parallelism: must be >= 1, got {self.parallelism}")
        if self.max_parallelism < 1:
            raise TopologyError(f"vertices[{self.id}].max_parallelism: must be >= 1, got {self.max_parallelism}")
        if self.partitions is not None and self.partitions < 1:
            raise TopologyError(f"vertices[{self.id}].partitions: must be >= 1, got {self.partitions}")


@dataclass(frozen=True)
class Edge:
    """A data channel from ``source`` to ``target`` with its input ship strategy."""

    source: str
    target: str
    ship: str = "hash"

    def __post_init__(self) -> None:
        if self.ship not in SHIP_STRATEGIES:
            raise TopologyError(f"edges[{self.source}->{self.target}].ship: must be one of "
                                f"{', '.join(SHIP_STRATEGIES)}, got {self.ship!r}")


@dataclass(frozen=True)
class Topology:
    """A DAG of vertices.

    Raises:
        TopologyError: duplicate vertex ids, an edge naming an unknown vertex, or a cycle.
    """

    vertices: tuple[Vertex, ...]
    edges: tuple[Edge, ...] = field(default=())

    def __post_init__(self) -> None:
        ids = [v.id for v in self.vertices]
        if len(set(ids)) != len(ids):
            dup = sorted({i for i in ids if ids.count(i) > 1})
            raise TopologyError(f"vertices: duplicate id {dup[0]!r}")
        known = set(ids)
        for edge in self.edges:
            for end in (edge.source, edge.target):
                if end not in known:
                    raise TopologyError(f"edges: unknown vertex {end!r} in {edge.source}->{edge.target}")
        try:
            _ = self.order
        except CycleError as exc:
            raise TopologyError(f"edges: cycle through {' -> '.join(map(str, exc.args[1]))}") from exc

    @cached_property
    def order(self) -> tuple[str, ...]:
        """Vertex ids in topological order (sources first), ties broken by declaration order."""
        position = {v.id: i for i, v in enumerate(self.vertices)}
        sorter: TopologicalSorter[str] = TopologicalSorter({v.id: () for v in self.vertices})
        for edge in self.edges:
            sorter.add(edge.target, edge.source)
        sorter.prepare()
        result: list[str] = []
        while sorter.is_active():
            ready = sorted(sorter.get_ready(), key=position.__getitem__)
            result.extend(ready)
            sorter.done(*ready)
        return tuple(result)

    @cached_property
    def _by_id(self) -> dict[str, Vertex]:
        return {v.id: v for v in self.vertices}

    @cached_property
    def _inputs(self) -> dict[str, tuple[Edge, ...]]:
        found: dict[str, list[Edge]] = {v.id: [] for v in self.vertices}
        for edge in self.edges:
            found[edge.target].append(edge)
        return {k: tuple(v) for k, v in found.items()}

    @cached_property
    def _outputs(self) -> dict[str, tuple[Edge, ...]]:
        found: dict[str, list[Edge]] = {v.id: [] for v in self.vertices}
        for edge in self.edges:
            found[edge.source].append(edge)
        return {k: tuple(v) for k, v in found.items()}

    def vertex(self, vertex_id: str) -> Vertex:
        """Return the vertex with that id. Raises KeyError naming the id when unknown."""
        try:
            return self._by_id[vertex_id]
        except KeyError:
            raise KeyError(f"unknown vertex {vertex_id!r}") from None

    def inputs(self, vertex_id: str) -> tuple[Edge, ...]:
        """The edges into ``vertex_id``."""
        return self._inputs[vertex_id]

    def outputs(self, vertex_id: str) -> tuple[Edge, ...]:
        """The edges out of ``vertex_id``."""
        return self._outputs[vertex_id]

    def is_source(self, vertex_id: str) -> bool:
        """A vertex is a source when it says so or has no input edge."""
        return self._by_id[vertex_id].source or not self._inputs[vertex_id]

    def with_parallelism(self, parallelism: Mapping[str, int]) -> Topology:
        """A copy with the parallelism of some vertices replaced (e.g. after a rescale)."""
        if not parallelism:
            return self
        unknown = sorted(set(parallelism) - set(self._by_id))
        if unknown:
            raise TopologyError(f"parallelism: unknown vertex {unknown[0]!r}")
        vertices = tuple(replace(v, parallelism=parallelism[v.id]) if v.id in parallelism else v
                         for v in self.vertices)
        return Topology(vertices, self.edges)
