"""Redis outages seen from a request: a clear 503, and nothing changed.

A decision (approve, roll back) is written to the database and its execution is enqueued on the
Celery broker (Redis) once the transaction commits. :func:`broker_check` runs first, so during an
outage the request is refused with :class:`ServiceUnavailable` before anything is written. Should
Redis go away between the check and the enqueue, the decision stands and the reconcile beat
enqueues it again once Redis is back (``workflow_reconcile``: "approved but not started").

:class:`RedisUnavailableMiddleware` turns :class:`ServiceUnavailable` and Redis connection errors
raised by any view into a 503: under ``/api/`` ``{"code": "redis_unavailable", "detail": message}``,
plain text elsewhere (the dashboard's decision views redirect with the message instead). What the
user sees names no host, port, URL or exception: those go to the log only.
"""

from __future__ import annotations

import logging
from enum import StrEnum
from functools import lru_cache

import kombu.exceptions
import redis
from django.http import HttpRequest, HttpResponse, JsonResponse

from webapp.celery import app

logger = logging.getLogger(__name__)

#: The exceptions that mean "Redis is unreachable" (redis-py directly, or kombu publishing a task).
REDIS_ERRORS = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, kombu.exceptions.OperationalError)
#: Seconds a request waits for Redis to answer before it is refused.
CHECK_TIMEOUT_S = 2.0


class OutageCode(StrEnum):
    """The ``code`` of an API 503."""

    REDIS_UNAVAILABLE = "redis_unavailable"


class ServiceUnavailable(RuntimeError):
    """Redis (the task broker and the runners' control channel) does not answer; nothing was changed.

    ``str()`` is the message for the user (no address or exception text); ``cause`` is kept for the log.
    """

    code = OutageCode.REDIS_UNAVAILABLE

    def __init__(self, what: str = "", cause: BaseException | None = None) -> None:
        super().__init__(f"Redis, the task broker, is unreachable: {what or 'the request'} was not carried out "
                         f"and nothing was changed; try again when Redis is back.")
        self.cause = cause


def as_unavailable(exception: BaseException, what: str) -> ServiceUnavailable | None:
    """``exception`` as a :class:`ServiceUnavailable` about ``what``, when it is one or a Redis
    connection error (:data:`REDIS_ERRORS`); None otherwise."""
    if isinstance(exception, ServiceUnavailable):
        return exception
    if isinstance(exception, REDIS_ERRORS):
        return ServiceUnavailable(what, exception)
    return None


@lru_cache(maxsize=4)
def _ping_client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_connect_timeout=CHECK_TIMEOUT_S, socket_timeout=CHECK_TIMEOUT_S)


def broker_check(what: str) -> None:
    """Ping the Celery broker when it is Redis (other brokers, e.g. the tests' in-memory one, pass).

    Raises:
        ServiceUnavailable: Redis did not answer within ``CHECK_TIMEOUT_S`` seconds.
    """
    url = str(app.conf.broker_url or "")
    if not url.startswith(("redis://", "rediss://", "unix://")):
        return
    try:
        _ping_client(url).ping()
    except REDIS_ERRORS as exc:
        raise ServiceUnavailable(what, exc) from exc


class RedisUnavailableMiddleware:
    """A view that raised :class:`ServiceUnavailable` or a Redis connection error answers 503:
    ``{"code", "detail"}`` under ``/api/``, plain text elsewhere; the cause goes to the log."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        unavailable = as_unavailable(exception, f"{request.method} {request.path}")
        if unavailable is None:
            return None
        logger.warning("503 for %s %s: %s (cause: %r)", request.method, request.path, unavailable,
                       unavailable.cause)
        message = str(unavailable)
        if request.path.startswith("/api/"):
            response = JsonResponse({"code": unavailable.code.value, "detail": message}, status=503)
        else:
            response = HttpResponse(message, status=503, content_type="text/plain; charset=utf-8")
        response["Retry-After"] = "30"
        return response
