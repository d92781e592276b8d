"""Offline state repartition: the checks before anything is written, the restore on failure, and
real Spark 4.3 runs (RocksDB 4 -> 6 with the state intact; the HDFS-backed provider refused)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from pathlib import Path

import pytest

from sparkclient.contract.binding import HDFS_PROVIDER, ROCKSDB_PROVIDER
from sparkclient.contract.spec import PipelineSpec
from sparkclient.runner.session import finish_logged_batch
from sparkclient.runner.staterepartition import (
    StateRepartitionError,
    UnsupportedStateProvider,
    check_repartition,
    checkpoint_info,
    repartition_state,
)

KEYS = 20


def _tree_digest(root: Path) -> dict[str, str]:
    """Every file under ``root`` with the hash of its bytes: equal digests = nothing was written."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _fake_checkpoint(root: Path, *, provider: str | None, partitions: int = 4, batches: int = 2,
                     committed: bool = True) -> Path:
    conf = {"spark.sql.shuffle.partitions": str(partitions)}
    if provider:
        conf["spark.sql.streaming.stateStore.providerClass"] = provider
    for folder in ("offsets", "commits", "state/0/0"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    for batch in range(batches):
        meta = json.dumps({"batchWatermarkMs": 0, "batchTimestampMs": 1, "conf": conf})
        (root / "offsets" / str(batch)).write_text(f"v1\n{meta}\n{{\"logOffset\":{batch}}}")
        if committed or batch < batches - 1:
            (root / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    (root / "state/0/0/1.zip").write_bytes(b"state")
    return root


def test_checkpoint_info_reads_the_newest_offsets_entry(tmp_path: Path) -> None:
    info = checkpoint_info(_fake_checkpoint(tmp_path / "ck", provider=ROCKSDB_PROVIDER, partitions=4))
    assert (info.last_batch, info.committed, info.provider, info.shuffle_partitions, info.has_state) == (
        1, True, ROCKSDB_PROVIDER, 4, True)
    # no provider recorded: Spark's default, the HDFS-backed one
    assert checkpoint_info(_fake_checkpoint(tmp_path / "d", provider=None)).provider == HDFS_PROVIDER
    assert checkpoint_info(tmp_path / "empty").last_batch is None


def test_only_a_checkpoint_that_holds_state_pins_the_shuffle_partitions(tmp_path: Path) -> None:
    """The runner repartitions offline only for a checkpoint with state; a stateless query's
    checkpoint (offsets and commits, no ``state/``) takes a new shuffle knob at a plain restart."""
    from sparkclient.runner.session import checkpoint_has_state

    stateful = _fake_checkpoint(tmp_path / "stateful", provider=HDFS_PROVIDER)
    stateless = _fake_checkpoint(tmp_path / "stateless", provider=HDFS_PROVIDER)
    shutil.rmtree(stateless / "state")
    (tmp_path / "fresh").mkdir()
    assert checkpoint_has_state(stateful)
    assert not checkpoint_has_state(stateless) and not checkpoint_has_state(tmp_path / "fresh")

    # The runner's rescale path: a shuffle knob change is an offline repartition only with state.
    from types import SimpleNamespace

    from sparkclient.contract.spec import Knob, KnobTarget
    from sparkclient.runner.rescale import RescalePaths

    knob = Knob("shuffle", default=4, min=1, max=16, sets=KnobTarget.SHUFFLE_PARTITIONS)
    old, new = {"shuffle": 4}, {"shuffle": 2}
    assert RescalePaths._needs_repartition(SimpleNamespace(shuffle_knob=knob, checkpoint=stateful), old, new)
    assert not RescalePaths._needs_repartition(SimpleNamespace(shuffle_knob=knob, checkpoint=stateless), old, new)
    assert not RescalePaths._needs_repartition(SimpleNamespace(shuffle_knob=knob, checkpoint=stateful), old, old)


def test_the_runner_publishes_the_state_store_its_checkpoint_pins_and_the_binding_pins_the_stage(
        tmp_path: Path) -> None:
    """The runner's plan stages carry the provider of a checkpoint that holds state; a stateful stage on
    HDFS-backed state is pinned (the runner would refuse to repartition it), on RocksDB it binds."""
    from types import SimpleNamespace

    from sparkclient.contract.binding import (
        BindingStatus,
        PinReason,
        PlanStage,
        StageInput,
        bind_stages,
        plan_stages_from_json,
        plan_stages_to_json,
        with_state_store,
    )
    from sparkclient.contract.spec import Knob, KnobTarget
    from sparkclient.runner.driver import Driver

    hdfs = _fake_checkpoint(tmp_path / "hdfs", provider=None)  # Spark's default provider
    rocks = _fake_checkpoint(tmp_path / "rocks", provider=ROCKSDB_PROVIDER)
    stateless = _fake_checkpoint(tmp_path / "stateless", provider=ROCKSDB_PROVIDER)
    shutil.rmtree(stateless / "state")
    assert Driver._state_store(SimpleNamespace(checkpoint=hdfs)) == HDFS_PROVIDER
    assert Driver._state_store(SimpleNamespace(checkpoint=rocks)) == ROCKSDB_PROVIDER
    assert Driver._state_store(SimpleNamespace(checkpoint=stateless)) is None
    assert Driver._state_store(SimpleNamespace(checkpoint=None)) is None

    plan = (PlanStage(StageInput.SOURCE, None, False), PlanStage(StageInput.SHUFFLE, 2, True, ("StateStoreSave",)))
    knobs = [Knob("src", 2, 1, 8, KnobTarget.SOURCE_PARTITIONS), Knob("state", 2, 1, 8, KnobTarget.STATE_PARTITIONS)]
    for provider, status in ((HDFS_PROVIDER, BindingStatus.PINNED), (ROCKSDB_PROVIDER, BindingStatus.BOUND),
                             (None, BindingStatus.BOUND)):
        published = plan_stages_from_json(plan_stages_to_json(with_state_store(plan, provider)))
        assert published is not None and published[0].state_store is None and published[1].state_store == provider
        source, state = bind_stages(published, knobs, {"src": 2, "state": 2}, [2, 2])
        assert source.status is BindingStatus.BOUND
        assert (state.status, state.knob, state.knob_value) == (status, "state", 2)
        assert state.pin is (PinReason.STATE_STORE if status is BindingStatus.PINNED else None)
        assert not state.problem  # pinned is not a mismatch: the page does not list it as one
    # A stateless shuffle on the same knob is pinned with it: the runner refuses the knob as a whole.
    two = with_state_store((plan[0], PlanStage(StageInput.SHUFFLE, 2, False), plan[1]), HDFS_PROVIDER)
    assert [b.status for b in bind_stages(two, knobs, {"src": 2, "state": 2}, [2, 2, 2])] == [
        BindingStatus.BOUND, BindingStatus.PINNED, BindingStatus.PINNED]
    # RocksDB state, but a file sink: its own batch log would miss the repartition's batch.
    for sink, status, pin in (("FileStreamSink", BindingStatus.PINNED, PinReason.SINK_LOG),
                              ("ForeachBatchSink", BindingStatus.BOUND, None), (None, BindingStatus.BOUND, None)):
        published = plan_stages_from_json(plan_stages_to_json(with_state_store(plan, ROCKSDB_PROVIDER, sink)))
        assert published is not None and published[1].sink == sink
        state = bind_stages(published, knobs, {"src": 2, "state": 2}, [2, 2])[1]
        assert (state.status, state.pin, state.sink) == (status, pin, sink if pin else None)
    no_state = with_state_store(plan, None, "FileStreamSink")  # the last stage names the sink; no state, no pin
    assert no_state[1].state_store is None and no_state[1].sink == "FileStreamSink"
    assert bind_stages(no_state, knobs, {"src": 2, "state": 2}, [2, 2])[1].status is BindingStatus.BOUND
    # no knob sets the shuffle: it runs the session's spark.sql.shuffle.partitions
    no_knob = bind_stages(plan, knobs[:1], {"src": 2}, [2, 2])[1]
    assert (no_knob.status, no_knob.pin, no_knob.knob) == (BindingStatus.PINNED, PinReason.SHUFFLE_DEFAULT, None)
    for bad in (3, "", "x" * 201):
        with pytest.raises(ValueError, match=r"plan_stages\[0\]\.state_store"):
            plan_stages_from_json(json.dumps([{"input": "shuffle", "partitions": 2, "stateful": True,
                                               "state_store": bad}]))


@pytest.mark.parametrize(
    ("kwargs", "target", "error", "match"),
    [
        ({"provider": HDFS_PROVIDER}, 6, UnsupportedStateProvider, "Nothing was written"),
        ({"provider": None}, 6, UnsupportedStateProvider, "HDFSBackedStateStoreProvider"),
        ({"provider": ROCKSDB_PROVIDER, "committed": False}, 6, StateRepartitionError, "has no commit"),
        ({"provider": ROCKSDB_PROVIDER, "partitions": 6}, 6, StateRepartitionError, "already has 6"),
    ],
)
def test_refusals_happen_before_anything_is_written(tmp_path: Path, kwargs, target, error, match) -> None:
    checkpoint = _fake_checkpoint(tmp_path / "ck", **kwargs)
    before = _tree_digest(tmp_path)

    class NoSpark:  # any call into Spark would fail the test
        def __getattr__(self, name):
            raise AssertionError(f"Spark was called ({name}) before the checks refused")

    with pytest.raises(error, match=match):
        repartition_state(NoSpark(), checkpoint, target)
    assert _tree_digest(tmp_path) == before


def test_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="num_partitions"):
        check_repartition(tmp_path, 0)
    with pytest.raises(StateRepartitionError, match="no batch yet"):
        check_repartition(tmp_path / "none", 3)
    with pytest.raises(StateRepartitionError, match="not on the local file system"):
        check_repartition("hdfs://nn/ck", 3)


def test_a_failing_spark_repartition_leaves_the_checkpoint_as_it_was(tmp_path: Path) -> None:
    checkpoint = _fake_checkpoint(tmp_path / "ck", provider=ROCKSDB_PROVIDER)
    before = _tree_digest(checkpoint)

    class Manager:
        def repartition(self, location: str, partitions: int, enforce: bool) -> None:
            # what Spark does with the HDFS provider: the offsets entry first, then the failure
            Path(location, "offsets", "2").write_text("v1\n{}\n")
            Path(location, "state", "0", "0", "3.zip").write_bytes(b"half")
            raise RuntimeError("[STATE_REPARTITION_INVALID_CHECKPOINT.UNSUPPORTED_PROVIDER] boom\n  at ...")

    class Spark:
        _streamingCheckpointManager = Manager()

    with pytest.raises(StateRepartitionError, match="restored unchanged"):
        repartition_state(Spark(), checkpoint, 6, backup_dir=tmp_path / "bak")
    assert _tree_digest(checkpoint) == before
    assert list((tmp_path / "bak").iterdir()) == []


# -- real Spark --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def spark():
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2]").appName("test-staterepartition")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.sql.streaming.stateStore.providerClass", ROCKSDB_PROVIDER)
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def _write_rows(folder: Path, start: int, count: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"rows-{start:08d}.json", "w", encoding="utf-8") as out:
        for i in range(start, start + count):
            out.write(json.dumps({"k": i % KEYS, "v": i}) + "\n")


