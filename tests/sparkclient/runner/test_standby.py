"""The standby prepared while a proposal is pending: the web app's request and the standby's report
(``sparkclient.contract.standby``), and the supervisor's keeper and the handover's claim
(``sparkclient.runner.standby``, ``sparkclient.runner.handover``), with a real Redis and no Spark."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparkclient.contract import keys
from sparkclient.contract.messages import ProtocolError, StandbyUse
from sparkclient.contract.spec import Knob, KnobTarget, PipelineSpec
from sparkclient.contract.standby import (
    HandoverState,
    StandbyAction,
    StandbyRequest,
    StandbyStatus,
    read_standby_request,
    send_standby_request,
)
from sparkclient.runner import standby as standby_module
from sparkclient.runner.arguments import add_run_arguments
from sparkclient.runner.handover import (
    claim_prepared,
    knobs_text,
    mark_as,
    open_prepared,
    pending_standby,
    request_standby,
    wait_for_release,
)
from sparkclient.runner.session import WARM_UP_BATCHES
from sparkclient.runner.standby import StandbyCost, StandbyKeeper, StandbyRole, prepared_request_holds
from sparkclient.runner.supervisor import driver_command

JOB = "sb"
KNOBS = (Knob("cores", default=1, min=1, max=4, sets=KnobTarget.EXECUTORS),
         Knob("parts", default=2, min=1, max=8, sets=KnobTarget.SHUFFLE_PARTITIONS))


def _spec() -> PipelineSpec:
    return PipelineSpec(ref="tests:standby", build=lambda spark, knobs: None, knobs=KNOBS)


# -- the messages ---------------------------------------------------------------------------------

def test_a_request_round_trips_and_lives_for_its_ttl():
    request = StandbyRequest(StandbyAction.PREPARE, "12", {"cores": 2, "parts": 2}, sent_at=100.0, ttl_s=60.0)
    assert StandbyRequest.from_json(request.to_json()) == request
    assert request.live(160.0) and not request.live(160.5)


@pytest.mark.parametrize("text, field", [
    ('{"action": "start", "proposal": "1", "knobs": {"a": 1}, "sent_at": 1, "ttl_s": 1}', "action"),
    ('{"action": "prepare", "proposal": "", "knobs": {"a": 1}, "sent_at": 1, "ttl_s": 1}', "proposal"),
    ('{"action": "prepare", "proposal": "1", "knobs": {}, "sent_at": 1, "ttl_s": 1}', "knobs"),
    ('{"action": "prepare", "proposal": "1", "knobs": {"a": 1.5}, "sent_at": 1, "ttl_s": 1}', "knobs.a"),
    ('{"action": "cancel", "proposal": "1", "sent_at": -1, "ttl_s": 1}', "sent_at"),
    ('{"action": "cancel", "proposal": "1", "sent_at": 1, "ttl_s": 1e9}', "ttl_s"),
    ('{"action": "cancel", "proposal": "1", "sent_at": 1, "ttl_s": NaN}', "ttl_s"),
    ('[1]', "standby"), ('{"action"', "standby"),
])
def test_a_malformed_request_names_its_field(text, field):
    with pytest.raises(ProtocolError) as err:
        StandbyRequest.from_json(text)
    assert err.value.field == field


def test_the_standby_report_parses_its_state_and_cost():
    status = StandbyStatus.from_mapping({b"state": b"ready", b"proposal": b"7", b"knobs": b'{"cores": 2}',
                                         b"rss_mb": b"1490", b"cpu_pct": b"2.5", b"id": b"prepared-7"})
    assert status == StandbyStatus(HandoverState.READY, "7", {"cores": 2}, 1490.0, 2.5)
    assert StandbyStatus.from_mapping({}) == StandbyStatus()
    for raw, field in [({"state": "asleep"}, "state"), ({"state": "ready", "rss_mb": "-1"}, "rss_mb"),
                       ({"state": "ready", "knobs": "{"}, "knobs"), ({"state": "ready", "cpu_pct": "x"}, "cpu_pct")]:
        with pytest.raises(ProtocolError) as err:
            StandbyStatus.from_mapping(raw)
        assert err.value.field == field


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                 max_size=4), max_leaves=12)
_REQUEST = json.loads(StandbyRequest(StandbyAction.PREPARE, "1", {"cores": 2}, sent_at=1.0).to_json())


def _mutated(data) -> str:
    drop, replace, value, cut = data
    doc = {k: v for i, (k, v) in enumerate(_REQUEST.items()) if i not in drop}
    for key in replace:
        doc[key] = value
    text = json.dumps(doc, allow_nan=True)
    return text[:cut] if cut is not None else text


@pytest.mark.fuzz
@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.tuples(st.sets(st.integers(0, len(_REQUEST))), st.sets(st.sampled_from(sorted(_REQUEST))), _json,
                      st.none() | st.integers(0, 120)).map(_mutated) | st.text(max_size=60))
def test_the_request_parser_returns_a_value_or_a_protocol_error(text):
    try:
        request = StandbyRequest.from_json(text)
    except ProtocolError:
        return
    assert request.action in StandbyAction and request.ttl_s >= 0 and request.proposal
    assert StandbyRequest.from_json(request.to_json()) == request


@pytest.mark.fuzz
@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(field=st.sampled_from(["state", "proposal", "knobs", "rss_mb", "cpu_pct", "ready_at", "spawned_at", "error"]),
       value=st.text(max_size=60) | _json.map(json.dumps))
def test_the_report_parser_returns_a_value_or_a_protocol_error(field, value):
    raw = {"state": "ready", "proposal": "1", "knobs": '{"cores": 2}', "rss_mb": "10", field: value}
    try:
        status = StandbyStatus.from_mapping(raw)
    except ProtocolError:
        return
    assert status.rss_mb is None or status.rss_mb >= 0


# -- the handover's claim ---------------------------------------------------------------------------

def test_a_command_with_the_prepared_knobs_claims_the_standby_and_waits_for_it(redis_client):
    open_prepared(redis_client, JOB, "prepared-1-a", "1", {"cores": 2, "parts": 2})
    assert not claim_prepared(redis_client, JOB, "c0", {"cores": 3, "parts": 2})  # other knobs
    ready = threading.Timer(0.3, lambda: mark_as(redis_client, JOB, "prepared-1-a", state="ready"))
    ready.start()
    assert request_standby(redis_client, JOB, "c1", {"parts": 2, "cores": 2}, threading.Event(),
                           timeout_s=10) == (StandbyUse.STARTING, None)  # claimed while starting
    ready.join()  # its reply read before the fixture closes the client
    hand = redis_client.hgetall(keys.handover(JOB))
    assert (hand["id"], hand["command"], hand["state"]) == ("prepared-1-a", "c1", "ready")
    assert float(hand["requested_at"]) >= float(hand["spawned_at"])
    assert not claim_prepared(redis_client, JOB, "c2", {"cores": 2, "parts": 2})  # claimed once


def test_a_command_says_whether_the_standby_it_hands_over_to_was_ready_when_it_came(redis_client):
    open_prepared(redis_client, JOB, "prepared-1-a", "1", {"cores": 2, "parts": 2})
    mark_as(redis_client, JOB, "prepared-1-a", state="ready")
    assert request_standby(redis_client, JOB, "c1", {"cores": 2, "parts": 2}, threading.Event(),
                           timeout_s=10) == (StandbyUse.READY, None)
    use, error = request_standby(redis_client, JOB, "c2", {"cores": 3, "parts": 2}, threading.Event(), timeout_s=0.1)
    assert use is StandbyUse.STARTED and error  # none prepared with these knobs: asked for, not ready in time


@pytest.mark.parametrize("pending, use", [({"standby": "ready"}, StandbyUse.READY),
                                          ({"standby": "started"}, StandbyUse.STARTED),
                                          ({}, None), ({"standby": "warm"}, None), ({"standby": [1]}, None)])
def test_a_pending_handover_reads_its_standby_or_none(pending, use):
    assert pending_standby({"id": "c1", **pending}) is use


def test_a_command_with_other_knobs_asks_for_a_new_standby_and_the_prepared_one_gives_up(redis_client):
    open_prepared(redis_client, JOB, "prepared-1-a", "1", {"cores": 2, "parts": 2})
    stop = threading.Event()
    outcome = []
    waiter = threading.Thread(target=lambda: outcome.append(wait_for_release(redis_client, JOB, "prepared-1-a", stop)))
    waiter.start()
    time.sleep(0.2)
    request_standby(redis_client, JOB, "c1", {"cores": 3, "parts": 2}, threading.Event(), timeout_s=0.3)
    waiter.join(timeout=5)
    assert outcome == [False]
    hand = redis_client.hgetall(keys.handover(JOB))
    assert hand["id"] == "c1" and "prepared" not in hand  # the old standby wrote nothing into the new hash


def test_a_prepared_standby_nobody_claimed_gives_up_when_its_request_is_withdrawn(redis_client):
    knobs = {"cores": 2, "parts": 2}
    send_standby_request(redis_client, JOB, StandbyRequest(StandbyAction.PREPARE, "1", knobs))
    open_prepared(redis_client, JOB, "prepared-1-a", "1", knobs)
    holds = lambda: prepared_request_holds(redis_client, JOB, "1", knobs)  # noqa: E731
    cost = StandbyCost()
    threading.Timer(0.3, lambda: send_standby_request(
        redis_client, JOB, StandbyRequest(StandbyAction.CANCEL, "1"))).start()
    assert not wait_for_release(redis_client, JOB, "prepared-1-a", threading.Event(), still_wanted=holds,
                                report=cost.reading, every_s=0.1)
    hand = redis_client.hgetall(keys.handover(JOB))
    assert hand["state"] == "cancelled" and float(hand["rss_mb"]) > 10


# -- the supervisor's keeper ----------------------------------------------------------------------

class _Spawned:
    """Stand-in standby processes (``sleep``), each in a session of its own like the real ones."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.procs: list[subprocess.Popen] = []

    def __call__(self, handover_id: str) -> subprocess.Popen:
        self.ids.append(handover_id)
        self.procs.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                                           start_new_session=True))
        return self.procs[-1]

    def end(self) -> None:
        for proc in self.procs:
            proc.kill()
            proc.wait()


