"""The DS2 vertices of a window: per stage position, the task-seconds, records in and out and
spill summed over the window's batches, the busiest task's busy time, the operator names from the
SQL plan, and the edges. The rules are in :mod:`sparkclient.collector.topology`'s docstring ("Vertex name",
"Edges", "Busiest task")."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from scaling.values.metrics import paced_task_busy_s
from sparkclient.collector.batchwindow import BatchWindow, progress_where
from sparkclient.collector.plan import StagePlan, stage_plan
from sparkclient.collector.sample import VertexSample
from sparkclient.collector.sparkjson import Problem, SparkDataError, dicts, get_count, get_dict, get_float, get_list
from sparkclient.collector.stages import vertex_id

__all__ = ["SLOWEST_TASK_FETCHES", "SlowestTask", "window_vertices"]

Json = dict[str, Any]

#: At most this many stage attempts per collect have their slowest task fetched (one REST call
#: each), the newest batches first; the busiest task's share of the others is taken as theirs.
SLOWEST_TASK_FETCHES = 32

#: ``(stage_id, attempt) -> the slowest task's executorRunTime in ms``, or None when unknown.
SlowestTask = Callable[[int, int], float | None]


def window_vertices(executed: Sequence[tuple[Json, list[Json]]], window: BatchWindow, sql: Sequence[Json] | None,
                    jobs: Sequence[Json], errors: list[str], *, slots: int = 1,
                    slowest_task_ms: SlowestTask | None = None) -> tuple[VertexSample, ...]:
    """The vertices aggregated over the executed batches that ran as many stages as the newest one
    (the others get a note in ``errors``), named from the SQL plan when it is usable.

    ``slowest_task_ms`` (a stage attempt's slowest task, ms) and ``slots`` (the cores the tasks ran
    on) give each vertex its busiest task's busy time ``busy_max_s`` (see ``_busiest_task_s``)."""
    if not executed:
        return ()
    reference = len(executed[-1][1])
    kept = []
    for progress, ordered in executed:
        if len(ordered) != reference:
            errors.append(
                f"batch {progress['batchId']}: ran {len(ordered)} stage(s) where the newest batch ran "
                f"{reference}; left out of the vertices"
            )
        else:
            kept.append((progress, ordered))
    try:
        ran = {stage.get("stageId") for _progress, ordered in kept for stage in ordered}
        plan = stage_plan(dicts(sql or [], "sql"), jobs, ran_stages=ran,
                          stage_order=[stage.get("stageId") for stage in kept[-1][1]] if kept else None)
    except SparkDataError as exc:
        plan = StagePlan()
        errors.append(f"SQL plan not usable ({exc}); vertex names fall back")
    span_s = window.span_of(int(p["batchId"]) for p, _stages in kept)
    return _aggregate_vertices(kept, plan, span_s=span_s, slots=slots, slowest_task_ms=slowest_task_ms)


