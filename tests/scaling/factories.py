"""Shared set-up of the scaling tests: scenario documents evaluated as ``python -m scaling evaluate``
evaluates them, the planner's worked three-stage job, a one-vertex plan, and one not-ready issue of each code."""

from __future__ import annotations

import json

from scaling.scenario.format import evaluate_text
from scaling.values.metrics import VertexMetrics
from scaling.values.plan import JobPlan, VertexPlan
from scaling.values.readiness import NotReady
from scaling.values.reasons import Decision
from scaling.values.topology import Edge, Topology, Vertex


def steps_of(doc: dict) -> list[dict]:
    """The output steps of the scenario document ``doc`` (SCENARIO.md), through ``evaluate_text``."""
    return evaluate_text(json.dumps(doc))["steps"]


def three_stages(*, pinned_second: bool) -> tuple[Topology, dict[str, VertexMetrics]]:
    """Three stages with true processing rates 2,000 / 500 / 4,000 records per busy core-second and
    selectivities 1 / 1 / 0.01, at 1,000 records/s arriving, no backlog, 10 % batch overhead.

    Busy time per task is chosen to give those rates (busy core-seconds per second 0.5 / 2 / 0.25).
    Every stage runs 8 tasks (more than the cores, so each uses all cores), except a pinned
    ``enrich``, which keeps 2 tasks: on more than 2 cores it still uses 2 of them.
    """
    enrich_tasks = 2 if pinned_second else 8
    topology = Topology(
        (Vertex("scan", parallelism=8, source=True), Vertex("enrich", parallelism=enrich_tasks,
                                                             adjustable=not pinned_second),
         Vertex("agg", parallelism=8)),
        (Edge("scan", "enrich"), Edge("enrich", "agg")))
    metrics = {
        "scan": VertexMetrics(1000, 1000, 62.5, batch_overhead_s=0.1),
        "enrich": VertexMetrics(1000, 1000, 2000 / enrich_tasks, batch_overhead_s=0.1),
        "agg": VertexMetrics(1000, 10, 31.25, batch_overhead_s=0.1),
    }
    return topology, metrics


def one_vertex_plan(decision: Decision = Decision.NO_CHANGE, proposed: int = 2) -> JobPlan:
    """A micro-batch plan of one adjustable vertex ``v1`` at 2 tasks (``proposed`` next) on 2 executors of
    1 core, 100 records/s per busy core-second."""
    vertex = VertexPlan("v1", 2, proposed, 100.0, 100.0, 1.0, 50.0, 0.0, 2, 0.5, 1.0, True)
    return JobPlan(decision, (), (vertex,), executors_current=2, executors_proposed=2, cores_per_executor=1)


#: One not-ready issue of each code, with the data its words need (as the collector and the web app write it).
NOT_READY_DATA = {
    NotReady.MISSING_STAGES: {"batches": 2, "of": 6},
    NotReady.SQL_PLAN_UNUSABLE: {"sources": 2, "source_stages": 1},
    NotReady.FIRST_BATCH: {"batch_id": 0},
    NotReady.RESTART_IN_WINDOW: {"batches": 1},
    NotReady.BINDING_MISMATCH: {"knob": "state_partitions", "knob_value": 1, "tasks_ran": 200, "position": 2},
    NotReady.IMPLAUSIBLE_CORES: {"cores": 4000, "limit": 8},
    NotReady.IMPLAUSIBLE_RATE: {"source": 0, "rate_per_s": 2400.0, "limit_per_s": 800.0},
}
