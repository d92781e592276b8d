"""What a Spark UI may answer the REST client (:mod:`sparkclient.collector.rest`): bodies up to a size per
endpoint (:data:`MAX_BODY_BYTES`, read in chunks and refused past it), and requests that end by a deadline.

A driver that is sick or hostile can answer 100 MB or trickle a byte a second, in its headers or its
body; httpx's timeouts bound each socket operation, not the request, and Celery's threads pool enforces
no hard time limit. So every socket read, write and connect of the client is bounded by the time left
to the request's deadline (:class:`DeadlineBackend`, under httpx's transport), and the body is counted
chunk by chunk. A refusal is an :class:`AnswerRefusal` code with its data, which the web app stores as the
job's health reason.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from enum import StrEnum
from typing import Any

import httpcore
import httpx

__all__ = ["MAX_BODY_BYTES", "RETRY_STATUSES", "AnswerRefusal", "AnswerRefused", "DeadlineBackend", "body_summary",
           "deadline", "endpoint_of", "failure_hint", "read_body", "shape_problem"]

MiB = 1024 * 1024

#: Most bytes of a body per endpoint (:func:`endpoint_of`), about four times what Spark's defaults give:
#: 1,000 jobs and stages (``spark.ui.retainedJobs``, ``spark.ui.retainedStages``) of 1-4 KB each, SQL pages
#: of 20 executions (a plan with its metrics is 10-100 KB), an executor of ~2 KB. A driver that keeps
#: more passes ``max_body_bytes`` to the client.
MAX_BODY_BYTES: Mapping[str, int] = {
    "applications": 1 * MiB, "jobs": 8 * MiB, "stages": 16 * MiB, "stage": 16 * MiB, "task_summary": 1 * MiB,
    "sql": 16 * MiB, "sql_execution": 4 * MiB, "executors": 4 * MiB, "allexecutors": 8 * MiB, "other": 4 * MiB,
}

_ENDPOINTS = (
    (re.compile(r"applications/?"), "applications"),
    (re.compile(r"applications/[^/]+/stages/\d+/\d+/taskSummary"), "task_summary"),
    (re.compile(r"applications/[^/]+/stages/\d+(/\d+)?"), "stage"),
    (re.compile(r"applications/[^/]+/sql/\d+"), "sql_execution"),
    (re.compile(r"applications/[^/]+/(jobs|stages|sql|executors|allexecutors)/?"), ""),
)


#: The statuses worth retrying: the driver is overloaded or restarting.
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


class AnswerRefusal(StrEnum):
    """Why an answer of Spark was refused (the job's ``health_reason["code"]``)."""

    TOO_LARGE = "spark_answer_too_large"  # data: endpoint, limit_bytes, read_bytes (, declared_bytes)
    TOO_SLOW = "spark_answer_too_slow"    # data: endpoint, deadline_s, bound ("request" or "collection")


class AnswerRefused(Exception):
    """An answer past its bound: ``code`` (:class:`AnswerRefusal`) and ``data`` (JSON-ready)."""

    def __init__(self, code: AnswerRefusal, data: dict[str, Any]) -> None:
        said = (f"its body is over the {data['limit_bytes']:,}-byte limit of {data['endpoint']}"
                if code is AnswerRefusal.TOO_LARGE else
                f"it did not end within the {data['bound']}'s deadline of {data['deadline_s']:g} s")
        super().__init__(f"{said} ({code})")
        self.code = code
        self.data = data


def body_summary(response: httpx.Response, body: bytes) -> str:
    """What came back, without its text: the error ends up in ``Job.last_error``, shown to every
    user, so a body (HTML, a proxy's page, anything the server chose) is never reflected."""
    kind = response.headers.get("content-type", "").split(";")[0].strip() or "no content type"
    return f"a {len(body)}-byte {kind} body"


def shape_problem(payload: Any, kind: type) -> str | None:
    """What is wrong with a decoded answer that should be a ``kind``: a JSON object (``dict``), or a
    list of objects (``list``: every list endpoint Spark serves); None when nothing is."""
    if not isinstance(payload, kind):
        return f"expected {'a JSON list' if kind is list else 'a JSON object'} from Spark, got {type(payload).__name__}"
    if kind is list:
        for index, item in enumerate(payload):
            if not isinstance(item, dict):
                return f"expected a JSON list of objects from Spark, item {index} is a {type(item).__name__}"
    return None


def failure_hint(status: int | None) -> str:
    """What to check when a request failed with HTTP ``status`` (None: no answer)."""
    if status is None:
        return ("Check that the Spark driver is running, that its UI is enabled (spark.ui.enabled) and listening at "
                "this address (spark.ui.port, spark.driver.bindAddress), and that nothing blocks the connection.")
    if status == 404:
        return ("Check the application id (SparkRestClient.applications() lists them) and that the "
                "job/stage/execution still exists: the UI keeps only the last spark.ui.retainedJobs, "
                "spark.ui.retainedStages and spark.sql.ui.retainedExecutions entries.")
    if status in RETRY_STATUSES:
        return "The driver is overloaded or restarting; try again later or raise timeout_s."
    if 300 <= status < 400:
        return "Redirects are not followed: give the Spark UI's own address (spark.ui.proxyBase is not supported)."
    return "Check the request parameters against the Spark monitoring REST API documentation."


def endpoint_of(path: str) -> str:
    """The endpoint of an ``/api/v1`` path (a key of :data:`MAX_BODY_BYTES`), e.g. ``"stages"`` for
    ``applications/app-1/stages``; ``"other"`` for a path the client does not call."""
    path = path.strip("/")
    for pattern, name in _ENDPOINTS:
        match = pattern.fullmatch(path)
        if match:
            return name or match.group(1)
    return "other"


def read_body(response: httpx.Response, *, endpoint: str, limit_bytes: int) -> bytes:
    """The body of a streamed ``response``, read (and decoded) chunk by chunk. Raises :class:`AnswerRefused`
    (``TOO_LARGE``) as soon as it holds more than ``limit_bytes`` bytes, or its ``Content-Length`` says
    it will, without reading the rest; httpx's errors pass through, and ``httpx.ReadTimeout`` is raised
    between chunks once the deadline of :func:`deadline` has passed."""
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit_bytes:
        raise AnswerRefused(AnswerRefusal.TOO_LARGE, {"endpoint": endpoint, "limit_bytes": limit_bytes,
                                                      "read_bytes": 0, "declared_bytes": int(declared)})
    body = bytearray()
    for chunk in response.iter_bytes():  # decoded: the client asks for no compression, a server may still send it
        body += chunk
        if len(body) > limit_bytes:
            raise AnswerRefused(AnswerRefusal.TOO_LARGE, {"endpoint": endpoint, "limit_bytes": limit_bytes,
                                                          "read_bytes": len(body)})
        _left(None, httpx.ReadTimeout)  # a transport without the deadline backend: checked between chunks
    return bytes(body)


# -- the deadline ------------------------------------------------------------------------------

#: The monotonic time by which the current thread's request must end (None: no deadline).
_DEADLINE: ContextVar[float | None] = ContextVar("spark_request_deadline", default=None)


@contextmanager
def deadline(at: float | None) -> Iterator[None]:
    """Bound every socket operation of :class:`DeadlineBackend` in this thread (and context) by the
    monotonic time ``at`` (seconds; None: unbounded) while the block runs."""
    token = _DEADLINE.set(at)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def _left(timeout: float | None, error: type[Exception]) -> float | None:
    """``timeout`` cut to the time left to the deadline; ``error`` when none is left."""
    at = _DEADLINE.get()
    if at is None:
        return timeout
    left = at - time.monotonic()
    if left <= 0:
        raise error("the request's deadline has passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    """A connection whose every read and write ends by the deadline (:func:`_left`)."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._inner.start_tls(ssl_context, server_hostname,
                                                     _left(timeout, httpcore.ConnectTimeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's network backend (``inner``, default: its sync sockets) with every connect, read and
    write bounded by the deadline of :func:`deadline`: a trickle of headers or body ends with httpx's
    ``ConnectTimeout`` / ``ReadTimeout`` / ``WriteTimeout`` once it has passed."""

    def __init__(self, inner: httpcore.NetworkBackend | None = None) -> None:
        self._inner = inner or httpcore.SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._inner.connect_tcp(host, port, _left(timeout, httpcore.ConnectTimeout),
                                                       local_address, socket_options))

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._inner.connect_unix_socket(path, _left(timeout, httpcore.ConnectTimeout),
                                                               socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)