def _busiest_task_s(batches: Sequence[tuple[Json, list[Json]]], position: int, busy_s: float, slots: int,
                    slowest_task_ms: SlowestTask | None) -> float | None:
    """The busiest task's busy time of the stage at ``position`` over the batches, seconds per task:
    Σ over the batches of ``scaling.values.metrics.paced_task_busy_s`` (the slowest task on ``slots``
    cores). At most ``SLOWEST_TASK_FETCHES`` stage attempts are asked for, newest first (the caller
    shares the budget by position); when some batches are not, the measured batches' ratio of paced to
    mean busy time scales the whole window's mean. None when no batch's slowest task is known."""
    if slowest_task_ms is None or busy_s <= 0:
        return None
    paced = mean = 0.0
    asked = 0
    for _progress, ordered in reversed(batches):
        if asked >= max(1, SLOWEST_TASK_FETCHES // max(1, len(ordered))):
            break
        stage = ordered[position]
        where = f"stage {stage.get('stageId')}"
        asked += 1
        slowest = slowest_task_ms(get_count(stage, "stageId", where), get_count(stage, "attemptId", where))
        if slowest is None:
            continue
        tasks = max(1, get_count(stage, "numTasks", where))
        stage_busy_s = get_float(stage, "executorRunTime", where) / 1000.0
        paced += paced_task_busy_s(slowest / 1000.0, stage_busy_s, tasks, max(1, slots))
        mean += stage_busy_s / tasks
    if mean <= 0:
        return None
    tasks_now = max(1, get_count(batches[-1][1][position], "numTasks", "stage"))
    return busy_s / tasks_now * paced / mean


def _aggregate_vertices(
    batches: Sequence[tuple[Json, list[Json]]], plan: StagePlan, *, span_s: float = 0.0,
    slots: int = 1, slowest_task_ms: SlowestTask | None = None,
) -> tuple[VertexSample, ...]:
    if not batches:
        return ()
    newest_stages = batches[-1][1]
    count = len(newest_stages)
    operators = plan.operators
    upstream = _upstream(newest_stages, plan.upstream)
    sources = {position for position in range(count) if not upstream[position]}
    busy_ms = [0.0] * count
    rec_in = [0] * count
    rec_out = [0] * count
    spill = [0] * count
    for progress, ordered in batches:
        batch_where = progress_where(progress)
        sink_rows = get_count(get_dict(progress, "sink", batch_where), "numOutputRows", f"{batch_where}.sink",
                              default=-1, minimum=-1)
        for position, stage in enumerate(ordered):
            where = f"stage {stage.get('stageId')}"
            busy_ms[position] += get_float(stage, "executorRunTime", where)
            spill[position] += (get_count(stage, "memoryBytesSpilled", where)
                                + get_count(stage, "diskBytesSpilled", where))
            if position in sources:
                # a scan's rows; the batch's rows when it is the query's only source and lists none
                records_in = get_count(stage, "inputRecords", where) or (
                    get_count(progress, "numInputRows", batch_where) if len(sources) == 1 else 0)
            else:
                records_in = get_count(stage, "shuffleReadRecords", where)
            rec_in[position] += records_in
            if position < count - 1:
                rec_out[position] += get_count(stage, "shuffleWriteRecords", where)
            elif sink_rows >= 0:
                rec_out[position] += sink_rows
            else:
                rec_out[position] += get_count(stage, "outputRecords", where) or records_in

    names: list[str] = []
    for position in range(count):
        name = f"stage {position}"
        for _progress, ordered in reversed(batches):
            ops = operators.get(get_count(ordered[position], "stageId", "stage"))
            if ops:
                name = " → ".join(ops)
                break
        names.append(name)

    return tuple(
        VertexSample(
            vertex_id=vertex_id(position),
            name=names[position],
            position=position,
            is_source=position in sources,
            tasks=get_count(newest_stages[position], "numTasks", f"stage {newest_stages[position].get('stageId')}"),
            busy_s=busy_ms[position] / 1000.0,
            busy_max_s=_busiest_task_s(batches, position, busy_ms[position] / 1000.0, slots, slowest_task_ms),
            records_in=rec_in[position],
            records_out=rec_out[position],
            spill_bytes=spill[position],
            upstream=upstream[position],
            span_s=span_s,
        )
        for position in range(count)
    )


def _upstream(ordered: Sequence[Json], plan_upstream: Mapping[int, tuple[int, ...]]) -> list[tuple[str, ...]]:
    """The vertex ids feeding each position of ``ordered`` (the newest batch's stages): from the stages'
    ``parentIds`` when Spark gives them; else from the SQL plan (``plan_upstream``, stage id -> the
    stage ids it reads through an exchange) when it covers every stage, each stage's inputs are stages
    of the batch that come before it, and the first has none; else a chain in stage order (module
    docstring of :mod:`sparkclient.collector.topology`, "Edges")."""
    stage_ids = [get_count(stage, "stageId", "stage") for stage in ordered]
    position_of = {stage_id: position for position, stage_id in enumerate(stage_ids)}
    parents = [_stage_parent_ids(stage) for stage in ordered]
    if any(parents):
        return [
            tuple(vertex_id(position_of[parent]) for parent in sorted(ids) if parent in position_of)
            for ids in parents
        ]
    if stage_ids and all(stage_id in plan_upstream and set(plan_upstream[stage_id]) <= position_of.keys()
                         for stage_id in stage_ids):
        links = [tuple(sorted(position_of[parent] for parent in plan_upstream[stage_id])) for stage_id in stage_ids]
        # each input of a stage comes before it in the vertex order (data-flow order)
        if not links[0] and all(all(parent < position for parent in ids) for position, ids in enumerate(links)):
            return [tuple(vertex_id(parent) for parent in ids) for ids in links]
    return [() if position == 0 else (vertex_id(position - 1),) for position in range(len(ordered))]


def _stage_parent_ids(stage: Mapping[str, Any]) -> list[int]:
    where = f"stage {stage.get('stageId')}"
    out = []
    for position, value in enumerate(get_list(stage, "parentIds", where)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise SparkDataError(f"{where}.parentIds[{position}]", Problem.WRONG_TYPE, "a stage id", value)
        out.append(value)
    return out