@pytest.fixture
def keeper(redis_client):
    spawned = _Spawned()
    redis_client.set(keys.config(JOB), knobs_text({"cores": 1, "parts": 2}))
    yield StandbyKeeper(redis_client, JOB, _spec(), spawned, "driver.log"), spawned
    spawned.end()


def _prepare(client, proposal: str, **knobs) -> None:
    send_standby_request(client, JOB, StandbyRequest(StandbyAction.PREPARE, proposal, knobs))


def test_the_keeper_prepares_replaces_and_stops_the_standby_as_the_requests_ask(redis_client, keeper):
    keeper, spawned = keeper
    keeper.tick()
    assert spawned.ids == []  # nothing requested
    _prepare(redis_client, "1", cores=1)
    keeper.tick()
    assert spawned.ids == []  # the running knobs: nothing to prepare
    _prepare(redis_client, "1", cores=2)
    keeper.tick()
    keeper.tick()
    assert len(spawned.ids) == 1 and spawned.ids[0].startswith("prepared-1-")
    hand = redis_client.hgetall(keys.handover(JOB))
    assert (hand["state"], hand["proposal"], json.loads(hand["knobs"])) == ("starting", "1", {"cores": 2, "parts": 2})
    _prepare(redis_client, "1", cores=3)  # revised: replaced
    keeper.tick()
    keeper.tick()
    assert len(spawned.ids) == 2 and spawned.procs[0].wait(timeout=10) is not None
    send_standby_request(redis_client, JOB, StandbyRequest(StandbyAction.CANCEL, "1"))
    keeper.tick()
    assert keeper.proc is None and spawned.procs[1].wait(timeout=10) is not None
    assert redis_client.hget(keys.handover(JOB), "state") == "cancelled"


