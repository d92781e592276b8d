"""The runner's store of applied idempotency keys (:mod:`sparkclient.runner.applied`)."""

from __future__ import annotations

import json

import pytest

from sparkclient.contract.messages import (
    FailureCode,
    ProtocolError,
    RescaleCommand,
    RescalePath,
    RescaleResult,
    ResultStatus,
)
from sparkclient.runner.applied import FILE_NAME, AppliedKeys

KNOBS = {"executors": 2, "shuffle_partitions": 8}


def applied_result(command_id: str) -> RescaleResult:
    return RescaleResult(id=command_id, status=ResultStatus.SUCCEEDED, path=RescalePath.IN_PROCESS,
                         downtime_s=3.25, pause_s=2.5, knobs=KNOBS, completed_at=1_700_000_000.5)


def test_a_repeat_is_answered_with_the_first_result_marked_as_a_replay(tmp_path):
    store = AppliedKeys.in_workdir(tmp_path)
    first = RescaleCommand(id="proposal-7-attempt-1", knobs=KNOBS, idempotency_key="proposal-7-revision-1-x")
    assert store.answer(first, None) is None  # new key: apply it
    assert store.record(first.idempotency_key, first.knobs, applied_result(first.id))

    repeat = RescaleCommand(id="proposal-7-attempt-2", knobs=KNOBS, idempotency_key=first.idempotency_key)
    answer = store.answer(repeat, KNOBS)
    assert answer == RescaleResult(id="proposal-7-attempt-2", status=ResultStatus.SUCCEEDED,
                                   path=RescalePath.IN_PROCESS, downtime_s=3.25, pause_s=2.5, knobs=KNOBS,
                                   completed_at=1_700_000_000.5, replay_of="proposal-7-attempt-1")
    # a third attempt still names the command that applied it, and the wire format keeps the field
    third = store.answer(RescaleCommand(id="proposal-7-attempt-3", knobs=KNOBS, idempotency_key=first.idempotency_key),
                         KNOBS)
    assert RescaleResult.from_json(third.to_json()).replay_of == "proposal-7-attempt-1"


def test_a_restarted_runner_keeps_the_keys(tmp_path):
    AppliedKeys.in_workdir(tmp_path).record("k1", KNOBS, applied_result("c1"))
    restarted = AppliedKeys.in_workdir(tmp_path)  # a new driver process on the same workdir
    answer = restarted.answer(RescaleCommand(id="c2", knobs=KNOBS, idempotency_key="k1"), KNOBS)
    assert answer is not None and answer.replay_of == "c1" and answer.pause_s == 2.5
    assert (tmp_path / FILE_NAME).is_file()


def test_a_different_key_applies(tmp_path):
    store = AppliedKeys.in_workdir(tmp_path)
    store.record("k1", KNOBS, applied_result("c1"))
    assert store.answer(RescaleCommand(id="c2", knobs=KNOBS, idempotency_key="k2"), KNOBS) is None
    assert store.answer(RescaleCommand(id="c3", knobs=KNOBS), KNOBS) is None  # no key: every command applies


def test_a_failed_apply_is_not_kept_so_the_next_attempt_applies(tmp_path):
    store = AppliedKeys.in_workdir(tmp_path)
    failed = RescaleResult.failed("c1", FailureCode.RESTART_FAILED, "no", knobs=KNOBS)
    assert not store.record("k1", KNOBS, failed)
    assert store.answer(RescaleCommand(id="c2", knobs=KNOBS, idempotency_key="k1"), None) is None


def test_an_apply_no_longer_running_is_applied_again_and_replaces_the_first(tmp_path):
    """A runner that restarted without its knob values (Redis lost them) runs the old ones: replaying
    the first apply would report a rescale that is not in effect."""
    store = AppliedKeys.in_workdir(tmp_path)
    store.record("k1", KNOBS, applied_result("c1"))
    old = {**KNOBS, "executors": 1}
    assert store.answer(RescaleCommand(id="c2", knobs=KNOBS, idempotency_key="k1"), old) is None
    assert store.record("k1", KNOBS, applied_result("c2"))  # it applied c2
    assert store.answer(RescaleCommand(id="c3", knobs=KNOBS, idempotency_key="k1"), KNOBS).replay_of == "c2"


def test_a_key_reused_with_other_knobs_is_refused_for_good(tmp_path):
    store = AppliedKeys.in_workdir(tmp_path)
    store.record("k1", KNOBS, applied_result("c1"))
    answer = store.answer(RescaleCommand(id="c2", knobs={**KNOBS, "executors": 4}, idempotency_key="k1"), KNOBS)
    assert answer.code is FailureCode.KEY_REUSED and not answer.succeeded and answer.replay_of is None
    assert not answer.code.retryable and answer.knobs == KNOBS


def test_a_corrupt_file_is_set_aside_and_the_store_starts_empty(tmp_path):
    (tmp_path / FILE_NAME).write_text('{"version": 1, "applied": {"k1": {"knobs": "x"')
    store = AppliedKeys.in_workdir(tmp_path)
    assert store.get("k1") is None
    assert (tmp_path / FILE_NAME).with_suffix(".corrupt").is_file()
    assert store.record("k1", KNOBS, applied_result("c1")) and store.get("k1").result.id == "c1"


def test_the_store_keeps_the_newest_keys(tmp_path):
    store = AppliedKeys(tmp_path / FILE_NAME, keep=3)
    for i in range(5):
        store.record(f"k{i}", KNOBS, applied_result(f"c{i}"))
    kept = json.loads((tmp_path / FILE_NAME).read_text())["applied"]
    assert sorted(kept) == ["k2", "k3", "k4"]


def test_commands_without_a_key_keep_their_old_wire_format():
    """An older runner parses only id, action and knobs; an older web app sends no key."""
    assert json.loads(RescaleCommand(id="c", knobs=KNOBS).to_json()) == {"id": "c", "action": "rescale", "knobs": KNOBS}
    keyed = RescaleCommand(id="c", knobs=KNOBS, idempotency_key="k")
    assert RescaleCommand.from_json(keyed.to_json()) == keyed
    assert RescaleResult.from_json(applied_result("c").to_json()).replay_of is None


@pytest.mark.parametrize("text, field", [
    ('{"id": "1", "action": "rescale", "knobs": {}, "idempotency_key": 7}', "idempotency_key"),
    ('{"id": "1", "action": "rescale", "knobs": {}, "idempotency_key": "' + "k" * 3000 + '"}', "idempotency_key"),
])
def test_a_malformed_key_is_a_protocol_error_naming_it(text, field):
    with pytest.raises(ProtocolError) as error:
        RescaleCommand.from_json(text)
    assert error.value.field == field


def test_a_malformed_replay_of_is_a_protocol_error_naming_it():
    data = json.loads(applied_result("c").to_json())
    data["replay_of"] = ["c0"]
    with pytest.raises(ProtocolError) as error:
        RescaleResult.from_json(json.dumps(data))
    assert error.value.field == "replay_of"
