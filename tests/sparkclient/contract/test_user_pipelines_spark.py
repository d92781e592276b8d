"""The three pipelines of :mod:`tests.user_pipelines` on one real Spark session, a few batches each:
the binding binds each stage of the batch Spark ran, or names per stage what no knob sets."""

from __future__ import annotations

import pytest

from sparkclient.contract.binding import (
    BindingStatus,
    PinReason,
    StageInput,
    bind_stages,
    plan_stages_of,
    with_state_store,
)
from sparkclient.contract.sparkconf import session_settings
from sparkclient.contract.spec import load_pipeline, validate_values
from sparkclient.runner.session import start_query
from tests.sparkclient.contract.test_binding_spark import _tasks_of_batch
from tests.waiting import wait_for

pytestmark = pytest.mark.spark


def test_the_three_user_pipelines_bind_their_stages_or_name_them(tmp_path, monkeypatch):
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.master("local[2]").appName("user-pipelines").getOrCreate()
    found = {}
    try:
        for name in ("join_build", "foreach_build", "default_state_build"):
            spec = load_pipeline(f"tests.user_pipelines:{name}")
            values = validate_values(spec.knobs, {})
            monkeypatch.setenv("SPARKSCALER_WORKDIR", str(tmp_path / name))
            spark.conf.unset("spark.sql.shuffle.partitions")
            query = start_query(spark, spec, values, session_settings(spec.knobs, values, {})).query
            try:
                def full() -> list[int]:
                    return [p.batchId for p in query.recentProgress
                            if p.sources and all(s.numInputRows > 0 for s in p.sources)]

                wait_for(lambda: len(full()) >= 2, timeout_s=120, what=f"two batches of {name} with rows")
                sink = str(query._jsq.streamingQuery().sink().getClass().getSimpleName())
                plan = with_state_store(plan_stages_of(query) or (), None, sink)
                tasks = _tasks_of_batch(spark, str(query.runId), full()[-1])
            finally:
                query.stop()
            found[name] = bind_stages(plan, spec.knobs, values, tasks)
    finally:
        spark.conf.unset("spark.sql.shuffle.partitions")
        spark.stop()

    join = found["join_build"]
    assert [(b.status, b.knob) for b in join] == [(BindingStatus.BOUND, "clicks_partitions"),
                                                  (BindingStatus.BOUND, "views_partitions"),
                                                  (BindingStatus.BOUND, "state_partitions")]
    foreach = found["foreach_build"]
    assert [(b.status, b.knob, b.input) for b in foreach] == [
        (BindingStatus.BOUND, "source_partitions", StageInput.SOURCE),
        (BindingStatus.BOUND, "shuffle_partitions", StageInput.BATCH_FUNCTION)]
    default = found["default_state_build"]
    assert default[0].status is BindingStatus.BOUND
    assert (default[1].status, default[1].pin, default[1].plan_partitions, default[1].tasks_ran) == (
        BindingStatus.PINNED, PinReason.SHUFFLE_DEFAULT, 200, 200)
