"""The plan operators each stage of a micro-batch runs, from Spark's SQL executions.

The input is ``/api/v1/applications/<id>/sql/<execution>?details=true`` JSON; see :func:`stage_operators` for
the rules (segments cut at shuffle exchanges, named by the ``(stage X.Y: task Z)`` references of
their metric strings, or by position for single-task stages).
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from graphlib import CycleError, TopologicalSorter
from typing import Any

from sparkclient.collector.metricstrings import stage_refs
from sparkclient.collector.sparkjson import (
    Problem,
    SparkDataError,
    as_dict,
    dicts,
    get_count,
    get_list,
    get_str,
    id_list,
)

__all__ = ["StagePlan", "stage_operators", "stage_plan"]

Json = dict[str, Any]

_CODEGEN_NODE = re.compile(r"^WholeStageCodegen \((\d+)\)$")
#: Plan nodes that wrap the operators of a stage rather than run one: not listed in a stage's names
#: (they stay in the graph, so the segments are the same).
_WRAPPER_NODES = frozenset({"AdaptiveSparkPlan"})

@dataclass(frozen=True)
class StagePlan:
    """What the SQL plans say of the stages they ran.

    - ``operators``: ``{stage_id: [nodeName, ...]}`` (see :func:`stage_operators`);
    - ``upstream``: ``{stage_id: (stage_id, ...)}``, the stages whose shuffle output the stage reads
      (through an exchange of the plan), for each stage whose plan segment and every segment feeding
      it were named; a source stage (a scan, no exchange below it) has ``()``.
    """

    operators: dict[int, list[str]] = field(default_factory=dict)
    upstream: dict[int, tuple[int, ...]] = field(default_factory=dict)


def stage_operators(executions: Sequence[Json], jobs: Sequence[Json] | None = None,
                    ran_stages: Collection[int] | None = None) -> dict[int, list[str]]:
    """Plan operators per stage id: :func:`stage_plan`'s ``operators``."""
    return stage_plan(executions, jobs, ran_stages).operators