def _run_once(spark, source: Path, checkpoint: Path, seen: dict[int, int]) -> dict:
    """Run the counting query until it has read every file (availableNow); return its last progress."""
    from pyspark.sql import functions as F

    def write(batch, _batch_id):
        for row in batch.collect():
            seen[row["k"]] = row["c"]

    query = (spark.readStream.schema("k INT, v INT").json(str(source))
             .groupBy("k").agg(F.count("*").alias("c"))
             .writeStream.outputMode("update").option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).foreachBatch(write).start())
    query.awaitTermination(240)
    assert not query.isActive, "the availableNow query did not finish within 240 s"
    assert query.exception() is None, query.exception()
    progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
    return progress[-1]


@pytest.mark.spark
@pytest.mark.timeout(600)
def test_rocksdb_state_repartitions_offline_from_4_to_6_and_keeps_its_rows(spark, tmp_path: Path) -> None:
    source, checkpoint, seen = tmp_path / "in", tmp_path / "ck", {}
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", ROCKSDB_PROVIDER)
    spark.conf.set("spark.sql.shuffle.partitions", "4")
    _write_rows(source, 0, 200)
    first = _run_once(spark, source, checkpoint, seen)
    (state,) = first["stateOperators"]
    assert (state["numShufflePartitions"], state["numRowsTotal"]) == (4, KEYS)
    assert seen == {k: 10 for k in range(KEYS)}

    result = repartition_state(spark, checkpoint, 6)
    print(f"offline state repartition 4 -> 6 took {result.duration_s:.2f} s")
    assert (result.from_partitions, result.to_partitions) == (4, 6)
    info = checkpoint_info(checkpoint)
    assert (info.shuffle_partitions, info.committed, info.last_batch) == (6, True, result.batch_id)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".ck.")], "the backup copy was left behind"

    _write_rows(source, 200, 100)
    second = _run_once(spark, source, checkpoint, seen)
    (state,) = second["stateOperators"]
    assert state["numShufflePartitions"] == 6 and state["numStateStoreInstances"] == 6
    assert state["numRowsTotal"] == KEYS
    # the counts went on from the repartitioned state: 10 + 5 per key, none lost or counted twice
    assert seen == {k: 15 for k in range(KEYS)}