def test_the_keeper_keeps_a_claimed_standby_and_hands_it_over(redis_client, keeper):
    keeper, spawned = keeper
    _prepare(redis_client, "1", cores=2)
    keeper.tick()
    assert claim_prepared(redis_client, JOB, "c1", {"cores": 2, "parts": 2})
    redis_client.delete(keys.standby_request(JOB))  # the request expired meanwhile: the claim keeps it
    keeper.tick()
    assert keeper.proc is spawned.procs[0] and spawned.procs[0].poll() is None
    assert keeper.take() is spawned.procs[0] and keeper.proc is None


def test_a_command_for_other_knobs_replaces_the_prepared_standby(redis_client, keeper):
    keeper, spawned = keeper
    _prepare(redis_client, "1", cores=2)
    keeper.tick()
    request_standby(redis_client, JOB, "c9", {"cores": 3, "parts": 2}, threading.Event(), timeout_s=0.01)
    redis_client.hset(keys.handover(JOB), "state", "requested")  # as the running driver left it, waiting
    keeper.tick()
    assert spawned.ids[1] == "c9" and spawned.procs[0].wait(timeout=10) is not None
    assert redis_client.hget(keys.handover(JOB), "state") == "starting"


def test_a_prepared_standby_that_failed_is_not_started_again(redis_client, keeper):
    keeper, spawned = keeper
    _prepare(redis_client, "1", cores=2)
    keeper.tick()
    spawned.procs[0].kill()
    spawned.procs[0].wait()
    keeper.tick()
    assert redis_client.hget(keys.handover(JOB), "state") == "failed"
    assert "exited with code" in redis_client.hget(keys.handover(JOB), "error")
    keeper.tick()
    assert len(spawned.ids) == 1
    assert read_standby_request(redis_client, JOB).proposal == "1"


