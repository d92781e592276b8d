"""A test double of the runner's path choice (:class:`sparkclient.runner.rescale.RescalePaths`): the driver
state it reads, with the restart and the in-place executor change recorded instead of run."""

from __future__ import annotations

from sparkclient.contract.spec import Knob, PipelineSpec
from sparkclient.runner.rescale import RescalePaths


class RecordingPaths(RescalePaths):
    """``knobs`` at ``values``, the executors knob named ``cores``; ``restarts`` holds each restart's
    ``{"old", "new", "new_driver"}``, ``in_place_changes`` each in-place executor change."""

    def __init__(self, *, knobs: tuple[Knob, ...], values: dict[str, int], in_place: bool, master: str,
                 shuffle_knob: Knob | None = None) -> None:
        self.spec = PipelineSpec(ref="m:build", build=lambda spark, knobs: None, knobs=knobs)
        self.in_place, self.master, self.spark_conf, self.capacity = in_place, master, {}, 8
        self.values = dict(values)
        self.executors_knob = next(k for k in knobs if k.name == "cores")
        self.shuffle_knob, self.checkpoint = shuffle_knob, None
        self.restarts: list[dict] = []
        self.in_place_changes: list[dict] = []
        self.results: list = []

    def executors(self, values=None) -> int:
        return (values or self.values)["cores"]

    def _write_result(self, result) -> None:
        self.results.append(result)

    def _scale_executors_in_place(self, command, old, new):
        self.in_place_changes.append(new)
        return {**old, "cores": new["cores"]}

    def _restart(self, command, old, new, *, repartition, new_driver):
        self.restarts.append({"old": old, "new": new, "new_driver": new_driver})
