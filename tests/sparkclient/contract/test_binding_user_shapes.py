"""Users' pipelines as users write them, bound on plans of their shapes: a stream-stream join with a
source knob per side, a ``foreachBatch`` whose function runs a shuffle of its own, and a stateful query
whose shuffle no knob sets (Spark's default ``spark.sql.shuffle.partitions``)."""

from __future__ import annotations

from sparkclient.contract.binding import (
    FOREACH_BATCH_SINK,
    BindingStatus,
    MismatchReason,
    PinReason,
    PlanStage,
    StageInput,
    bind_stages,
    plan_stages_from_json,
    plan_stages_to_json,
    with_state_store,
)
from sparkclient.contract.spec import Knob, KnobTarget, check_knob_set

LEFT = Knob("left_partitions", default=2, min=1, max=8, sets=KnobTarget.SOURCE_PARTITIONS)
RIGHT = Knob("right_partitions", default=3, min=1, max=8, sets=KnobTarget.SOURCE_PARTITIONS)
STATE = Knob("state_partitions", default=4, min=1, max=16, sets=KnobTarget.STATE_PARTITIONS)
JOIN = (PlanStage(StageInput.SOURCE, None, False), PlanStage(StageInput.SOURCE, None, False),
        PlanStage(StageInput.SHUFFLE, 4, True, ("StreamingSymmetricHashJoin",)))


def test_a_join_declares_a_source_knob_per_side_and_each_binds_its_own_scan() -> None:
    assert check_knob_set([LEFT, RIGHT, STATE]) == (LEFT, RIGHT, STATE)
    bindings = bind_stages(JOIN, [LEFT, RIGHT, STATE], {"left_partitions": 2, "right_partitions": 3,
                                                       "state_partitions": 4}, [2, 3, 4])
    assert [(b.status, b.knob) for b in bindings] == [(BindingStatus.BOUND, "left_partitions"),
                                                      (BindingStatus.BOUND, "right_partitions"),
                                                      (BindingStatus.BOUND, "state_partitions")]
    # a scan beyond the declared source knobs is named as set by no knob
    three = (JOIN[0], *JOIN)
    assert bind_stages(three, [LEFT, RIGHT], {}, [2, 3, 1, 4])[2].pin is PinReason.NO_KNOB
    # one source knob still sets every scan (a join's second scan then shows its own tasks)
    one = bind_stages(JOIN, [LEFT, STATE], {}, [2, 3, 4])
    assert [(b.knob, b.status) for b in one[:2]] == [("left_partitions", BindingStatus.BOUND),
                                                     ("left_partitions", BindingStatus.MISMATCH)]


def test_a_shuffle_no_knob_sets_is_named_as_running_the_sessions_default() -> None:
    bindings = bind_stages(JOIN, [LEFT, RIGHT], {}, [2, 3, 200])
    stateful = bindings[2]
    assert (stateful.status, stateful.pin, stateful.plan_partitions) == (BindingStatus.PINNED,
                                                                        PinReason.SHUFFLE_DEFAULT, 4)
    assert not stateful.pin.by_checkpoint and not stateful.problem


def test_a_foreachbatch_functions_shuffle_binds_to_the_batch_and_what_cannot_is_named_per_stage() -> None:
    plan = with_state_store((PlanStage(StageInput.SOURCE, None, False, ("MicroBatchScan",)),), None,
                            FOREACH_BATCH_SINK)
    plan = plan_stages_from_json(plan_stages_to_json(plan))
    assert plan is not None and plan[-1].sink == FOREACH_BATCH_SINK
    shuffle = Knob("shuffle", default=6, min=1, max=16, sets=KnobTarget.SHUFFLE_PARTITIONS)
    bound = bind_stages(plan, [LEFT, shuffle], {"left_partitions": 2, "shuffle": 6}, [2, 6])
    assert [(b.status, b.knob, b.input) for b in bound] == [
        (BindingStatus.BOUND, "left_partitions", StageInput.SOURCE),
        (BindingStatus.BOUND, "shuffle", StageInput.BATCH_FUNCTION)]
    other = bind_stages(plan, [LEFT, shuffle], {"left_partitions": 2, "shuffle": 6}, [2, 3])
    assert other[0].status is BindingStatus.BOUND
    assert (other[1].status, other[1].reason) == (BindingStatus.MISMATCH, MismatchReason.BATCH_FUNCTION)
    no_knob = bind_stages(plan, [LEFT], {"left_partitions": 2}, [2, 1])
    assert [(b.status, b.pin) for b in no_knob] == [(BindingStatus.BOUND, None),
                                                    (BindingStatus.PINNED, PinReason.NO_KNOB)]
    # any other sink: a batch with more stages than the plan is no batch of this plan
    other_sink = with_state_store(plan, None, "NoopSink")
    assert {b.reason for b in bind_stages(other_sink, [LEFT, shuffle], {}, [2, 6])} == {MismatchReason.STAGE_COUNT}
