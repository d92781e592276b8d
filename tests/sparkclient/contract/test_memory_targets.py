"""The ``memory_overhead`` and ``state_memory`` knobs, without Spark: their floors, one per pipeline,
the settings each gives the driver under each master, the operator ``--conf`` each refuses, and the
path a change of each takes (a new driver where it sets anything; nothing new where it sets nothing)."""

from __future__ import annotations

import re

import pytest

from sparkclient.contract.messages import RescaleCommand
from sparkclient.contract.sparkconf import effective_memory_knobs, launch_settings
from sparkclient.contract.spec import Knob, KnobError, KnobTarget, check_knob_set
from tests.sparkclient.rescale_double import RecordingPaths

CORES = Knob("cores", 1, 1, 8, KnobTarget.EXECUTORS)
HEAP = Knob("memory_mb", 1024, 512, 4096, KnobTarget.MEMORY)
OVERHEAD = Knob("overhead_mb", 512, 384, 8192, KnobTarget.MEMORY_OVERHEAD)
STATE = Knob("state_mb", 256, 64, 8192, KnobTarget.STATE_MEMORY)
KNOBS = (CORES, HEAP, OVERHEAD, STATE)
VALUES = {"cores": 2, "memory_mb": 1024, "overhead_mb": 512, "state_mb": 256}
LOCAL, CLUSTER = "local[2]", "spark://10.0.0.1:7077"
ROCKSDB = {"spark.sql.streaming.stateStore.rocksdb.boundedMemoryUsage": "true",
           "spark.sql.streaming.stateStore.rocksdb.maxMemoryUsageMB": "256"}


@pytest.mark.parametrize(("target", "floor", "why"), [
    (KnobTarget.MEMORY, 512, "Spark refuses a heap under 450 MB"),
    (KnobTarget.MEMORY_OVERHEAD, 384, "Spark's spark.executor.minMemoryOverhead"),
    (KnobTarget.STATE_MEMORY, 64, "one RocksDB memtable"),
])
def test_each_memory_target_has_its_floor_and_one_knob_per_pipeline(target, floor, why):
    with pytest.raises(KnobError, match=f"'low'.*min must be at least {floor} MB \\({why}.*got min={floor - 1}"):
        Knob("low", floor, floor - 1, floor * 4, target)
    assert Knob("at_floor", floor, floor, floor * 4, target).min == floor
    one = Knob("one", floor, floor, floor * 4, target)
    with pytest.raises(KnobError, match=f"'two'.*at most one '{target.value}' knob \\(also 'one'\\)"):
        check_knob_set([one, Knob("two", floor, floor, floor * 4, target)])
    assert check_knob_set([HEAP, OVERHEAD, STATE])  # one of each kind is fine


@pytest.mark.parametrize(("target", "local", "new_jvm"), [
    (KnobTarget.MEMORY, True, True), (KnobTarget.MEMORY, False, True),
    (KnobTarget.STATE_MEMORY, True, True), (KnobTarget.STATE_MEMORY, False, True),
    (KnobTarget.MEMORY_OVERHEAD, True, False), (KnobTarget.MEMORY_OVERHEAD, False, True),
    *((t, local, False) for t in KnobTarget if not t.is_memory for local in (True, False)),
])
def test_which_changes_need_a_new_jvm(target, local, new_jvm):
    assert target.needs_new_jvm(local=local) is new_jvm


@pytest.mark.parametrize(("master", "expected"), [
    (LOCAL, {"spark.driver.memory": "1024m", **ROCKSDB}),  # no executor in local mode: no overhead setting
    ("local", {"spark.driver.memory": "1024m", **ROCKSDB}),
    (CLUSTER, {"spark.executor.memory": "1024m", "spark.executor.memoryOverhead": "512m", **ROCKSDB}),
    ("yarn", {"spark.executor.memory": "1024m", "spark.executor.memoryOverhead": "512m", **ROCKSDB}),
])
def test_the_settings_each_memory_knob_gives_the_driver(master, expected):
    assert launch_settings(KNOBS, VALUES, master=master, operator_conf={}) == expected
    assert [k.name for k in effective_memory_knobs(KNOBS, master=master)] == \
        ["memory_mb", *([] if master.startswith("local") else ["overhead_mb"]), "state_mb"]


@pytest.mark.parametrize(("master", "key", "knob"), [
    (CLUSTER, "spark.executor.memoryOverhead", "overhead_mb"),
    (LOCAL, "spark.sql.streaming.stateStore.rocksdb.boundedMemoryUsage", "state_mb"),
    (CLUSTER, "spark.sql.streaming.stateStore.rocksdb.maxMemoryUsageMB", "state_mb"),
])
def test_an_operator_conf_of_a_key_a_knob_sets_is_refused(master, key, knob):
    with pytest.raises(KnobError, match=re.escape(f"'{knob}': sets {key} under --master {master}, and --conf {key}=x")):
        launch_settings(KNOBS, None, master=master, operator_conf={key: "x"})


def test_an_overhead_conf_stays_the_operators_in_local_mode():
    assert launch_settings(KNOBS, None, master=LOCAL, operator_conf={"spark.executor.memoryOverhead": "1g"}) == {}


@pytest.mark.parametrize(("in_place", "master", "change", "new_driver"), [
    (False, LOCAL, {"state_mb": 512}, True),
    (True, CLUSTER, {"state_mb": 512}, True),
    (True, CLUSTER, {"overhead_mb": 1024}, True),
    (True, CLUSTER, {"overhead_mb": 1024, "cores": 3}, True),  # the new executors come with the new overhead
    (False, LOCAL, {"overhead_mb": 1024}, False),  # sets nothing in local mode: no new driver for it
])
def test_a_memory_change_takes_a_new_driver_where_it_sets_anything(in_place, master, change, new_driver):
    paths = RecordingPaths(knobs=KNOBS, values=VALUES, in_place=in_place, master=master)
    paths._rescale(RescaleCommand(id="c1", knobs={**VALUES, **change}))
    assert paths.restarts == [{"old": VALUES, "new": {**VALUES, **change}, "new_driver": new_driver}]
    assert paths.in_place_changes == []
