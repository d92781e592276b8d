"""Bounded Spark answers (:mod:`sparkclient.collector.answers`) against a hostile Spark UI on 127.0.0.1
(:mod:`tests.hostile_spark`): a 100 MB body is refused as too large with the process's RSS growing less
than 50 MiB; a body or headers that trickle a byte a second end with the request's or the collection's
deadline (short ones here; the per-read timeout is longer than the trickle's gaps); a redirect is not
followed."""

from __future__ import annotations

import threading
import time

import httpx
import psutil
import pytest

from sparkclient.collector.answers import MAX_BODY_BYTES, AnswerRefusal, endpoint_of, read_body
from sparkclient.collector.rest import SparkAnswerRefused, SparkRestClient, SparkRestError
from tests.hostile_spark import MiB, hostile_spark, huge_body, redirect, trickle_body, trickle_headers

APP = "app-20261202000000-0000"
STAGES = f"/api/v1/applications/{APP}/stages"
JOBS = f"/api/v1/applications/{APP}/jobs"


def _peak_rss_growth(call) -> tuple[BaseException | None, int]:
    """What ``call()`` raised, and how far above its start the process's RSS went while it ran (bytes;
    sampled every 2 ms)."""
    process = psutil.Process()
    start = process.memory_info().rss
    peak = [start]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], process.memory_info().rss)
            done.wait(0.002)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    raised = None
    try:
        call()
    except BaseException as exc:  # noqa: BLE001 - the caller asserts on it
        raised = exc
    finally:
        done.set()
        sampler.join()
    return raised, max(peak[0], process.memory_info().rss) - start


@pytest.mark.parametrize("declared", [False, True], ids=["streamed", "content-length"])
def test_a_100_mb_body_is_refused_as_too_large_without_being_read(declared):
    with hostile_spark() as ui, SparkRestClient(ui.url, attempts=1) as client:
        ui.answers[STAGES] = huge_body(100 * MiB, declared=declared)
        raised, growth = _peak_rss_growth(lambda: client.stages(APP))
    assert isinstance(raised, SparkAnswerRefused), raised
    assert raised.code is AnswerRefusal.TOO_LARGE and raised.status is None
    limit = MAX_BODY_BYTES["stages"]
    assert raised.data["endpoint"] == "stages" and raised.data["limit_bytes"] == limit
    assert raised.data["read_bytes"] <= limit + MiB and (raised.data["read_bytes"] == 0) == declared
    assert growth < 50 * MiB, f"RSS grew {growth / MiB:.1f} MiB"
    assert raised.reason() == {"code": "spark_answer_too_large", "data": raised.data}


@pytest.mark.parametrize("answer", [trickle_body, trickle_headers], ids=["body", "headers"])
def test_a_trickle_of_a_byte_a_second_ends_with_the_requests_deadline(answer):
    """The per-read timeout (5 s) never fires on a byte a second; the call's deadline (1.5 s) does."""
    with hostile_spark() as ui, SparkRestClient(ui.url, timeout_s=5.0, deadline_s=1.5, attempts=3) as client:
        ui.answers[JOBS] = answer()
        with pytest.raises(SparkAnswerRefused) as refused:
            client.jobs(APP)
    assert refused.value.code is AnswerRefusal.TOO_SLOW
    assert refused.value.data == {"endpoint": "jobs", "bound": "request", "deadline_s": 1.5}
    assert client.requests == 1  # not retried: the deadline is the call's, retries included


def test_a_trickle_ends_with_the_collections_deadline_and_no_request_starts_after_it():
    with hostile_spark() as ui, SparkRestClient(ui.url, timeout_s=5.0, time_budget_s=1.5) as client:
        ui.answers[JOBS] = trickle_body()
        with pytest.raises(SparkAnswerRefused) as refused:
            client.jobs(APP)
        assert refused.value.data == {"endpoint": "jobs", "bound": "collection", "deadline_s": 1.5}
        with pytest.raises(SparkRestError, match="time budget of 1.5 s is spent"):
            client.executors(APP)
    assert ui.requested == [JOBS]


def test_a_redirect_is_not_followed():
    with hostile_spark() as ui, SparkRestClient(ui.url, attempts=1) as client:
        ui.answers[JOBS] = redirect(f"{ui.url}/elsewhere")
        with pytest.raises(SparkRestError) as failed:
            client.jobs(APP)
    assert failed.value.status == 302 and "Redirects are not followed" in str(failed.value)
    assert ui.requested == [JOBS]


def test_a_body_at_its_limit_is_read_and_one_byte_more_is_refused():
    def client(body: bytes) -> SparkRestClient:
        transport = httpx.MockTransport(lambda request: httpx.Response(200, content=body))
        return SparkRestClient("http://spark.invalid:4040", attempts=1, transport=transport,
                               max_body_bytes={"executors": 4})
    assert client(b"[{}]").executors(APP) == [{}]
    with pytest.raises(SparkAnswerRefused, match="over the 4-byte limit of executors"):
        client(b"[{} ]").executors(APP)


def test_the_deadline_is_checked_between_chunks_on_any_transport():
    """An injected transport has no deadline backend: the body's chunks are still bounded by it."""
    def slow_chunks():
        yield b"["
        time.sleep(0.3)
        yield b"]"

    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=slow_chunks()))
    with SparkRestClient("http://spark.invalid:4040", attempts=1, transport=transport, deadline_s=0.1) as client:
        with pytest.raises(SparkAnswerRefused) as refused:
            client.jobs(APP)
    assert refused.value.code is AnswerRefusal.TOO_SLOW


@pytest.mark.parametrize(("path", "endpoint"), [
    ("applications", "applications"), (f"applications/{APP}/jobs", "jobs"), (f"applications/{APP}/stages", "stages"),
    (f"applications/{APP}/stages/3/0", "stage"), (f"applications/{APP}/stages/3/0/taskSummary", "task_summary"),
    (f"applications/{APP}/sql", "sql"), (f"applications/{APP}/sql/12", "sql_execution"),
    (f"applications/{APP}/executors", "executors"), (f"applications/{APP}/allexecutors", "allexecutors"),
    (f"applications/{APP}/environment", "other"),
])
def test_every_endpoint_of_the_client_has_its_own_limit(path, endpoint):
    assert endpoint_of(path) == endpoint and endpoint in MAX_BODY_BYTES


def test_read_body_reads_a_declared_length_within_the_limit():
    response = httpx.Response(200, content=b"[1, 2]")
    assert read_body(response, endpoint="jobs", limit_bytes=6) == b"[1, 2]"