def stage_plan(executions: Sequence[Json], jobs: Sequence[Json] | None = None,
               ran_stages: Collection[int] | None = None, stage_order: Sequence[int] | None = None) -> StagePlan:
    """Plan operators and upstream stages per stage id, from SQL executions fetched with
    ``details=true``.

    Returns ``{stage_id: [nodeName, ...]}`` in data-flow order (topological along the plan
    edges, ties by descending ``nodeId``, which is Spark's child-before-parent numbering).
    Codegen cluster nodes (``WholeStageCodegen (k)``), shuffle exchanges and the adaptive plan's
    wrapper (``AdaptiveSparkPlan``) are not listed.
    Executions without ``nodes`` contribute nothing. Raises :class:`SparkDataError` naming the
    field when an execution or job is malformed.

    The plan is cut at its shuffle exchanges into **segments**, one per stage. A segment takes
    the stage its nodes' metric strings name (``(stage X.Y: task Z)``). Spark prints that
    reference only for a metric with two or more task values, so the nodes of a **single-task
    stage** carry none. With ``jobs`` (``/jobs`` entries), an execution's stages are those of the
    jobs it ran (``successJobIds``, ``runningJobIds``, ``failedJobIds``) in ``(jobId, stageId)``
    order; with ``ran_stages`` (the ids of the stages that ran), only those, so a skipped stage is left out
    (adaptive execution runs a shuffle's map stage as a job of its own, and the next job lists it
    again as skipped: the plan has one segment for both); when the segments are as many as those
    stages, follow each
    other in a unique data-flow order (a chain, as in a micro-batch job without joins) and every
    referenced segment sits at the position of its stage, the segments are mapped to the stages
    by position, which names single-task stages too. References to stages outside the
    execution's jobs are ignored. Without ``jobs`` (or when the shapes disagree), only segments
    with a reference are named; a segment never borrows the stage of a neighbouring segment.

    ``stage_order``: stage ids in data-flow order (a batch's, :func:`sparkclient.collector.stages.dataflow_order`).
    An execution whose stages are all in it maps its segments by position in that order, the
    segments of a join's two inputs taken left first (the plan numbers the left input's nodes
    first, and Spark creates its RDDs first): so a join whose scans run one task each is named and
    linked too. Without it a join's segments have no unique order and are not mapped by position.
    """
    executions = [_checked_execution(e, f"sql[{i}]") for i, e in enumerate(dicts(executions, "sql"))]
    job_stages: dict[int, list[int]] = {}
    for index, job in enumerate(dicts(jobs or [], "jobs")):
        if job.get("jobId") is not None:
            job_stages[get_count(job, "jobId", f"jobs[{index}]")] = sorted(
                id_list(get_list(job, "stageIds", f"jobs[{index}]"), f"jobs[{index}].stageIds"))
    result = StagePlan()
    for execution in executions:
        ran = sorted(
            {
                int(job_id)
                for key in ("successJobIds", "runningJobIds", "failedJobIds")
                for job_id in execution.get(key) or ()
            }
        )
        stage_ids: list[int] | None = None
        if ran and all(job_id in job_stages for job_id in ran):
            stage_ids = []
            for job_id in ran:
                stage_ids += [sid for sid in job_stages[job_id] if sid not in stage_ids
                              and (ran_stages is None or sid in ran_stages)]
        ordered = stage_ids is not None and stage_order is not None and set(stage_ids) <= set(stage_order)
        if ordered:
            wanted = set(stage_ids or ())
            stage_ids = [sid for sid in stage_order or () if sid in wanted]
        operators, upstream = _execution_operators(execution, stage_ids, left_first=ordered)
        for stage_id, names in operators.items():
            result.operators.setdefault(stage_id, names)
        for stage_id, inputs in upstream.items():
            result.upstream.setdefault(stage_id, inputs)
    return result


def _checked_execution(execution: Mapping[str, Any], where: str) -> Json:
    """``execution`` when every field :func:`stage_operators` reads is well formed, else
    :class:`SparkDataError` naming the field."""
    for key in ("successJobIds", "runningJobIds", "failedJobIds"):
        id_list(get_list(execution, key, where), f"{where}.{key}")
    for index, node in enumerate(get_list(execution, "nodes", where)):
        node_where = f"{where}.nodes[{index}]"
        node = as_dict(node, node_where)
        if node.get("nodeId") is not None:
            get_count(node, "nodeId", node_where)
        get_str(node, "nodeName", node_where)
        codegen = node.get("wholeStageCodegenId")
        if codegen is not None:
            get_count(node, "wholeStageCodegenId", node_where)
        for m_index, metric in enumerate(get_list(node, "metrics", node_where)):
            metric = as_dict(metric, f"{node_where}.metrics[{m_index}]")
            get_str(metric, "name", f"{node_where}.metrics[{m_index}]")
            get_str(metric, "value", f"{node_where}.metrics[{m_index}]")
    for index, edge in enumerate(get_list(execution, "edges", where)):
        edge = as_dict(edge, f"{where}.edges[{index}]")
        for key in ("fromId", "toId"):
            if edge.get(key) is None:
                raise SparkDataError(f"{where}.edges[{index}].{key}", Problem.MISSING, "a node id")
            get_count(edge, key, f"{where}.edges[{index}]")
    return dict(execution)


def _is_exchange(node: Json) -> bool:
    """A shuffle exchange: the boundary between two stages."""
    name = str(node.get("nodeName", ""))
    if name == "Exchange" or name.startswith("Exchange "):
        return True
    return any(str(metric.get("name")) == "shuffle records written" for metric in node.get("metrics") or ())