@pytest.mark.spark
@pytest.mark.timeout(600)
def test_a_batch_logged_without_commit_is_completed_in_one_batch_then_the_state_repartitions(
        spark, tmp_path: Path) -> None:
    """A query that falls behind has no idle trigger: stopped mid-batch, its newest batch can be
    logged without a commit. :func:`finish_logged_batch` re-runs exactly that batch (its logged
    offsets, through the pipeline's own sink), after which the repartition runs and no row is lost
    or counted twice. The sink fails once inside batch 1 to leave that state: a stop's interrupt can
    land before or after the commit, so a stop does not leave it reliably."""
    from pyspark.sql import functions as F

    source, checkpoint, seen, batches, failed = tmp_path / "in", tmp_path / "ck", {}, [], []
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", ROCKSDB_PROVIDER)
    spark.conf.set("spark.sql.shuffle.partitions", "4")
    for start in range(0, 400, 100):
        _write_rows(source, start, 100)

    def write(batch, batch_id):
        batches.append(batch_id)
        rows = batch.collect()
        if batch_id == 1 and not failed:  # batch 1 has read its rows, and the sink fails before writing them
            failed.append(batch_id)
            raise RuntimeError("the sink is down")
        for row in rows:
            seen[row["k"]] = row["c"]

    def build(session, _values):
        return (session.readStream.schema("k INT, v INT").option("maxFilesPerTrigger", 1).json(str(source))
                .groupBy("k").agg(F.count("*").alias("c"))
                .writeStream.outputMode("update").option("checkpointLocation", str(checkpoint))
                .foreachBatch(write).start())

    query = build(spark, {})
    deadline = time.monotonic() + 120
    while query.isActive and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not query.isActive and query.exception() is not None and batches == [0, 1]
    before = checkpoint_info(checkpoint)
    assert (before.last_batch, before.committed) == (1, False)
    with pytest.raises(StateRepartitionError, match="has no commit"):
        repartition_state(spark, checkpoint, 6)

    spec = PipelineSpec(ref="tests:build", build=build, knobs=())
    ended = finish_logged_batch(spark, spec, {}, {"spark.sql.shuffle.partitions": "4"}, timeout_s=120)
    assert ended is not None and ended <= time.time()
    assert batches == [0, 1, 1]  # the logged batch again, and nothing after it
    assert seen == {k: 10 for k in range(KEYS)}  # two files of 100 rows: 10 per key
    after = checkpoint_info(checkpoint)
    assert (after.last_batch, after.committed) == (1, True)

    result = repartition_state(spark, checkpoint, 6)
    assert (result.from_partitions, result.to_partitions, result.batch_id) == (4, 6, 2)
    progress = _run_once(spark, source, checkpoint, seen)
    assert progress["stateOperators"][0]["numShufflePartitions"] == 6
    assert seen == {k: 20 for k in range(KEYS)}  # every row once: 400 rows, 20 per key


