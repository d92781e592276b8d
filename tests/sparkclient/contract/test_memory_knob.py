"""The ``memory`` knob, without Spark: its declaration rules, the setting it gives the driver's JVM
(and the operator ``--conf`` it refuses at start), its round trip through the runner's status, and the
path a change of it takes (a new driver, in every mode)."""

from __future__ import annotations

import sys
import textwrap

import pytest

from sparkclient.__main__ import main
from sparkclient.contract.messages import RescaleCommand, RunnerState, RunnerStatus, StatusUpdate
from sparkclient.contract.sparkconf import launch_settings
from sparkclient.contract.spec import Knob, KnobError, KnobTarget, check_knob_set, knobs_from_json, knobs_to_json
from tests.sparkclient.rescale_double import RecordingPaths

CORES = Knob("cores", 1, 1, 8, KnobTarget.EXECUTORS)
STATE = Knob("state_partitions", 2, 1, 16, KnobTarget.STATE_PARTITIONS)
HEAP = Knob("memory_mb", 512, 512, 4096, KnobTarget.MEMORY, description="the heap that runs tasks, MB")
KNOBS = (CORES, STATE, HEAP)


def test_a_memory_knob_starts_at_512_mb_and_a_pipeline_has_one():
    with pytest.raises(KnobError, match="'memory_mb'.*min must be at least 512 MB.*got min=256"):
        Knob("memory_mb", 1024, 256, 4096, KnobTarget.MEMORY)
    with pytest.raises(KnobError, match="'other_heap'.*at most one 'memory' knob \\(also 'memory_mb'\\)"):
        check_knob_set([HEAP, Knob("other_heap", 1024, 512, 2048, KnobTarget.MEMORY)])
    with pytest.raises(KnobError, match="min must be at least 512"):
        Knob.from_dict({**HEAP.to_dict(), "min": 128})  # a runner's published declaration is checked the same way
    assert Knob("other", 128, 1, 256).min == 1  # the floor is the memory knob's only


def test_the_knob_round_trips_through_the_runners_status():
    update = StatusUpdate(state=RunnerState.RUNNING, knobs={"cores": 1, "state_partitions": 2, "memory_mb": 1024},
                          knob_specs=knobs_to_json(KNOBS))
    parsed = RunnerStatus.from_mapping({k.encode(): v.encode() for k, v in update.to_mapping().items()})
    assert knobs_from_json(parsed.knob_specs) == KNOBS
    assert knobs_from_json(parsed.knob_specs)[2].sets is KnobTarget.MEMORY
    assert parsed.knobs["memory_mb"] == 1024


@pytest.mark.parametrize(("master", "key"), [("local", "spark.driver.memory"), ("local[2]", "spark.driver.memory"),
                                             ("spark://10.0.0.1:7077", "spark.executor.memory"),
                                             ("k8s://https://api:6443", "spark.executor.memory"),
                                             ("yarn", "spark.executor.memory")])
def test_the_heap_of_the_jvm_that_runs_tasks_is_set_at_start(master, key):
    values = {"cores": 1, "state_partitions": 2, "memory_mb": 1024}
    assert launch_settings(KNOBS, values, master=master, operator_conf={"spark.ui.enabled": "true"}) == {key: "1024m"}
    assert launch_settings((CORES, STATE), {"cores": 1, "state_partitions": 2}, master=master,
                           operator_conf={key: "8g"}) == {}  # no memory knob: the operator's --conf holds


def test_an_operator_conf_of_the_same_key_is_refused_naming_both():
    with pytest.raises(KnobError, match="'memory_mb'.*spark.driver.memory.*--conf spark.driver.memory=2g"):
        launch_settings(KNOBS, None, master="local", operator_conf={"spark.driver.memory": "2g"})
    # on a cluster the knob sets the executors' heap: the driver's own stays the operator's
    assert launch_settings(KNOBS, None, master="yarn", operator_conf={"spark.driver.memory": "2g"}) == {}
    with pytest.raises(KnobError, match="spark.executor.memory"):
        launch_settings(KNOBS, None, master="yarn", operator_conf={"spark.executor.memory": "2g"})


def test_the_runner_refuses_the_conflict_before_any_driver_starts(tmp_path, monkeypatch, capsys):
    (tmp_path / "heapy_pipeline.py").write_text(textwrap.dedent("""
        from sparkclient.contract.spec import Knob, KnobTarget, pipeline

        @pipeline(knobs=[Knob("memory_mb", 512, 512, 2048, KnobTarget.MEMORY)])
        def build(spark, knobs):
            return None
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    # an unreachable Redis: the refusal comes before the supervisor connects, so nothing is touched
    code = main(["run", "--pipeline", "heapy_pipeline:build", "--job", "heapy", "--workdir", str(tmp_path / "w"),
                 "--redis-url", "redis://127.0.0.1:9/0", "--conf", "spark.driver.memory=2g"])
    assert code == 2
    assert "knob 'memory_mb': sets spark.driver.memory" in capsys.readouterr().err
    assert not (tmp_path / "w").exists()
    sys.modules.pop("heapy_pipeline", None)


def _paths(*, in_place: bool, master: str) -> RecordingPaths:
    return RecordingPaths(knobs=KNOBS, values={"cores": 2, "state_partitions": 2, "memory_mb": 512}, in_place=in_place,
                          master=master, shuffle_knob=STATE)


@pytest.mark.parametrize(("in_place", "master"), [(False, "local"), (True, "spark://10.0.0.1:7077")])
@pytest.mark.parametrize("change", [{"memory_mb": 1024}, {"memory_mb": 1024, "cores": 3},
                                    {"memory_mb": 1024, "state_partitions": 4}])
def test_a_memory_change_starts_a_new_driver_in_every_mode(in_place, master, change):
    paths = _paths(in_place=in_place, master=master)
    paths._rescale(RescaleCommand(id="c1", knobs={**paths.values, **change}))
    assert paths.restarts == [{"old": {"cores": 2, "state_partitions": 2, "memory_mb": 512},
                               "new": {**paths.values, **change}, "new_driver": True}]
    assert paths.in_place_changes == []  # the new driver's executors come with the new heap
    assert paths.launch_conf() == {("spark.driver.memory" if master == "local" else "spark.executor.memory"): "512m"}


@pytest.mark.parametrize(("in_place", "master", "change", "new_driver", "in_place_changes"), [
    (False, "local", {"cores": 3}, True, 0),           # local[N]: a new driver, as before
    (False, "local", {"state_partitions": 4}, False, 0),  # partitions: the query restarts in this driver
    (True, "spark://10.0.0.1:7077", {"cores": 3}, None, 1),  # executors in place, nothing restarts
    (True, "spark://10.0.0.1:7077", {"cores": 3, "state_partitions": 4}, False, 1),
])
def test_without_a_memory_change_the_paths_stay_as_they_were(in_place, master, change, new_driver, in_place_changes):
    paths = _paths(in_place=in_place, master=master)
    paths._rescale(RescaleCommand(id="c1", knobs={**paths.values, **change}))
    assert [r["new_driver"] for r in paths.restarts] == ([] if new_driver is None else [new_driver])
    assert len(paths.in_place_changes) == in_place_changes