def _execution_operators(execution: Json, stage_ids: Sequence[int] | None = None, *, left_first: bool = False,
                         ) -> tuple[dict[int, list[str]], dict[int, tuple[int, ...]]]:
    """The operators per stage id and the upstream stage ids per stage id of one execution;
    ``left_first``: ``stage_ids`` are in data-flow order, a join's left input first."""
    nodes: list[Json] = [node for node in execution.get("nodes") or () if node.get("nodeId") is not None]
    if not nodes:
        return {}, {}
    by_id = {int(node["nodeId"]): node for node in nodes}
    refs_of = _node_stage_refs(by_id, set(stage_ids) if stage_ids is not None else None)
    clusters = _codegen_clusters(by_id)
    cluster_nodes = {node_id for ids in clusters.values() for node_id in ids}
    downstream, upstream = _plan_links(execution, by_id)

    # the static side of a broadcast join: run by a job of its own (sparkclient.collector.stages.is_broadcast_job),
    # no operator of the stream's stages
    broadcast_side = _broadcast_side(by_id, upstream)
    # stage boundaries: shuffle exchanges, and any other node whose metrics name two stages
    exchanges = {
        node_id
        for node_id, node in by_id.items()
        if node_id not in cluster_nodes and node_id not in broadcast_side
        and (_is_exchange(node) or len(refs_of[node_id]) > 1)
    }
    operators = [node_id for node_id in by_id
                 if node_id not in cluster_nodes and node_id not in exchanges and node_id not in broadcast_side]
    _inherit_cluster_refs(operators, by_id, clusters, refs_of)

    segment_of, segments = _segments(operators, downstream, upstream, exchanges | cluster_nodes | broadcast_side)
    segment_refs = [set().union(*(refs_of[n] for n in members)) for members in segments]
    # a lone node without edges or references (e.g. a detached command node) is no stage
    counted = [
        index
        for index, members in enumerate(segments)
        if segment_refs[index] or any(downstream[n] or upstream[n] for n in members)
    ]
    feeds = _segment_links(counted, segment_of, exchanges, downstream, upstream)
    stage_of = _segment_stages(counted, segments, segment_refs, feeds, stage_ids, left_first=left_first,
                               by_position=_exchanges_separate(exchanges, downstream))
    return (_stage_operator_names(by_id, downstream, upstream, segment_of, stage_of),
            _stage_upstream(counted, stage_of, feeds))


def _node_stage_refs(by_id: Mapping[int, Json], allowed: set[int] | None) -> dict[int, set[int]]:
    """``{node id: stage ids its metric strings name}``, kept to ``allowed`` when given."""
    refs_of: dict[int, set[int]] = {}
    for node_id, node in by_id.items():
        refs: set[int] = set()
        for metric in node.get("metrics") or ():
            refs.update(stage for stage, _attempt in stage_refs(str(metric.get("value", ""))))
        refs_of[node_id] = refs if allowed is None else refs & allowed
    return refs_of


def _codegen_clusters(by_id: Mapping[int, Json]) -> dict[int, list[int]]:
    """``{codegen id k: ids of the WholeStageCodegen (k) nodes}``."""
    clusters: dict[int, list[int]] = {}
    for node_id, node in by_id.items():
        match = _CODEGEN_NODE.match(str(node.get("nodeName", "")))
        if match:
            clusters.setdefault(int(match.group(1)), []).append(node_id)
    return clusters


def _plan_links(execution: Json, by_id: Mapping[int, Json]) -> tuple[dict[int, list[int]], dict[int, list[int]]]:
    """``(downstream, upstream)``: per node id, the nodes its plan edges lead to and come from."""
    downstream: dict[int, list[int]] = {node_id: [] for node_id in by_id}
    upstream: dict[int, list[int]] = {node_id: [] for node_id in by_id}
    for edge in execution.get("edges") or ():
        src, dst = int(edge["fromId"]), int(edge["toId"])
        if src in by_id and dst in by_id:
            downstream[src].append(dst)
            upstream[dst].append(src)
    return downstream, upstream