@pytest.mark.spark
@pytest.mark.timeout(600)
def test_hdfs_backed_state_is_refused_before_anything_is_written(spark, tmp_path: Path) -> None:
    source, checkpoint, seen = tmp_path / "in", tmp_path / "ck", {}
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", HDFS_PROVIDER)
    spark.conf.set("spark.sql.shuffle.partitions", "4")
    try:
        _write_rows(source, 0, 100)
        _run_once(spark, source, checkpoint, seen)
        before = _tree_digest(checkpoint)
        jobs_before = len(spark.sparkContext.statusTracker().getJobIdsForGroup(None))
        with pytest.raises(UnsupportedStateProvider, match="HDFSBackedStateStoreProvider.*Nothing was written"):
            repartition_state(spark, checkpoint, 6)
        # refused from the checkpoint files: no Spark job ran
        assert len(spark.sparkContext.statusTracker().getJobIdsForGroup(None)) == jobs_before
        assert _tree_digest(checkpoint) == before
        assert sorted(os.listdir(tmp_path)) == ["ck", "in"]

        # and the checkpoint still starts: the next run counts on from its state
        _write_rows(source, 100, 100)
        progress = _run_once(spark, source, checkpoint, seen)
        assert progress["stateOperators"][0]["numShufflePartitions"] == 4
        assert seen == {k: 10 for k in range(KEYS)}
    finally:
        spark.conf.set("spark.sql.streaming.stateStore.providerClass", ROCKSDB_PROVIDER)


