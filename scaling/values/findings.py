"""What a micro-batch plan finds that cores cannot fix, with the action that can: a stage pinned at
its tasks (its checkpoint fixes its state partitions, or no knob sets them) that alone needs more of
each trigger interval than the utilization target on the cores the plan keeps. The finding is a
value (``PinnedAction`` with its evidence); ``scaling.words.reason_text.finding_text`` words it. Why Spark
pins such a stage and what each action does: docs/ARCHITECTURE.md, "Pinned bottlenecks".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from scaling.values.reasons import PlanFormatError, data_json, read_data
from scaling.values.topology import PinCause

__all__ = ["ACTION_OF_CAUSE", "Finding", "PinnedAction"]


class PinnedAction(StrEnum):
    """What gives a pinned bottleneck more tasks (``Finding.action``)."""

    REPARTITION_STATE = "repartition-state"   # offline, where the store allows it (RocksDB), through the
    #                                           job's STATE_PARTITIONS knob; the cause is not known
    DECLARE_STATE_PARTITIONS_KNOB = "declare-state-partitions-knob"  # no knob sets the stage's partitions
    NEW_CHECKPOINT_PARTITIONS = "new-checkpoint-partitions"  # the store (or sink) forbids the offline
    #                                                          rewrite: set spark.sql.shuffle.partitions
    #                                                          for a new checkpoint
    DEFAULT_SHUFFLE_PARTITIONS = "default-shuffle-partitions"  # no knob sets the shuffle, whose many tasks
    #                                                            (Spark's default 200) dominate the batch on the
    #                                                            job's cores: declare a state-partitions knob, or
    #                                                            set spark.sql.shuffle.partitions for a new
    #                                                            checkpoint


#: The action that helps a pinned stage, by its ``PinCause`` (None: not known).
ACTION_OF_CAUSE = {None: PinnedAction.REPARTITION_STATE, PinCause.NO_KNOB: PinnedAction.DECLARE_STATE_PARTITIONS_KNOB,
                   PinCause.SHUFFLE_DEFAULT: PinnedAction.DECLARE_STATE_PARTITIONS_KNOB,
                   PinCause.STATE_STORE: PinnedAction.NEW_CHECKPOINT_PARTITIONS,
                   PinCause.SINK_LOG: PinnedAction.NEW_CHECKPOINT_PARTITIONS}


@dataclass(frozen=True)
class Finding:
    """A pinned bottleneck: stage ``vertex_id`` and the ``action`` that can help it, with the
    evidence in ``data``: ``tasks`` (its pinned task count), ``busy_s_per_task`` (mean busy seconds
    of one task per trigger interval, measured), ``fill`` (the share of each trigger interval the
    stage alone needs at the target and catch-up rate on the planned cores), ``cores`` (planned),
    ``partitions`` (the tasks at which it alone would fill ``utilization_target`` of the interval)
    and ``cause`` (the ``PinCause`` value, or None when not known; ``state-store`` or ``sink-log``
    mean the job declares a STATE_PARTITIONS knob the checkpoint pins, ``no-knob`` that it declares
    none, ``shuffle-default`` that no knob sets the shuffle's ``spark.sql.shuffle.partitions``).

    A ``DEFAULT_SHUFFLE_PARTITIONS`` finding (more tasks than cores, no knob) has ``tasks``, ``cores``
    (the job's), ``fill``, ``share`` (of the job's utilization, 0..1) and ``partitions`` (= ``cores``)."""

    action: PinnedAction
    vertex_id: str
    data: Mapping[str, float | int | str | None] = field(default_factory=dict)

    def as_json(self, *, infinity_as_null: bool = False) -> dict:
        """``{"action", "vertex_id", "data"}``, infinity as ``"inf"`` (null with ``infinity_as_null``)."""
        return {"action": str(self.action), "vertex_id": self.vertex_id,
                "data": data_json(self.data, infinity_as_null=infinity_as_null)}

    @classmethod
    def from_json(cls, item: object) -> Finding:
        """The finding ``as_json`` wrote. Raises ``PlanFormatError`` naming the field."""
        if not isinstance(item, Mapping):
            raise PlanFormatError(f"self: an object, not {type(item).__name__}")
        try:
            action = PinnedAction(item.get("action"))
        except ValueError:
            raise PlanFormatError(f"action: {item.get('action')!r} is not one of "
                                  f"{', '.join(map(str, PinnedAction))}") from None
        vertex_id = item.get("vertex_id")
        if not isinstance(vertex_id, str):
            raise PlanFormatError("vertex_id: a string")
        return cls(action, vertex_id, read_data(item.get("data", {})))
