"""sparkclient.runner.session.prepare_query: a standby driver runs the pipeline's build up to its
writer's start() before it owns the checkpoint, and starts the query later with one call."""

from __future__ import annotations

import pytest

from sparkclient.runner.session import prepare_query, start_query

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def spark():
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[1]").appName("test-prepare-query")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    for query in session.streams.active:
        query.stop()
    session.stop()


def _rate(spark, knobs):
    return spark.readStream.format("rate").option("rowsPerSecond", knobs["rows"]).load()


class Spec:
    """The two attributes of a PipelineSpec that prepare_query/start_query use."""

    def __init__(self, build):
        self.build, self.ref = build, f"tests:{build.__name__}"


def test_the_build_runs_once_and_nothing_starts_until_the_prepared_call(spark, tmp_path):
    calls = []

    def build(spark, knobs):
        calls.append(dict(knobs))
        return (_rate(spark, knobs).writeStream.format("noop")
                .option("checkpointLocation", str(tmp_path / "cp")).queryName("prepared").start())

    prepared = prepare_query(spark, Spec(build), {"rows": 7}, {"spark.sql.shuffle.partitions": "3"})
    assert prepared is not None
    assert spark.streams.active == [] and not (tmp_path / "cp").exists()
    assert spark.conf.get("spark.sql.shuffle.partitions") == "3"
    started = start_query(spark, Spec(build), {"rows": 7}, None, prepared=prepared)
    try:
        assert calls == [{"rows": 7}]  # built once, before the checkpoint was owned
        assert started.query.isActive and started.query.name == "prepared"
        assert started.checkpoint == tmp_path / "cp"
    finally:
        started.query.stop()


def test_to_table_is_captured_too_and_a_failing_build_is_left_to_the_normal_start(spark, tmp_path):
    def to_table(spark, knobs):
        return (_rate(spark, knobs).writeStream.option("checkpointLocation", str(tmp_path / "t"))
                .toTable("prepared_table"))

    assert prepare_query(spark, Spec(to_table), {"rows": 1}, None) is not None
    assert spark.streams.active == []

    def broken(spark, knobs):
        raise ValueError("no such topic")

    assert prepare_query(spark, Spec(broken), {"rows": 1}, None) is None
    with pytest.raises(ValueError, match="no such topic"):
        start_query(spark, Spec(broken), {"rows": 1}, None)


def test_a_build_that_never_reaches_start_is_built_again_after_the_handover(spark):
    def batch_only(spark, knobs):
        return spark.range(3)  # not a streaming query: the normal start refuses it with the reason

    assert prepare_query(spark, Spec(batch_only), {"rows": 1}, None) is None
    with pytest.raises(TypeError, match="not a started StreamingQuery"):
        start_query(spark, Spec(batch_only), {"rows": 1}, None)