def _inherit_cluster_refs(operators: Sequence[int], by_id: Mapping[int, Json], clusters: Mapping[int, list[int]],
                          refs_of: dict[int, set[int]]) -> None:
    """Members of a codegen cluster run in the stage of the cluster node numbered just below them:
    add that node's stage references to theirs (in ``refs_of``)."""
    for node_id in operators:
        codegen_id = by_id[node_id].get("wholeStageCodegenId")
        if codegen_id is None:
            continue
        candidates = clusters.get(int(codegen_id), [])
        below = [cid for cid in candidates if cid < node_id]
        chosen = max(below) if below else (candidates[0] if len(candidates) == 1 else None)
        if chosen is not None:
            refs_of[node_id] = refs_of[node_id] | refs_of[chosen]


def _segments(operators: Sequence[int], downstream: Mapping[int, list[int]], upstream: Mapping[int, list[int]],
              boundaries: set[int]) -> tuple[dict[int, int], list[list[int]]]:
    """``(segment index per node id, node ids per segment)``: operators connected by plan edges that do
    not pass through a boundary (an exchange, a codegen cluster node, the broadcast side)."""
    segment_of: dict[int, int] = {}
    segments: list[list[int]] = []
    for start in sorted(operators, reverse=True):
        if start in segment_of:
            continue
        index = len(segments)
        members: list[int] = []
        todo = [start]
        segment_of[start] = index
        while todo:
            node_id = todo.pop()
            members.append(node_id)
            for neighbour in downstream[node_id] + upstream[node_id]:
                if neighbour in segment_of or neighbour in boundaries:
                    continue
                segment_of[neighbour] = index
                todo.append(neighbour)
        segments.append(members)
    return segment_of, segments


def _segment_stages(counted: Sequence[int], segments: Sequence[list[int]], segment_refs: Sequence[set[int]],
                    feeds: Mapping[int, set[int]], stage_ids: Sequence[int] | None, *, left_first: bool,
                    by_position: bool) -> dict[int, int]:
    """``{segment: stage id}``: the one stage a segment's nodes name; or, when the segments and
    ``stage_ids`` agree in number and ``by_position`` (the exchanges separate the segments), the stages
    by position in data-flow order, if every named reference agrees with it."""
    stage_of: dict[int, int] = {
        index: next(iter(segment_refs[index])) for index in counted if len(segment_refs[index]) == 1
    }
    if stage_ids is not None and len(counted) == len(stage_ids) and by_position:
        order = _segment_order(feeds, {index: min(segments[index]) for index in counted} if left_first else None)
        positional = {index: stage_ids[position] for position, index in enumerate(order)}
        consistent = bool(order) and all(segment_refs[index] <= {positional[index]} for index in counted)
        if consistent:
            stage_of = positional
    return stage_of


def _stage_operator_names(by_id: Mapping[int, Json], downstream: Mapping[int, list[int]],
                          upstream: Mapping[int, list[int]], segment_of: Mapping[int, int],
                          stage_of: Mapping[int, int]) -> dict[int, list[str]]:
    """``{stage id: its operators' names}`` in topological order, wrapper nodes left out."""
    result: dict[int, list[str]] = {}
    for node_id in _topological(by_id, downstream, upstream):
        if node_id not in segment_of:
            continue
        stage_id = stage_of.get(segment_of[node_id])
        name = str(by_id[node_id].get("nodeName", "?"))
        if stage_id is not None and name not in _WRAPPER_NODES:
            result.setdefault(stage_id, []).append(name)
    return result


