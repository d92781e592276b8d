"""A small client for Spark's monitoring REST API (``/api/v1``).

Only the endpoints the autoscaler needs. Every method returns the decoded JSON as Spark sends
it (lists of dicts / dicts with Spark's camelCase keys), so the pure functions of
:mod:`sparkclient.collector.topology` can be tested on captured fixtures.

Transport errors, HTTP 429 and 5xx are retried a bounded number of times with exponential
back-off (tenacity); anything else, or the last failure, raises :class:`SparkRestError`.
The client counts the HTTP requests it makes (``requests``, retries included) and, given a budget
(``max_requests``, ``time_budget_s``), makes none past it (:class:`RequestBudgetSpent`). An answer is
bounded (:mod:`sparkclient.collector.answers`): its body by a size per endpoint, each call by a deadline,
and every call by the end of the time budget; past a bound it is refused (:class:`SparkAnswerRefused`).
Redirects are not followed (a 3xx is an error).
The metric strings of its payloads are parsed by :mod:`sparkclient.collector.metricstrings`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from typing import Any

import httpx
from tenacity import RetryError, Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from sparkclient.collector.answers import (
    MAX_BODY_BYTES,
    RETRY_STATUSES,
    AnswerRefusal,
    AnswerRefused,
    DeadlineBackend,
    body_summary,
    deadline,
    endpoint_of,
    failure_hint,
    read_body,
    shape_problem,
)

__all__ = ["RequestBudgetSpent", "SparkAnswerRefused", "SparkRestClient", "SparkRestError", "deadline_transport"]

JSON = Any
#: Seconds a socket's timeout may fire before the deadline it was cut to (the clocks' rounding).
_CLOCK_SLACK_S = 0.05


class SparkRestError(RuntimeError):
    """A Spark REST call failed for good (after retries, or with a non-retryable status).

    Attributes: ``url`` (the full URL requested), ``status`` (HTTP status, or ``None`` when no
    response arrived), ``attempts`` (how many requests were made).
    """

    def __init__(self, message: str, *, url: str, status: int | None, attempts: int) -> None:
        super().__init__(message)
        self.url = url
        self.status = status
        self.attempts = attempts


class RequestBudgetSpent(SparkRestError):
    """A request the client did not make: its budget of requests (``max_requests``) or of time
    (``time_budget_s``) is spent. ``status`` is None and ``attempts`` 0; not retried."""


class SparkAnswerRefused(SparkRestError):
    """An answer past its bound (:mod:`sparkclient.collector.answers`), not retried: ``code``
    (:class:`sparkclient.collector.answers.AnswerRefusal`) and ``data`` (endpoint, bound, bytes or seconds)."""

    def __init__(self, refused: AnswerRefused, *, url: str, attempts: int) -> None:
        super().__init__(f"GET {url} refused: {refused}", url=url, status=None, attempts=attempts)
        self.code = refused.code
        self.data = refused.data

    def reason(self) -> dict[str, Any]:
        """``{"code", "data"}``, as the web app stores a job's health reason."""
        return {"code": str(self.code), "data": self.data}


class _RetryableStatus(Exception):
    """Internal: a response whose status is worth retrying, and its body."""

    def __init__(self, response: httpx.Response, body: bytes) -> None:
        super().__init__(f"HTTP {response.status_code}")
        self.response = response
        self.body = body


def _is_retryable(exc: BaseException) -> bool:
    return isinstance(exc, (_RetryableStatus, httpx.TransportError))