def test_the_runner_refuses_to_repartition_the_state_of_a_query_with_a_file_sink(tmp_path: Path) -> None:
    """Before anything stops: RocksDB state into a file sink is refused with its reason; into another
    sink it may go ahead; HDFS-backed state is refused whatever the sink."""
    from types import SimpleNamespace

    from sparkclient.contract.messages import FailureCode, RescaleCommand
    from sparkclient.contract.spec import Knob, KnobTarget
    from sparkclient.runner.rescale import RescalePaths

    knob = Knob("state", default=2, min=1, max=8, sets=KnobTarget.STATE_PARTITIONS)
    rocks = _fake_checkpoint(tmp_path / "rocks", provider=ROCKSDB_PROVIDER)
    hdfs = _fake_checkpoint(tmp_path / "hdfs", provider=HDFS_PROVIDER)
    for checkpoint, sink, allowed, says in ((rocks, "FileStreamSink", False, "FileStreamSink keeps its own batch log"),
                                           (rocks, "KafkaSink", True, ""), (rocks, None, True, ""),
                                           (hdfs, "ForeachBatchSink", False, "RocksDB only")):
        results = []
        runner = SimpleNamespace(checkpoint=checkpoint, shuffle_knob=knob, sink_class=lambda sink=sink: sink,
                                 _write_result=results.append)
        command = RescaleCommand(id="c1", knobs={"state": 1})
        assert RescalePaths._can_repartition(runner, command, {"state": 2}) is allowed
        if allowed:
            assert results == []
        else:
            (result,) = results
            assert result.code is FailureCode.STATE_NOT_REPARTITIONABLE and says in result.error
            assert result.knobs == {"state": 2}
