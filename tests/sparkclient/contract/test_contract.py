"""The pipeline contract, the control protocol and the stage <-> knob binding, without Spark.

Every parser of Redis contents (command, result, status, knob declarations, plan stages) returns a
value or raises its typed error, whatever the input (hypothesis)."""

from __future__ import annotations

import json
import sys
import textwrap
from dataclasses import asdict, fields, replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparkclient.contract.binding import (
    BindingStatus,
    MismatchReason,
    PlanStage,
    StageInput,
    bind_stages,
    plan_stages_from_json,
    plan_stages_to_json,
)
from sparkclient.contract.control import read_status, write_status
from sparkclient.contract.messages import (
    FailureCode,
    ProtocolError,
    RescaleCommand,
    RescalePath,
    RescaleResult,
    ResultStatus,
    RunnerState,
    RunnerStatus,
    StandbyUse,
    StatusUpdate,
)
from sparkclient.contract.sparkconf import session_settings
from sparkclient.contract.spec import (
    ADAPTIVE_COALESCE_CONF,
    SHUFFLE_PARTITIONS_CONF,
    Knob,
    KnobError,
    KnobTarget,
    PipelineLoadError,
    check_knob_set,
    knobs_from_json,
    knobs_to_json,
    load_pipeline,
    validate_values,
)

KNOBS = (
    Knob("cores", 1, 1, 8, KnobTarget.EXECUTORS),
    Knob("src", 2, 1, 16, KnobTarget.SOURCE_PARTITIONS),
    Knob("work", 1, 1, 32, KnobTarget.REPARTITION),
    Knob("more", 4, 1, 32, KnobTarget.REPARTITION),
    Knob("state", 2, 1, 64, KnobTarget.STATE_PARTITIONS),
    Knob("trigger_s", 2, 1, 60),
)
PLAN = (PlanStage(StageInput.SOURCE, None, False), PlanStage(StageInput.REPARTITION, 1, False),
        PlanStage(StageInput.REPARTITION, 4, False), PlanStage(StageInput.SHUFFLE, 2, True))


# -- knobs ----------------------------------------------------------------------------------------

def test_knob_bounds_and_values_are_checked_with_the_knob_named():
    with pytest.raises(KnobError, match="'cores'.*min <= default <= max"):
        Knob("cores", 0, 0, 4, KnobTarget.EXECUTORS)
    with pytest.raises(KnobError, match="sets must be one of"):
        Knob("x", 1, 1, 2, "cpus")
    values = validate_values(KNOBS, {"work": "3", "cores": 2})
    assert values == {"cores": 2, "src": 2, "work": 3, "more": 4, "state": 2, "trigger_s": 2}
    with pytest.raises(KnobError, match="'src': 99 is outside its bounds \\[1, 16\\]"):
        validate_values(KNOBS, {"src": 99})
    with pytest.raises(KnobError, match="knob 'nope': is not a knob of this pipeline"):
        validate_values(KNOBS, {"nope": 1})
    with pytest.raises(KnobError, match="must be an integer"):
        validate_values(KNOBS, {"work": 1.5})


def test_a_knob_set_has_one_executors_knob_and_one_shuffle_setting():
    with pytest.raises(KnobError, match="at most one 'executors'"):
        check_knob_set([Knob("a", 1, 1, 2, KnobTarget.EXECUTORS), Knob("b", 1, 1, 2, KnobTarget.EXECUTORS)])
    with pytest.raises(KnobError, match="spark.sql.shuffle.partitions is set by one knob only"):
        check_knob_set([Knob("a", 1, 1, 2, KnobTarget.SHUFFLE_PARTITIONS),
                        Knob("b", 1, 1, 2, KnobTarget.STATE_PARTITIONS)])
    assert knobs_from_json(knobs_to_json(KNOBS)) == KNOBS


