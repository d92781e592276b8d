"""One short name per stage, the same in the graph, the proposal, the charts and the API.

Spark names a stage by its operator chain ("HashAggregate → StateStoreRestore → HashAggregate →
StateStoreSave"): too long for a node, and v0/v1/v2 say nothing. The stage name is the chain's most
defining operator (a stateful operator before a join, a join before a Python UDF, ..., a scan last),
or the whole name when it is already short; duplicates among one job's stages get their vertex id.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

#: Operators that say what a stage does, most defining first.
DEFINING_OPERATORS = (
    "StateStoreSave", "SessionWindowStateStoreSave", "TransformWithState", "FlatMapGroupsWithState",
    "FlatMapGroupsInPandas", "StreamingSymmetricHashJoin", "SortMergeJoin", "BroadcastHashJoin",
    "MapInPandas", "MapInArrow", "BatchEvalPython", "ArrowEvalPython", "Window", "HashAggregate", "Sort",
    "Generate", "Expand", "MicroBatchScan", "Scan")
#: Longest name kept as it is.
SHORT = 24


def stage_name(name: str, vertex_id: str = "") -> str:
    """The short name of one stage from Spark's operator chain ``name`` (``"a → b → c"``).

    >>> stage_name("HashAggregate → StateStoreRestore → HashAggregate → StateStoreSave")
    'StateStoreSave'
    >>> stage_name("stage 1")
    'stage 1'
    """
    name = (name or "").strip()
    if not name:
        return vertex_id or "stage"
    operators = [op.strip() for op in name.split("→") if op.strip()]
    if len(operators) == 1 and len(name) <= SHORT:
        return name
    heads = [op.split()[0] for op in operators]
    for wanted in DEFINING_OPERATORS:
        if wanted in heads:
            return wanted
    return heads[0][:SHORT]


def stage_names(stages: Iterable[tuple[str, str]]) -> dict[str, str]:
    """``{vertex_id: stage name}`` for ``(vertex_id, spark name)`` pairs of one job; a name shared by
    two stages gets the vertex id appended (``"HashAggregate (v3)"``)."""
    pairs = [(vertex_id, stage_name(name, vertex_id)) for vertex_id, name in stages]
    counts = Counter(short for _, short in pairs)
    return {vertex_id: (f"{short} ({vertex_id})" if counts[short] > 1 else short) for vertex_id, short in pairs}