class SparkRestClient:
    """Client for ``<base_url>/api/v1`` of one Spark driver UI (or history server).

    ``base_url`` is the UI root, e.g. ``"http://127.0.0.1:4040"`` (a trailing ``/api/v1`` is
    accepted too). ``timeout_s`` bounds each request (connect, read, write and pool), in seconds.
    ``attempts`` is the total number of tries per call (>= 1); back-off between tries is
    exponential from ``backoff_s`` seconds, capped at ``max_backoff_s``.
    ``transport`` lets tests inject an ``httpx.MockTransport`` (default: httpx's, on
    :class:`sparkclient.collector.answers.DeadlineBackend`).
    ``max_requests`` bounds the HTTP requests of the client's life (retries included; None: no
    bound); ``time_budget_s`` the seconds from its creation after which it starts none and by which
    every call ends (None: no bound). ``deadline_s`` bounds each call, its retries included, seconds;
    ``max_body_bytes`` overrides :data:`sparkclient.collector.answers.MAX_BODY_BYTES` per endpoint.
    ``requests`` counts the HTTP requests made.

    Use as a context manager or call :meth:`close`.
    """

    #: Seconds each request may take (connect, read, write, pool) unless told otherwise.
    DEFAULT_TIMEOUT_S = 5.0
    #: Seconds a call (its retries included) may take unless told otherwise.
    DEFAULT_DEADLINE_S = 20.0

    def __init__(
        self,
        base_url: str,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        *,
        attempts: int = 3,
        backoff_s: float = 0.2,
        max_backoff_s: float = 2.0,
        transport: httpx.BaseTransport | None = None,
        max_requests: int | None = None,
        time_budget_s: float | None = None,
        deadline_s: float = DEFAULT_DEADLINE_S,
        max_body_bytes: dict[str, int] | None = None,
    ) -> None:
        if attempts < 1:
            raise ValueError(f"attempts must be >= 1, got {attempts}")
        if timeout_s <= 0 or deadline_s <= 0:
            raise ValueError(f"timeout_s and deadline_s must be > 0 seconds, got {timeout_s}, {deadline_s}")
        root = base_url.rstrip("/")
        if root.endswith("/api/v1"):
            root = root[: -len("/api/v1")]
        self.base_url = root
        self.api_url = f"{root}/api/v1"
        self.timeout_s = timeout_s
        self._attempts = attempts
        self._backoff_s = backoff_s
        self._max_backoff_s = max_backoff_s
        self.max_requests = max_requests
        self.time_budget_s = time_budget_s
        self._deadline = None if time_budget_s is None else time.monotonic() + time_budget_s
        self.deadline_s = deadline_s
        self.max_body_bytes = {**MAX_BODY_BYTES, **(max_body_bytes or {})}
        #: HTTP requests made so far (each retry is one).
        self.requests = 0
        self._http = httpx.Client(
            base_url=self.api_url,
            timeout=httpx.Timeout(timeout_s),
            transport=transport or deadline_transport(),
            headers={"Accept": "application/json", "Accept-Encoding": "identity"},
            follow_redirects=False,
        )

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Close the underlying connection pool."""
        self._http.close()

    def __enter__(self) -> SparkRestClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- transport -------------------------------------------------------------------------

    def get(self, path: str, params: dict[str, Any] | None = None) -> JSON:
        """GET ``<api_url>/<path>`` and decode the JSON body.

        Retries transport errors, 429 and 5xx up to ``attempts`` times in all, within the call's
        deadline. Raises :class:`SparkAnswerRefused` for a body over its endpoint's size or a call past
        its deadline, and :class:`SparkRestError` (with URL, status and a hint) on final failure, on
        any other non-2xx status (a redirect too), or on a body that is not JSON.
        """
        url = f"{self.api_url}/{path.lstrip('/')}"
        request_url = str(httpx.URL(url, params=_clean_params(params)))
        retrying = Retrying(
            stop=stop_after_attempt(self._attempts),
            wait=wait_exponential(multiplier=self._backoff_s, max=self._max_backoff_s),
            retry=retry_if_exception(_is_retryable),
            reraise=False,
        )
        response: httpx.Response | None = None
        body = b""
        at, bound = time.monotonic() + self.deadline_s, "request"
        if self._deadline is not None and self._deadline < at:
            at, bound = self._deadline, "collection"
        try:
            for attempt in retrying:
                with attempt:
                    self._spend(request_url)
                    response, body = self._fetch(path, params, at, bound)
                    if response.status_code in RETRY_STATUSES:
                        raise _RetryableStatus(response, body)
        except AnswerRefused as refused:
            raise SparkAnswerRefused(refused, url=request_url,
                                     attempts=retrying.statistics.get("attempt_number", 1)) from None
        except RetryError as err:
            last = err.last_attempt
            exc = last.exception()
            n = last.attempt_number
            if isinstance(exc, _RetryableStatus):
                raise self._status_error(request_url, exc.response, exc.body, n) from None
            raise SparkRestError(f"GET {request_url} failed after {n} attempt(s): {type(exc).__name__}: {exc}. "
                                 + failure_hint(None), url=request_url, status=None, attempts=n) from exc
        assert response is not None
        n = retrying.statistics.get("attempt_number", 1)
        if not response.is_success:
            raise self._status_error(request_url, response, body, n)
        try:
            return json.loads(body)
        except (ValueError, RecursionError) as exc:  # not JSON, not UTF-8, or nested too deep
            raise SparkRestError(f"GET {request_url} returned HTTP {response.status_code} but the body is not JSON "
                                 f"({body_summary(response, body)}). Check that base_url points at the Spark UI "
                                 "root, not at a proxy or another service.",
                                 url=request_url, status=response.status_code, attempts=n) from exc

    def _fetch(self, path: str, params: dict[str, Any] | None, at: float, bound: str) -> tuple[httpx.Response, bytes]:
        """One GET and its body, bounded (:mod:`sparkclient.collector.answers`) by its endpoint's size and
        the monotonic time ``at`` (the ``bound``'s deadline: "request" or "collection"); a timeout once it
        has passed is :class:`AnswerRefused` (``TOO_SLOW``, not retried)."""
        endpoint = endpoint_of(path)
        try:
            with deadline(at), self._http.stream("GET", path.lstrip("/"), params=_clean_params(params)) as response:
                return response, read_body(response, endpoint=endpoint, limit_bytes=self.max_body_bytes.get(
                    endpoint, MAX_BODY_BYTES["other"]))
        except httpx.TimeoutException:
            if time.monotonic() < at - _CLOCK_SLACK_S:
                raise
            bound_s = self.deadline_s if bound == "request" else self.time_budget_s
            raise AnswerRefused(AnswerRefusal.TOO_SLOW, {"endpoint": endpoint, "bound": bound,
                                                         "deadline_s": bound_s}) from None

    def _spend(self, request_url: str) -> None:
        """Count one request, or raise :class:`RequestBudgetSpent` when the budget allows none."""
        if self.max_requests is not None and self.requests >= self.max_requests:
            raise RequestBudgetSpent(f"GET {request_url} not made: the budget of {self.max_requests} Spark REST "
                                     "requests per collection is spent", url=request_url, status=None, attempts=0)
        if self._deadline is not None and time.monotonic() >= self._deadline:
            raise RequestBudgetSpent(f"GET {request_url} not made: the collection's time budget of "
                                     f"{self.time_budget_s:g} s is spent", url=request_url, status=None, attempts=0)
        self.requests += 1

    def _get_with_path(self, path: str, params: dict[str, Any] | None = None) -> tuple[JSON, str]:
        return self.get(path, params), f"{self.api_url}/{path}"

    @staticmethod
    def _status_error(url: str, response: httpx.Response, body: bytes, attempts: int) -> SparkRestError:
        return SparkRestError(f"GET {url} failed with HTTP {response.status_code} after {attempts} attempt(s) "
                              f"({body_summary(response, body)}). " + failure_hint(response.status_code),
                              url=url, status=response.status_code, attempts=attempts)

    # -- endpoints -------------------------------------------------------------------------

    def applications(self) -> list[dict[str, Any]]:
        """``/applications``: ``[{"id", "name", "attempts": [...]}]``."""
        return _as_list(*self._get_with_path("applications"))

    def jobs(self, app_id: str, status: str | Sequence[str] | None = None) -> list[dict[str, Any]]:
        """``/applications/<app_id>/jobs``, newest first.

        ``status``: one or more of ``running``, ``succeeded``, ``failed``, ``unknown``
        (case-insensitive); ``None`` for all retained jobs. Each job has ``jobId``,
        ``description``, ``jobGroup``, ``stageIds``, ``status``, ``numTasks`` ...
        """
        path = f"applications/{app_id}/jobs"
        return _as_list(*self._get_with_path(path, {"status": _statuses(status)}))

    def stages(self, app_id: str, status: str | Sequence[str] | None = None) -> list[dict[str, Any]]:
        """``/applications/<app_id>/stages`` (one entry per stage attempt, no task details).

        ``status``: one or more of ``active``, ``complete``, ``pending``, ``failed``, ``skipped``.
        The unfiltered list holds every retained stage (up to ``spark.ui.retainedStages``,
        about 3.5 KB each), so prefer ``status="complete"`` when only finished batches matter.
        """
        path = f"applications/{app_id}/stages"
        return _as_list(*self._get_with_path(path, {"status": _statuses(status)}))

    def stage(self, app_id: str, stage_id: int, attempt: int, *, details: bool = False) -> dict[str, Any]:
        """``/applications/<app_id>/stages/<stage_id>/<attempt>``; ``details=True`` adds tasks."""
        path = f"applications/{app_id}/stages/{stage_id}/{attempt}"
        return _as_dict(*self._get_with_path(path, {"details": _bool(details)}))

    def task_summary(self, app_id: str, stage_id: int, attempt: int,
                     quantiles: Sequence[float] = (1.0,)) -> dict[str, Any]:
        """``/applications/<app_id>/stages/<stage_id>/<attempt>/taskSummary?quantiles=...``: the
        distribution of the stage attempt's task metrics at ``quantiles`` (0..1), over its successful
        tasks; parse it with :func:`sparkclient.collector.stages.slowest_task_run_ms`. Raises
        :class:`SparkRestError` (404 for a stage attempt Spark no longer retains)."""
        path = f"applications/{app_id}/stages/{stage_id}/{attempt}/taskSummary"
        return _as_dict(*self._get_with_path(path, {"quantiles": ",".join(f"{q:g}" for q in quantiles)}))

    def sql(
        self,
        app_id: str,
        offset: int = 0,
        length: int = 20,
        details: bool = True,
        *,
        plan_description: bool = False,
    ) -> list[dict[str, Any]]:
        """One page of ``/applications/<app_id>/sql``: executions ``offset .. offset+length-1``
        in execution-id order (the offset counts retained executions, not ids).

        ``details=True`` includes ``nodes`` (with formatted metric strings) and ``edges``;
        ``plan_description`` adds the (large) physical plan text.
        """
        if offset < 0 or length < 1:
            raise ValueError(f"need offset >= 0 and length >= 1, got offset={offset}, length={length}")
        params = {
            "offset": offset,
            "length": length,
            "details": _bool(details),
            "planDescription": _bool(plan_description),
        }
        return _as_list(*self._get_with_path(f"applications/{app_id}/sql", params))

    def iter_sql(
        self, app_id: str, *, start: int = 0, page_size: int = 20, details: bool = True
    ) -> Iterator[dict[str, Any]]:
        """All retained SQL executions from offset ``start`` on, fetched ``page_size`` at a time."""
        offset = start
        while True:
            page = self.sql(app_id, offset, page_size, details)
            yield from page
            if len(page) < page_size:
                return
            offset += len(page)

    def sql_execution(
        self, app_id: str, execution_id: int, details: bool = True, *, plan_description: bool = False
    ) -> dict[str, Any]:
        """``/applications/<app_id>/sql/<execution_id>`` (one execution, see :meth:`sql`)."""
        params = {"details": _bool(details), "planDescription": _bool(plan_description)}
        return _as_dict(*self._get_with_path(f"applications/{app_id}/sql/{execution_id}", params))

    def executors(self, app_id: str) -> list[dict[str, Any]]:
        """``/applications/<app_id>/executors``: active executors (and the driver entry)."""
        return _as_list(*self._get_with_path(f"applications/{app_id}/executors"))

    def allexecutors(self, app_id: str) -> list[dict[str, Any]]:
        """``/applications/<app_id>/allexecutors``: active and removed executors."""
        return _as_list(*self._get_with_path(f"applications/{app_id}/allexecutors"))


def deadline_transport() -> httpx.HTTPTransport:
    """httpx's transport with its sockets on :class:`sparkclient.collector.answers.DeadlineBackend`: the
    client's default, and the inner transport of one that checks addresses first."""
    transport = httpx.HTTPTransport()
    # httpx takes no network backend; its pool (httpcore's ConnectionPool) does, set at construction
    transport._pool._network_backend = DeadlineBackend()  # noqa: SLF001
    return transport


def _clean_params(params: dict[str, Any] | None) -> dict[str, Any]:
    return {key: value for key, value in (params or {}).items() if value is not None}


def _bool(flag: bool) -> str:
    return "true" if flag else "false"


def _statuses(status: str | Sequence[str] | None) -> list[str] | None:
    if status is None:
        return None
    values = [status] if isinstance(status, str) else list(status)
    return [value.lower() for value in values] or None


def _checked(payload: JSON, kind: type, url: str) -> Any:
    """``payload`` when it is a ``kind`` (``answers.shape_problem``), else a SparkRestError naming what it is."""
    problem = shape_problem(payload, kind)
    if problem:
        raise SparkRestError(f"GET {url}: {problem}. Check that base_url points at the Spark UI root.",
                             url=url, status=None, attempts=1)
    return payload


def _as_list(payload: JSON, url: str) -> list[dict[str, Any]]:
    return _checked(payload, list, url)


def _as_dict(payload: JSON, url: str) -> dict[str, Any]:
    return _checked(payload, dict, url)