def test_the_warm_up_batches_flag_reaches_the_standby_drivers_warm_up(monkeypatch, redis_client):
    """``--warm-up-batches N`` goes from ``run`` to the driver child's argv, and the standby warms the
    pipeline's plan up on N batches (the runner's default without it); below 1 it is refused."""
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    args = parser.parse_args(["--pipeline", "mod:build", "--job", "j", "--warm-up-batches", "2"])
    args.capacity = 2
    cmd, _env = driver_command(args, Path("/tmp/j"), standby="s1")
    assert cmd[cmd.index("--warm-up-batches") + 1] == "2"
    assert parser.parse_args(cmd[cmd.index("--pipeline"):]).warm_up_batches == 2
    default = parser.parse_args(["--pipeline", "mod:build", "--job", "j"])
    default.capacity = 2
    assert default.warm_up_batches is None and "--warm-up-batches" not in driver_command(default, Path("/tmp/j"))[0]
    with pytest.raises(SystemExit):
        parser.parse_args(["--pipeline", "mod:build", "--job", "j", "--warm-up-batches", "0"])

    asked = []
    monkeypatch.setattr(standby_module, "warm_up_pipeline", lambda *a, batches, **kw: asked.append(batches) or batches)
    monkeypatch.setattr(standby_module, "warm_up", lambda *a, **kw: pytest.fail("the generic warm-up ran"))
    monkeypatch.setattr(standby_module, "prepare_query", lambda *a, **kw: None)
    monkeypatch.setattr(standby_module, "wait_for_release", lambda *a, **kw: True)

    class Standby(StandbyRole):
        spark = spec = None
        values, job, standby, workdir, stop_event = {}, "j", "s1", Path("/tmp/j"), threading.Event()
        client, in_place = redis_client, False

        def __init__(self, warm_up_batches):
            self.warm_up_batches = warm_up_batches

        def _build_session(self):
            return object()

        def _session_conf(self):
            return {}

        def _add_listener(self):
            pass

    assert Standby(2)._wait_as_standby() and Standby(None)._wait_as_standby()
    assert asked == [2, WARM_UP_BATCHES]


@pytest.mark.parametrize("free_executor", [True, False])
def test_a_standby_on_a_cluster_asks_for_the_plans_executors_and_warms_up_only_on_one(monkeypatch, redis_client,
                                                                                      free_executor):
    """On a cluster the standby asks for its plan's executor count before anything runs (else the
    master hands it every core the running driver frees at the handover); without a free executor it
    skips both warm-ups (their jobs would block until the handover) and is still ready."""
    calls, warmed = [], []

    class Scaler:
        def __init__(self, spark, *, min_executors):
            calls.append(("new", spark, min_executors))

        def limit_to(self, total, *, wait_s):
            calls.append(("limit_to", total, wait_s))
            return free_executor

    monkeypatch.setattr(standby_module, "ExecutorScaler", Scaler)
    monkeypatch.setattr(standby_module, "warm_up_pipeline", lambda *a, **kw: warmed.append("plan") or 0)
    monkeypatch.setattr(standby_module, "warm_up", lambda *a, **kw: warmed.append("generic"))
    monkeypatch.setattr(standby_module, "prepare_query", lambda *a, **kw: None)
    monkeypatch.setattr(standby_module, "wait_for_release", lambda *a, **kw: True)
    session = object()

    class Standby(StandbyRole):
        spark = spec = None
        values, job, standby, workdir, stop_event = {}, "j", "s1", Path("/tmp/j"), threading.Event()
        client, in_place, warm_up_batches = redis_client, True, None

        def _build_session(self):
            return session

        def executors(self):
            return 3

        def _session_conf(self):
            return {}

        def _add_listener(self):
            pass

    assert Standby()._wait_as_standby()
    assert calls == [("new", session, 1), ("limit_to", 3, standby_module.STANDBY_EXECUTOR_WAIT_S)]
    assert warmed == (["plan", "generic"] if free_executor else [])