def test_a_pipeline_loads_from_any_folder_on_sys_path(tmp_path, monkeypatch):
    package = tmp_path / "userpipes"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "mine.py").write_text(textwrap.dedent("""
        from sparkclient.contract.spec import Knob, KnobTarget, pipeline

        @pipeline(knobs=[Knob("cores", 1, 1, 4, KnobTarget.EXECUTORS)])
        def build(spark, knobs):
            return None

        def bare(spark, knobs):
            return None
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = load_pipeline("userpipes.mine:build")
    assert spec.knob(KnobTarget.EXECUTORS).name == "cores"
    with pytest.raises(PipelineLoadError, match="declares no knobs"):
        load_pipeline("userpipes.mine:bare")
    with pytest.raises(PipelineLoadError, match="no function 'nothing'"):
        load_pipeline("userpipes.mine:nothing")
    with pytest.raises(PipelineLoadError, match="cannot import pipeline module"):
        load_pipeline("userpipes.absent:build")
    with pytest.raises(PipelineLoadError, match="MODULE:FUNCTION"):
        load_pipeline("userpipes/mine.py")
    sys.modules.pop("userpipes.mine", None)


def test_the_examples_honour_the_contract():
    for ref in ("sparkclient.demo.examples.nexmark:build", "sparkclient.demo.examples.files:build"):
        spec = load_pipeline(ref)
        assert spec.knob(KnobTarget.EXECUTORS) is not None
        assert any(k.sets.is_parallelism for k in spec.knobs)


# -- control protocol ---------------------------------------------------------------------------

def test_command_result_and_status_round_trip():
    command = RescaleCommand(id="42-1", knobs={"cores": 2, "work": 3})
    assert RescaleCommand.from_json(command.to_json()) == command
    result = RescaleResult(id="42-1", status=ResultStatus.SUCCEEDED, path=RescalePath.DRIVER_HANDOVER,
                           downtime_s=3.25, pause_s=1.5, knobs={"cores": 2}, completed_at=10.0, first_batch_at=9.5)
    assert RescaleResult.from_json(result.to_json()) == result
    assert RescaleResult.from_json(result.to_json().replace('"first_batch_at": 9.5, ', '')).first_batch_at is None
    assert result.standby is None and '"standby": null' in result.to_json()
    warm = replace(result, standby=StandbyUse.READY)
    assert RescaleResult.from_json(warm.to_json()) == warm and '"standby": "ready"' in warm.to_json()
    failed = RescaleResult.failed("x", FailureCode.ABOVE_CAPACITY, "9 executors exceed 2")
    assert RescaleResult.from_json(failed.to_json()).code is FailureCode.ABOVE_CAPACITY
    update = StatusUpdate(state=RunnerState.RUNNING, pid=7, knobs={"cores": 1}, capacity=2, trigger_interval_s=2.0,
                          plan_stages=plan_stages_to_json(PLAN))
    parsed = RunnerStatus.from_mapping({k.encode(): v.encode() for k, v in update.to_mapping().items()})
    assert parsed == RunnerStatus(state="running", pid=7, knobs={"cores": 1}, capacity=2, trigger_interval_s=2.0,
                                  plan_stages=plan_stages_to_json(PLAN)) and parsed.running


#: A status update that sets every field.
FULL_STATUS = StatusUpdate(
    state=RunnerState.STARTING, pid=7, supervisor_pid=6, ui_url="http://127.0.0.1:4040", app_id="app-1",
    master="local[2]", pipeline="pipelines.orders:build", query_name="orders", query_id="q-1", run_id="r-1",
    knobs={"cores": 2, "src": 3}, knob_specs=knobs_to_json(KNOBS), plan_stages=plan_stages_to_json(PLAN), capacity=4,
    trigger_interval_s=2.5, checkpoint="/tmp/orders/checkpoint", lease_token="token-1", started_at=1712000000.125,
    last_batch_at=1712000004.75, error="StreamingQueryException: boom", exit_code=-9, exception="ValueError",
    exception_message="boom", log_path="/tmp/orders/driver.log", crashes=3, crash_window_s=300.0,
    restart_at=1712000010.5)


def test_a_status_written_is_read_back_and_an_update_writes_only_its_fields(redis_client):
    assert all(getattr(FULL_STATUS, f.name) is not None for f in fields(StatusUpdate))
    write_status(redis_client, "orders", FULL_STATUS)
    assert asdict(read_status(redis_client, "orders")) == asdict(FULL_STATUS)
    write_status(redis_client, "orders", StatusUpdate(state=RunnerState.RUNNING, error=""))
    write_status(redis_client, "orders", StatusUpdate())  # sets nothing: writes nothing
    assert read_status(redis_client, "orders") == RunnerStatus(**{**asdict(FULL_STATUS), "state": "running",
                                                                  "error": ""})
    with pytest.raises(TypeError):  # a field the status does not have cannot be written
        StatusUpdate(queue_depth=3)


@pytest.mark.parametrize("standby", ["warm", 1, ["ready"], {"ready": 1}, True])
def test_a_result_with_an_unknown_standby_names_the_field(standby):
    text = json.dumps({"id": "1", "status": "succeeded", "path": "driver-handover", "standby": standby})
    with pytest.raises(ProtocolError) as err:
        RescaleResult.from_json(text)
    assert err.value.field == "standby"


@pytest.mark.parametrize("downtime", ["1" + "0" * 400, "NaN", "Infinity", "-1", "true", '"5"'])
def test_a_result_with_a_huge_or_non_finite_number_names_the_field(downtime):
    text = '{"id": "1", "status": "succeeded", "path": "driver-handover", "downtime_s": %s}' % downtime
    with pytest.raises(ProtocolError) as err:
        RescaleResult.from_json(text)
    assert err.value.field == "downtime_s"


@pytest.mark.parametrize("text, field", [
    ('{"id": "1", "action": "rescale", "knobs": {"cores": 1.5}}', "knobs.cores"),
    ('{"id": "", "action": "rescale", "knobs": {}}', "id"),
    ('{"id": "1", "action": "delete", "knobs": {}}', "action"),
    ('[1, 2]', "command"),
    ('{"id": "1", "action": "rescale", "knobs"', "command"),
])
def test_a_malformed_command_names_its_field(text, field):
    with pytest.raises(ProtocolError) as err:
        RescaleCommand.from_json(text)
    assert err.value.field == field


@pytest.mark.parametrize("text, command_id", [
    ('{"id": "1", "action": "delete"}', "1"), ('{"id": ""}', None), ('{"id": 7}', None), ('[1]', None),
    ('{"id"', None), (None, None), ('{"id": "%s"}' % ("x" * 201), None)])
def test_a_command_that_does_not_parse_still_gives_its_id_when_it_has_one(text, command_id):
    assert RescaleCommand.id_of(text) == command_id


def test_a_malformed_status_names_its_field():
    for raw, field in [({"pid": "x"}, "pid"), ({"state": "flying"}, "state"), ({"knobs": "[1]"}, "knobs"),
                       ({"trigger_interval_s": "inf"}, "trigger_interval_s"),
                       ({"capacity": "-1.5"}, "capacity")]:
        with pytest.raises(ProtocolError) as err:
            RunnerStatus.from_mapping(raw)
        assert err.value.field == field


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                 max_size=4), max_leaves=12)


def _mutations(base: dict) -> st.SearchStrategy:
    """``base`` with keys dropped, values replaced by any JSON, or the text truncated."""
    def mutate(data):
        drop, replace, value, cut = data
        doc = {k: v for i, (k, v) in enumerate(base.items()) if i not in drop}
        for key in replace:
            if key in doc:
                doc[key] = value
        text = json.dumps(doc, allow_nan=True)
        return text[:cut] if cut is not None else text
    keys = list(base)
    return st.tuples(st.sets(st.integers(0, len(keys))), st.sets(st.sampled_from(keys)), _json,
                     st.none() | st.integers(0, 200)).map(mutate)


_RESULT = json.loads(RescaleResult(id="1", status=ResultStatus.FAILED, path=RescalePath.NONE, knobs={"a": 1},
                                   code=FailureCode.OUT_OF_BOUNDS, error="e", executor_change_s=1.0,
                                   standby=StandbyUse.STARTED).to_json())
_STATUS = FULL_STATUS.to_mapping()


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_mutations({"id": "1", "action": "rescale", "knobs": {"a": 1}}) | _mutations(_RESULT))
def test_command_and_result_parsers_return_a_value_or_a_protocol_error(text):
    for parse in (RescaleCommand.from_json, RescaleResult.from_json):
        try:
            parse(text)
        except ProtocolError:
            pass


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(field=st.sampled_from(sorted(_STATUS)), value=st.text(max_size=60) | _json.map(json.dumps))
def test_status_and_its_nested_fields_parse_to_a_value_or_a_typed_error(field, value):
    raw = {**_STATUS, field: value}
    try:
        status = RunnerStatus.from_mapping(raw)
    except ProtocolError:
        return
    try:
        plan_stages_from_json(status.plan_stages)
    except ValueError:
        pass
    try:
        knobs_from_json(status.knob_specs)
    except KnobError:
        pass


# -- binding ---------------------------------------------------------------------------------------

def test_each_stage_binds_to_the_knob_that_sets_its_tasks():
    values = validate_values(KNOBS, {"src": 3})
    bindings = bind_stages(PLAN, KNOBS, values, [3, 1, 4, 2])
    assert [(b.knob, b.status) for b in bindings] == [
        ("src", BindingStatus.BOUND), ("work", BindingStatus.BOUND), ("more", BindingStatus.BOUND),
        ("state", BindingStatus.BOUND)]
    assert all(b.adjustable for b in bindings)


def test_a_disagreement_is_a_mismatch_with_its_numbers_never_a_silent_binding():
    values = validate_values(KNOBS, {})
    tasks_off = bind_stages(PLAN, KNOBS, values, [2, 1, 4, 3])[3]
    assert (tasks_off.status, tasks_off.reason, tasks_off.knob_value, tasks_off.tasks_ran) == \
        (BindingStatus.MISMATCH, MismatchReason.TASKS, 2, 3)
    swapped = bind_stages(PLAN, KNOBS, {**values, "work": 4, "more": 1}, [2, 1, 4, 2])  # declared in the wrong order
    assert [b.reason for b in swapped[1:3]] == [MismatchReason.PLAN_PARTITIONS] * 2
    assert all(b.status is BindingStatus.MISMATCH for b in bind_stages(PLAN, KNOBS, values, [2, 1, 2]))
    assert all(b.status is BindingStatus.UNVERIFIED for b in bind_stages(None, KNOBS, values, [2, 1, 4, 2]))


def test_a_shuffle_that_adaptive_execution_coalesced_is_named_as_such():
    """The operator turned adaptive coalescing back on: the stage's tasks (1) are not the knob's (2),
    and the reason is the coalescing, not a pipeline that ignores its knob."""
    plan = (*PLAN[:3], PlanStage(StageInput.SHUFFLE, 2, False, ("AQEShuffleRead", "Project")))
    values = validate_values(KNOBS, {})
    coalesced = bind_stages(plan, KNOBS, values, [2, 1, 4, 1])[3]
    assert (coalesced.status, coalesced.reason, coalesced.knob_value, coalesced.tasks_ran) == \
        (BindingStatus.MISMATCH, MismatchReason.COALESCED, 2, 1)
    assert bind_stages(plan, KNOBS, values, [2, 1, 4, 2])[3].status is BindingStatus.BOUND  # read, not coalesced


def test_the_shuffle_knob_sets_the_partitions_and_turns_off_adaptive_coalescing_unless_the_operator_set_it():
    values = validate_values(KNOBS, {"state": 6})
    assert session_settings(KNOBS, values, {}) == {SHUFFLE_PARTITIONS_CONF: "6", ADAPTIVE_COALESCE_CONF: "false"}
    assert session_settings(KNOBS, values, {ADAPTIVE_COALESCE_CONF: "true"}) == {SHUFFLE_PARTITIONS_CONF: "6"}
    assert session_settings(KNOBS[:4], validate_values(KNOBS[:4], {}), {}) == {}  # no shuffle knob: Spark's own


def test_a_stage_without_a_knob_is_pinned():
    bindings = bind_stages(PLAN, [Knob("cores", 1, 1, 2, KnobTarget.EXECUTORS)], {"cores": 1}, [2, 1, 4, 2])
    assert {b.status for b in bindings} == {BindingStatus.PINNED}
