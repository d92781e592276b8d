"""Stage ↔ knob binding, derived from the physical plan and confirmed against the tasks Spark ran.

The runner walks the executed plan of the query's last micro-batch (:func:`plan_stages_of`) and
publishes one :class:`PlanStage` per stage, upstream first, split at each ``ShuffleExchangeExec``:

- a stage fed by a scan is a ``source`` stage (its task count is the source's partitions);
- a stage fed by ``Exchange ... REPARTITION_BY_NUM`` is a ``repartition`` stage with that exchange's
  partition count (a ``repartition(n)`` call);
- a stage fed by any other exchange is a ``shuffle`` stage, with ``spark.sql.shuffle.partitions``
  partitions; ``stateful`` when it runs a state store operator.

:func:`bind_stages` then binds each stage to the knob that sets its task count (source →
the ``source_partitions`` knob, or with several such knobs the k-th source stage in data-flow order →
the k-th; the k-th ``repartition`` stage → the k-th ``repartition`` knob in declaration order;
shuffle → the ``shuffle_partitions``/``state_partitions`` knob) and confirms the binding: the knob's
running value must equal the plan's partition count and the tasks Spark ran. Anything else is a
:attr:`BindingStatus.MISMATCH` with its reason; the autoscaler proposes nothing for such a stage.
There is never a silent wrong binding.

A ``foreachBatch`` function that runs shuffles of its own (a ``groupBy``, a join) runs stages the
query's plan does not have: the batch then has more stages than the plan. The plan's stages are the
batch's first ones in data-flow order (the function reads the output of the plan's last stage), and
bind as above; each stage after them is a :attr:`StageInput.BATCH_FUNCTION` stage. The function's
shuffles take ``spark.sql.shuffle.partitions`` from the query's session, so such a stage binds to the
``shuffle_partitions``/``state_partitions`` knob when it ran the knob's tasks, is a
:attr:`MismatchReason.BATCH_FUNCTION` mismatch when it did not (a ``repartition(n)`` or a scan of the
function's own), and is pinned (:attr:`PinReason.NO_KNOB`) when the pipeline declares no such knob.
The runner marks a ``foreachBatch`` query by the sink class of its last plan stage
(:data:`FOREACH_BATCH_SINK`); any other query whose batch and plan differ in number of stages is a
:attr:`MismatchReason.STAGE_COUNT` mismatch on every stage.

A stage no knob can change is :attr:`BindingStatus.PINNED`, with its :class:`PinReason`: no knob
sets it (a hard-coded ``repartition(n)``; a shuffle that runs the session's
``spark.sql.shuffle.partitions``, Spark's default 200 unless set, is
:attr:`PinReason.SHUFFLE_DEFAULT`), or it is a stateful stage whose checkpoint holds state that
cannot be repartitioned offline (:func:`offline_repartition_blocker` of ``PlanStage.state_store`` and
``PlanStage.sink``, published by the runner): a store other than RocksDB's
(:mod:`sparkclient.runner.staterepartition`), or a sink that keeps its own batch log. Spark restores a
stateful query's partitions from its checkpoint, so the knob would change nothing there, and the
runner refuses it (``state-not-repartitionable``); the binding says so before anything is proposed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from enum import StrEnum
from typing import Any

from sparkclient.contract.spec import Knob, KnobTarget

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
HDFS_PROVIDER = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
#: State store providers whose checkpoint the runner can repartition offline (Spark's offline state
#: rewrite reads and writes RocksDB state only). The one rule for the runner's refusal
#: (``sparkclient.runner.staterepartition.check_repartition``) and the binding's pin
#: (:func:`offline_repartition_blocker`).
REPARTITIONABLE_STATE_STORES = frozenset({ROCKSDB_PROVIDER})

__all__ = ["FOREACH_BATCH_SINK", "OFFLINE_UNSAFE_SINKS",
           "REPARTITIONABLE_STATE_STORES", "BindingStatus", "MismatchReason", "PinReason",
           "PlanStage", "StageBinding", "StageInput", "bind_stages", "disagreeing_bindings",
           "offline_repartition_blocker", "plan_stages_from_json", "plan_stages_of", "plan_stages_to_json",
           "with_state_store"]

#: Sinks (``Sink`` class simple names) that keep a batch log of their own, which the offline
#: repartition's extra batch ``N+1`` (offsets and commit only) leaves with a hole: the file sink's
#: ``<path>/_spark_metadata`` compacts every 10 batches by reading each batch id since the last
#: compaction, so the query then fails with ``BATCH_METADATA_NOT_FOUND`` at every start (measured on a
#: user's dropDuplicatesWithinWatermark -> parquet query: the compaction at batch 39 after a
#: repartition recorded as batch 33).
OFFLINE_UNSAFE_SINKS = frozenset({"FileStreamSink"})
#: The sink class (simple name) of a ``foreachBatch`` query, whose function may run stages of its own.
FOREACH_BATCH_SINK = "ForeachBatchSink"

#: The plan node (``AQEShuffleReadExec.nodeName``) by which adaptive execution reads a shuffle with
#: coalesced, split or local partitions instead of the exchange's.
ADAPTIVE_READ = "AQEShuffleRead"
#: Physical plan node names (``SparkPlan.nodeName``) of stateful streaming operators.
STATEFUL_NODES = frozenset({
    "StateStoreSave", "StateStoreRestore", "SessionWindowStateStoreSave", "SessionWindowStateStoreRestore",
    "StreamingDeduplicate", "StreamingDeduplicateWithinWatermark", "StreamingSymmetricHashJoin",
    "FlatMapGroupsWithState", "TransformWithState", "TransformWithStateInPandas",
    "FlatMapGroupsInPandasWithState",
})


class StageInput(StrEnum):
    """What feeds a stage, and so what sets its task count."""

    SOURCE = "source"
    REPARTITION = "repartition"
    SHUFFLE = "shuffle"
    BATCH_FUNCTION = "batch-function"  # a stage the foreachBatch function runs (a binding's, in no plan)


@dataclass(frozen=True)
class PlanStage:
    """One stage of the micro-batch plan (upstream first). ``partitions``: the feeding exchange's
    partition count (None for a source stage); ``operators``: plan node names, upstream first;
    ``state_store``: for a stateful stage whose checkpoint holds state, the state store provider
    class the checkpoint was written with (None otherwise, or not known); ``sink``: the query's sink
    class (simple name, e.g. ``FileStreamSink``; None when not known) on the plan's last stage, and
    on a stateful stage whose ``state_store`` is set."""

    input: StageInput
    partitions: int | None
    stateful: bool
    operators: tuple[str, ...] = ()
    state_store: str | None = None
    sink: str | None = None


class BindingStatus(StrEnum):
    BOUND = "bound"            # the knob sets this stage's tasks, confirmed
    PINNED = "pinned"          # no knob can change it (see PinReason): never proposed
    MISMATCH = "mismatch"      # the plan, the knob and the tasks ran disagree: never proposed
    UNVERIFIED = "unverified"  # no plan published yet: never proposed


class MismatchReason(StrEnum):
    NO_PLAN = "no-plan"                    # the runner has not published the plan's stages
    STAGE_COUNT = "stage-count"            # the plan's stages and the batch's stages differ in number
    PLAN_PARTITIONS = "plan-partitions"    # the knob's value is not the plan's partition count
    TASKS = "tasks"                        # the knob's value is not the task count Spark ran
    COALESCED = "coalesced"                # adaptive execution read the shuffle with other tasks than the knob
    BATCH_FUNCTION = "batch-function"      # a foreachBatch function's stage ran other tasks than the shuffle knob


class PinReason(StrEnum):
    NO_KNOB = "no-knob"                    # no knob sets the stage's tasks (a hard-coded value)
    SHUFFLE_DEFAULT = "shuffle-default"    # no knob sets the shuffle: it runs the session's
    #                                        spark.sql.shuffle.partitions (Spark's default 200 unless set)
    STATE_STORE = "state-store"            # the checkpoint's state store cannot be repartitioned offline
    SINK_LOG = "sink-log"                  # the sink's own batch log would miss the repartition's batch

    @property
    def by_checkpoint(self) -> bool:
        """Whether the checkpoint pins the knob (the runner refuses any change of it)."""
        return self not in (PinReason.NO_KNOB, PinReason.SHUFFLE_DEFAULT)


def offline_repartition_blocker(state_store: str | None, sink: str | None) -> PinReason | None:
    """Why a checkpoint holding state in ``state_store`` (provider class) for a query writing to
    ``sink`` (sink class simple name) cannot be repartitioned offline, or None when it can (or the
    checkpoint holds no state: ``state_store`` None)."""
    if state_store is None:
        return None
    if state_store not in REPARTITIONABLE_STATE_STORES:
        return PinReason.STATE_STORE
    return PinReason.SINK_LOG if sink in OFFLINE_UNSAFE_SINKS else None


@dataclass(frozen=True)
class StageBinding:
    """The binding of stage ``position``: the knob (or None), its status, and the three numbers
    compared (knob value, plan partitions, tasks ran; None where not known). A pinned stage has its
    ``pin`` reason (and, when the checkpoint pins it, the knob, the ``state_store`` provider class and
    the ``sink`` class)."""

    position: int
    status: BindingStatus
    knob: str | None = None
    reason: MismatchReason | None = None
    knob_value: int | None = None
    plan_partitions: int | None = None
    tasks_ran: int | None = None
    input: StageInput | None = None
    pin: PinReason | None = None
    state_store: str | None = None
    sink: str | None = None

    @property
    def adjustable(self) -> bool:
        return self.status is BindingStatus.BOUND

    @property
    def problem(self) -> bool:
        """Whether the stage is neither bound nor pinned (a mismatch, or no plan yet): nothing is
        proposed for it, and the job page says why."""
        return self.status in (BindingStatus.MISMATCH, BindingStatus.UNVERIFIED)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(status=self.status.value, reason=self.reason.value if self.reason else None,
                    input=self.input.value if self.input else None, pin=self.pin.value if self.pin else None)
        return data


def _stage_knob(stage: PlanStage, index: int, knobs: Sequence[Knob]) -> Knob | None:
    """The knob that sets ``stage``, the ``index``-th stage of its input kind in the plan: the one
    ``source_partitions`` knob for every source stage, or the ``index``-th of several; the
    ``index``-th ``repartition`` knob; the shuffle knob. None when there is none."""
    if stage.input in (StageInput.SOURCE, StageInput.REPARTITION):
        target = KnobTarget.SOURCE_PARTITIONS if stage.input is StageInput.SOURCE else KnobTarget.REPARTITION
        declared = [k for k in knobs if k.sets is target]
        if stage.input is StageInput.SOURCE and len(declared) == 1:
            return declared[0]
        return declared[index] if index < len(declared) else None
    return _shuffle_knob(knobs)


def _shuffle_knob(knobs: Sequence[Knob]) -> Knob | None:
    return next((k for k in knobs if k.sets.session_conf), None)


def _function_binding(position: int, tasks: int, knobs: Sequence[Knob], values: Mapping[str, int]) -> StageBinding:
    """The binding of a stage the ``foreachBatch`` function runs (module docstring)."""
    knob = _shuffle_knob(knobs)
    if knob is None:
        return StageBinding(position, BindingStatus.PINNED, pin=PinReason.NO_KNOB, tasks_ran=tasks,
                            input=StageInput.BATCH_FUNCTION)
    value = values.get(knob.name, knob.default)
    reason = None if tasks == value else MismatchReason.BATCH_FUNCTION
    return StageBinding(position, BindingStatus.MISMATCH if reason else BindingStatus.BOUND, knob=knob.name,
                        reason=reason, knob_value=value, tasks_ran=tasks, input=StageInput.BATCH_FUNCTION)


def bind_stages(plan: Sequence[PlanStage] | None, knobs: Sequence[Knob], values: Mapping[str, int],
                tasks_ran: Sequence[int]) -> tuple[StageBinding, ...]:
    """Bind each of the ``len(tasks_ran)`` stages of a micro-batch to its knob (see the module docstring).

    Args:
        plan: the plan's stages, upstream first, or None when not published.
        knobs: the pipeline's knob declarations.
        values: the running knob values.
        tasks_ran: tasks of each stage of the newest batch, in the same order.

    Returns:
        One :class:`StageBinding` per stage, in order.
    """
    if plan is None:
        return tuple(StageBinding(i, BindingStatus.UNVERIFIED, reason=MismatchReason.NO_PLAN, tasks_ran=t)
                     for i, t in enumerate(tasks_ran))
    function_stages = bool(plan) and plan[-1].sink == FOREACH_BATCH_SINK and len(plan) < len(tasks_ran)
    if len(plan) != len(tasks_ran) and not function_stages:
        return tuple(StageBinding(i, BindingStatus.MISMATCH, reason=MismatchReason.STAGE_COUNT, tasks_ran=t)
                     for i, t in enumerate(tasks_ran))
    out: list[StageBinding] = []
    seen = {kind: 0 for kind in StageInput}
    for position, (stage, tasks) in enumerate(zip(plan, tasks_ran[:len(plan)], strict=True)):
        knob = _stage_knob(stage, seen[stage.input], knobs)
        seen[stage.input] += 1
        common = {"tasks_ran": tasks, "plan_partitions": stage.partitions, "input": stage.input}
        if knob is None:
            pin = PinReason.SHUFFLE_DEFAULT if stage.input is StageInput.SHUFFLE else PinReason.NO_KNOB
            out.append(StageBinding(position, BindingStatus.PINNED, pin=pin, **common))
            continue
        value = values.get(knob.name, knob.default)
        blocker = offline_repartition_blocker(stage.state_store, stage.sink) if stage.stateful else None
        if blocker is not None:
            out.append(StageBinding(position, BindingStatus.PINNED, knob=knob.name, knob_value=value, pin=blocker,
                                    state_store=stage.state_store, sink=stage.sink, **common))
            continue
        reason = None
        if stage.partitions is not None and stage.partitions != value:
            reason = MismatchReason.PLAN_PARTITIONS
        elif tasks != value:
            # AQEShuffleRead: adaptive execution coalesced (or split) the shuffle's partitions at run
            # time, which the runner turns off unless the operator's --conf turned it on.
            reason = MismatchReason.COALESCED if ADAPTIVE_READ in stage.operators else MismatchReason.TASKS
        status = BindingStatus.MISMATCH if reason else BindingStatus.BOUND
        out.append(StageBinding(position, status, knob=knob.name, reason=reason, knob_value=value, **common))
    out.extend(_function_binding(position, tasks, knobs, values)
               for position, tasks in enumerate(tasks_ran) if position >= len(plan))
    # The runner refuses any change of a knob the checkpoint pins, so every stage it sets is pinned.
    pinned = {b.knob: b for b in out if b.pin is not None and b.pin.by_checkpoint}
    return tuple(replace(b, status=BindingStatus.PINNED, reason=None, pin=pinned[b.knob].pin,
                         state_store=pinned[b.knob].state_store, sink=pinned[b.knob].sink)
                 if b.knob in pinned and b.pin is None else b for b in out)


def disagreeing_bindings(bindings: Sequence[StageBinding]) -> tuple[StageBinding, ...]:
    """The stages whose knob disagrees with the tasks Spark ran: a mismatch (``PLAN_PARTITIONS`` or
    ``TASKS``) whose tasks differ from the knob's value, for a knob that ran its value's tasks in
    *no* stage bound to it (200 tasks against a knob of 1: the knob is bound to the wrong stage, or
    the configuration running is not the knob's). A knob that sets one of its stages as declared
    is confirmed (a join's second scan runs its own source's partitions), and a stale published
    plan alone (tasks as the knob says) is no disagreement. Such a sample is not ready
    (``scaling.values.readiness.NotReady.BINDING_MISMATCH``)."""
    wrong = [b for b in bindings if b.knob and b.reason in (MismatchReason.PLAN_PARTITIONS, MismatchReason.TASKS)
             and b.tasks_ran is not None and b.knob_value is not None and b.tasks_ran != b.knob_value]
    confirmed = {b.knob for b in bindings if b.knob and b.tasks_ran is not None and b.tasks_ran == b.knob_value}
    return tuple(b for b in wrong if b.knob not in confirmed)


def plan_stages_to_json(stages: Sequence[PlanStage]) -> str:
    """The stages as a JSON array (published in the runner status)."""
    return json.dumps([{key: value for key, value in
                        {**asdict(s), "input": s.input.value, "operators": list(s.operators)}.items()
                        if key not in ("state_store", "sink") or value is not None} for s in stages])


def with_state_store(stages: Sequence[PlanStage], provider: str | None,
                     sink: str | None = None) -> tuple[PlanStage, ...]:
    """``stages`` with ``provider`` (the checkpoint's state store class, or None when it holds no
    state) and the query's ``sink`` class set on each stateful stage, and the ``sink`` class on the
    last stage (the one that writes to it)."""
    out = [replace(s, state_store=provider, sink=sink if provider else None) if s.stateful else s for s in stages]
    if out and sink is not None:
        out[-1] = replace(out[-1], sink=sink)
    return tuple(out)


def plan_stages_from_json(text: str | bytes | None) -> tuple[PlanStage, ...] | None:
    """Parse :func:`plan_stages_to_json` output; None for an empty field.

    Raises:
        ValueError: malformed JSON or a malformed stage (the message names the field).
    """
    if not text:
        return None
    data = json.loads(text)
    if not isinstance(data, list) or len(data) > 500:
        raise ValueError("plan_stages must be a JSON array of at most 500 stages")
    out = []
    for i, item in enumerate(data):
        if not isinstance(item, dict):
            raise ValueError(f"plan_stages[{i}] must be an object")
        partitions = item.get("partitions")
        if partitions is not None and (isinstance(partitions, bool) or not isinstance(partitions, int)
                                       or partitions < 1):
            raise ValueError(f"plan_stages[{i}].partitions must be an integer >= 1 or null")
        operators = item.get("operators") or []
        if not isinstance(operators, list) or not all(isinstance(o, str) for o in operators):
            raise ValueError(f"plan_stages[{i}].operators must be a list of strings")
        try:
            kind = StageInput(item.get("input"))
        except ValueError:
            raise ValueError(f"plan_stages[{i}].input must be one of {[s.value for s in StageInput]}") from None
        names = {}
        for key in ("state_store", "sink"):
            value = item.get(key)
            if value is not None and (not isinstance(value, str) or not 0 < len(value) <= 200):
                raise ValueError(f"plan_stages[{i}].{key} must be a class name (1 to 200 characters) or null")
            names[key] = value
        out.append(PlanStage(kind, partitions, bool(item.get("stateful")), tuple(o[:100] for o in operators[:200]),
                             **names))
    return tuple(out)


# --- the JVM side (runs inside the driver) ------------------------------------------------------

def _children(node: Any) -> list[Any]:
    seq = node.children()
    return [seq.apply(i) for i in range(seq.size())]


def plan_stages_of(query: Any) -> tuple[PlanStage, ...] | None:
    """The stages of ``query``'s last executed micro-batch, from its physical plan (py4j), or None
    before the first batch.

    Walks ``StreamExecution.lastExecution.executedPlan``; a ``ShuffleExchangeExec`` ends the stage
    below it, and its ``shuffleOrigin`` and ``outputPartitioning.numPartitions`` define the stage
    above it. Adaptive execution, which Spark keeps for stateless queries writing to a DSv2 sink, is
    walked through its final plan (``AdaptiveSparkPlanExec.executedPlan``, each query stage's
    ``plan``). Where it coalesced a ``spark.sql.shuffle.partitions`` shuffle (the operator turned
    ``spark.sql.adaptive.coalescePartitions.enabled`` back on), the stage's operators include
    ``AQEShuffleRead`` and the binding reports ``MismatchReason.COALESCED``.
    """
    execution = query._jsq.streamingQuery().lastExecution()
    if execution is None:
        return None
    stages: list[PlanStage] = []

    def visit(node: Any) -> tuple[list[tuple[StageInput, int | None]], list[str], bool]:
        name = str(node.nodeName())
        kind_of = node.getClass().getSimpleName()
        # A stateless query writing to a DSv2 sink (noop, Kafka, foreach) runs each batch with
        # adaptive execution: the stages are in the adaptive plan's final plan, each query stage
        # (ShuffleQueryStage, ResultQueryStage, ...) a leaf that wraps the plan it ran.
        if kind_of == "AdaptiveSparkPlanExec":
            return visit(node.executedPlan())
        if kind_of.endswith("QueryStageExec"):
            return visit(node.plan())
        # The static side of a broadcast join runs in a job of its own before the batch's stages
        # (sparkclient.collector.stages.is_broadcast_job): no stage of the stream's plan.
        if kind_of == "BroadcastExchangeExec":
            return [], [], False
        if kind_of == "ShuffleExchangeExec":
            child_inputs, child_ops, child_stateful = _merge([visit(c) for c in _children(node)])
            stages.append(_finish(child_inputs, child_ops, child_stateful))
            origin = str(node.shuffleOrigin().toString())
            kind = StageInput.REPARTITION if origin == "REPARTITION_BY_NUM" else StageInput.SHUFFLE
            return [(kind, int(node.outputPartitioning().numPartitions()))], [], False
        kids = _children(node)
        if not kids:
            return [(StageInput.SOURCE, None)], [name], False
        inputs, ops, stateful = _merge([visit(c) for c in kids])
        if not name.startswith("WholeStageCodegen") and name != "InputAdapter":
            ops.append(name)
        return inputs, ops, stateful or name in STATEFUL_NODES

    inputs, ops, stateful = visit(execution.executedPlan())
    stages.append(_finish(inputs, ops, stateful))
    return tuple(stages)


def _merge(parts: list[tuple[list, list, bool]]) -> tuple[list, list, bool]:
    inputs, ops, stateful = [], [], False
    for part_inputs, part_ops, part_stateful in parts:
        inputs.extend(part_inputs)
        ops.extend(part_ops)
        stateful = stateful or part_stateful
    return inputs, ops, stateful


def _finish(inputs: list[tuple[StageInput, int | None]], ops: list[str], stateful: bool) -> PlanStage:
    exchanges = [(kind, n) for kind, n in inputs if kind is not StageInput.SOURCE]
    if not exchanges:
        return PlanStage(StageInput.SOURCE, None, stateful, tuple(ops))
    kind = StageInput.REPARTITION if all(k is StageInput.REPARTITION for k, _ in exchanges) else StageInput.SHUFFLE
    return PlanStage(kind, max(n for _, n in exchanges if n is not None), stateful, tuple(ops))
