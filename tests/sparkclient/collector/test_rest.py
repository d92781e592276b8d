"""The Spark REST client (against httpx.MockTransport and a tiny local HTTP server) and the
parsers of Spark's formatted SQL metric strings."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from sparkclient.collector.metricstrings import (
    MetricStats,
    parse_bytes,
    parse_count,
    parse_duration_ms,
    parse_size_stats,
    parse_stats,
    stage_refs,
)
from sparkclient.collector.rest import SparkRestClient, SparkRestError

# -- metric strings ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"), [("4,000", 4000), ("10", 10), ("0", 0), (" 1,234,567 ", 1234567)]
)
def test_parse_count(text: str, expected: int) -> None:
    assert parse_count(text) == expected


@pytest.mark.parametrize("text", ["", "4.5", "10 ms", "abc"])
def test_parse_count_rejects_other_shapes(text: str) -> None:
    with pytest.raises(ValueError, match="count"):
        parse_count(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("8.8 KiB", 9011),
        ("0.0 B", 0),
        ("577.0 B", 577),
        ("16.5 MiB", round(16.5 * 1024**2)),
        ("1.0 GiB", 1024**3),
        ("total (min, med, max (stageId: taskId))\n640.0 B (320.0 B, 320.0 B, 320.0 B (stage 28.0: task 83))", 640),
    ],
)
def test_parse_bytes(text: str, expected: int) -> None:
    assert parse_bytes(text) == expected


def test_parse_bytes_rejects_unknown_unit() -> None:
    with pytest.raises(ValueError, match="size"):
        parse_bytes("3 KB")


def test_parse_duration_with_stage_reference() -> None:
    stats = parse_duration_ms("31 ms (14 ms, 17 ms, 17 ms (stage 28.0: task 82))")
    assert stats == MetricStats(total=31, min=14, med=17, max=17, stage=(28, 0), task=82)
    with_header = parse_duration_ms(
        "total (min, med, max (stageId: taskId))\n31 ms (14 ms, 17 ms, 17 ms (stage 28.0: task 82))"
    )
    assert with_header == stats


@pytest.mark.parametrize(
    ("text", "total"), [("0 ms", 0), ("999 ms", 999), ("1.2 s", 1200), ("3.5 m", 210_000), ("1.25 h", 4_500_000)]
)
def test_parse_duration_bare_values(text: str, total: int) -> None:
    stats = parse_duration_ms(text)
    assert stats.total == total
    assert stats.stage is None and stats.max is None


def test_parse_stats_without_total_and_driver_side() -> None:
    probes = parse_stats("(min, med, max (stageId: taskId)):\n(1, 1, 1 (stage 28.0: task 83))", parse_count)
    assert probes == MetricStats(total=None, min=1, med=1, max=1, stage=(28, 0), task=83)
    driver = parse_size_stats("total (min, med, max (stageId: taskId))\n9.1 KiB (1.0 B, 2.0 KiB, 3.0 KiB (driver))")
    assert driver.on_driver and driver.stage is None
    assert driver.total == round(9.1 * 1024)


def test_parse_duration_rejects_garbage() -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration_ms("soon")
    with pytest.raises(ValueError):
        parse_duration_ms("31 ms (14 ms, 17 ms")


def test_stage_refs() -> None:
    text = "total (min, med, max (stageId: taskId))\n577.0 B (94.0 B, 231.0 B, 252.0 B (stage 29.0: task 86))"
    assert stage_refs(text) == [(29, 0)]
    assert stage_refs("4,000") == []


# -- client against MockTransport ---------------------------------------------------------------


def _client(handler, **kwargs) -> SparkRestClient:  # type: ignore[no-untyped-def]
    kwargs.setdefault("backoff_s", 0.0)
    return SparkRestClient("http://spark.test:4040", transport=httpx.MockTransport(handler), **kwargs)


def test_endpoints_paths_and_params() -> None:
    seen: list[httpx.URL] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url)
        single = re.search(r"/stages/\d+/\d+(/taskSummary)?$|/sql/\d+$", request.url.path) is not None
        payload: object = {"id": 1} if single else []
        return httpx.Response(200, json=payload)

    with _client(handler) as client:
        assert client.applications() == []
        client.jobs("app-1")
        client.jobs("app-1", status="SUCCEEDED")
        client.stages("app-1", status=["complete", "failed"])
        assert client.stage("app-1", 28, 0) == {"id": 1}
        assert client.task_summary("app-1", 28, 0) == {"id": 1}
        client.sql("app-1", 20, 10)
        assert client.sql_execution("app-1", 29) == {"id": 1}
        client.executors("app-1")
        client.allexecutors("app-1")

    paths = [str(url).removeprefix("http://spark.test:4040") for url in seen]
    assert paths == [
        "/api/v1/applications",
        "/api/v1/applications/app-1/jobs",
        "/api/v1/applications/app-1/jobs?status=succeeded",
        "/api/v1/applications/app-1/stages?status=complete&status=failed",
        "/api/v1/applications/app-1/stages/28/0?details=false",
        "/api/v1/applications/app-1/stages/28/0/taskSummary?quantiles=1",
        "/api/v1/applications/app-1/sql?offset=20&length=10&details=true&planDescription=false",
        "/api/v1/applications/app-1/sql/29?details=true&planDescription=false",
        "/api/v1/applications/app-1/executors",
        "/api/v1/applications/app-1/allexecutors",
    ]


def test_base_url_with_api_suffix_is_not_doubled() -> None:
    client = SparkRestClient("http://h:4040/api/v1/", transport=httpx.MockTransport(lambda r: httpx.Response(200)))
    assert client.api_url == "http://h:4040/api/v1"
    client.close()


def test_iter_sql_pages_until_a_short_page() -> None:
    executions = [{"id": i} for i in range(7)]

    def handler(request: httpx.Request) -> httpx.Response:
        offset = int(request.url.params["offset"])
        length = int(request.url.params["length"])
        return httpx.Response(200, json=executions[offset : offset + length])

    with _client(handler) as client:
        assert [e["id"] for e in client.iter_sql("app", page_size=3)] == list(range(7))


def test_retries_then_succeeds() -> None:
    calls = {"n": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        if calls["n"] < 3:
            return httpx.Response(503, text="busy")
        return httpx.Response(200, json=[{"id": "app"}])

    with _client(handler, attempts=3) as client:
        assert client.applications() == [{"id": "app"}]
    assert calls["n"] == 3


def test_retries_then_raises_with_url_status_and_hint() -> None:
    calls = {"n": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        return httpx.Response(500, text="boom")

    with _client(handler, attempts=3) as client, pytest.raises(SparkRestError) as caught:
        client.jobs("app-1")
    assert calls["n"] == 3
    err = caught.value
    assert err.status == 500 and err.attempts == 3
    assert err.url == "http://spark.test:4040/api/v1/applications/app-1/jobs"
    assert "HTTP 500" in str(err) and "after 3 attempt(s)" in str(err) and "4-byte text/plain body" in str(err)
    assert "boom" not in str(err)  # summarised, never reflected


def test_not_found_is_not_retried_and_names_the_application() -> None:
    calls = {"n": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        return httpx.Response(404, text="unknown app")

    with _client(handler, attempts=3) as client, pytest.raises(SparkRestError, match="application id") as caught:
        client.stages("nope")
    assert calls["n"] == 1
    assert caught.value.status == 404


def test_connection_errors_are_retried_then_raised() -> None:
    calls = {"n": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        raise httpx.ConnectError("connection refused", request=request)

    with _client(handler, attempts=2) as client, pytest.raises(SparkRestError, match="driver is running") as caught:
        client.executors("app")
    assert calls["n"] == 2
    assert caught.value.status is None


def test_non_json_body_is_reported() -> None:
    with _client(lambda r: httpx.Response(200, text="<html>proxy</html>")) as client:
        with pytest.raises(SparkRestError, match="not JSON"):
            client.applications()


def test_wrong_json_shape_is_reported() -> None:
    with _client(lambda r: httpx.Response(200, json={"oops": 1})) as client:
        with pytest.raises(SparkRestError, match="expected a JSON list"):
            client.jobs("app")


def test_constructor_validates() -> None:
    with pytest.raises(ValueError, match="attempts"):
        SparkRestClient("http://h", attempts=0)
    with pytest.raises(ValueError, match="timeout_s"):
        SparkRestClient("http://h", timeout_s=0)


# -- client against a real local HTTP server (timeouts) ------------------------------------------


class _SlowHandler(BaseHTTPRequestHandler):
    delay_s = 0.0
    hits = 0

    def do_GET(self) -> None:  # noqa: N802 (http.server API)
        type(self).hits += 1
        time.sleep(type(self).delay_s)
        body = json.dumps([{"id": "local-1"}]).encode()
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def slow_server() -> Iterator[tuple[str, type[_SlowHandler]]]:
    handler = type("Handler", (_SlowHandler,), {"delay_s": 0.0, "hits": 0})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


def test_local_server_roundtrip(slow_server: tuple[str, type[_SlowHandler]]) -> None:
    url, _handler = slow_server
    with SparkRestClient(url, timeout_s=2.0) as client:
        assert client.applications() == [{"id": "local-1"}]


def test_local_server_timeouts_are_bounded(slow_server: tuple[str, type[_SlowHandler]]) -> None:
    url, handler = slow_server
    handler.delay_s = 0.5
    with SparkRestClient(url, timeout_s=0.1, attempts=2, backoff_s=0.01) as client:
        with pytest.raises(SparkRestError, match="ReadTimeout") as caught:  # each attempt timed out
            client.applications()
    assert caught.value.attempts == 2
    assert handler.hits == 2