def _segment_links(counted: Sequence[int], segment_of: Mapping[int, int], exchanges: set[int],
                   downstream: Mapping[int, list[int]], upstream: Mapping[int, list[int]]) -> dict[int, set[int]]:
    """``{segment: segments feeding it}``: segment A feeds B when an exchange reads from A and feeds B."""
    wanted = set(counted)
    feeds: dict[int, set[int]] = {index: set() for index in wanted}
    for exchange in exchanges:
        sources = {segment_of[n] for n in upstream[exchange] if n in segment_of} & wanted
        targets = {segment_of[n] for n in downstream[exchange] if n in segment_of} & wanted
        for target in targets:
            feeds[target] |= sources - {target}
    return feeds


def _stage_upstream(counted: Sequence[int], stage_of: Mapping[int, int],
                    feeds: Mapping[int, set[int]]) -> dict[int, tuple[int, ...]]:
    """The upstream stage ids of each named segment's stage, when every segment feeding it is named."""
    out: dict[int, tuple[int, ...]] = {}
    for index in counted:
        if index in stage_of and all(source in stage_of for source in feeds[index]):
            out[stage_of[index]] = tuple(sorted({stage_of[source] for source in feeds[index]}))
    return out


def _broadcast_side(by_id: Mapping[int, Json], upstream: Mapping[int, list[int]]) -> set[int]:
    """The ``BroadcastExchange`` nodes and every node upstream of them: the static side of a
    broadcast join, which Spark runs in a job of its own before the batch's stages."""
    side: set[int] = set()
    todo = [node_id for node_id, node in by_id.items() if str(node.get("nodeName", "")) == "BroadcastExchange"]
    while todo:
        node_id = todo.pop()
        if node_id not in side:
            side.add(node_id)
            todo.extend(upstream[node_id])
    return side


def _exchanges_separate(exchanges: set[int], downstream: Mapping[int, list[int]]) -> bool:
    """No exchange feeds another directly (that stage would have no operator node to map)."""
    return not any(nxt in exchanges for node_id in exchanges for nxt in downstream[node_id])


def _segment_order(feeds: Mapping[int, set[int]], first_node: Mapping[int, int] | None = None) -> list[int]:
    """The segments of ``feeds`` (:func:`_segment_links`) in data-flow order. Where several are
    ready at once (the inputs of a join), with ``first_node`` (each segment's smallest node id) the
    one the plan numbers first (the left input) goes first; without it the order is not unique and
    the result is ``[]``. ``[]`` too when the segments form a cycle."""
    sorter: TopologicalSorter[int] = TopologicalSorter({index: set(sources) for index, sources in feeds.items()})
    try:
        sorter.prepare()
    except CycleError:
        return []
    order: list[int] = []
    waiting: list[int] = []
    while sorter.is_active():
        waiting += sorter.get_ready()
        if not waiting or (len(waiting) > 1 and first_node is None):
            return []
        chosen = min(waiting, key=lambda index: first_node[index]) if first_node is not None else waiting[0]
        waiting.remove(chosen)
        order.append(chosen)
        sorter.done(chosen)
    return order


def _topological(by_id: Mapping[int, Json], downstream: Mapping[int, list[int]],
                 upstream: Mapping[int, list[int]]) -> list[int]:
    """The plan's nodes in data-flow order (graphlib), the highest ``nodeId`` first among the nodes
    ready at each step. A cycle (Spark's plans have none) leaves its nodes, and those after it, to
    the end, by ``nodeId`` descending."""
    sorter: TopologicalSorter[int] = TopologicalSorter({node_id: upstream[node_id] for node_id in by_id})
    try:
        sorter.prepare()
    except CycleError:
        pass  # get_ready() still gives every node the cycle does not hold up
    heap = [-node_id for node_id in sorter.get_ready()]
    heapq.heapify(heap)
    order: list[int] = []
    while heap:
        node_id = -heapq.heappop(heap)
        order.append(node_id)
        sorter.done(node_id)
        for nxt in sorter.get_ready():
            heapq.heappush(heap, -nxt)
    if len(order) < len(by_id):
        placed = set(order)
        order += sorted((n for n in by_id if n not in placed), reverse=True)
    return order
