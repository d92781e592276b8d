"""The Spark REST client's request budget: it counts every HTTP request (retries included) and
makes none past ``max_requests`` or ``time_budget_s`` (``RequestBudgetSpent``, not retried)."""

from __future__ import annotations

import httpx
import pytest

from sparkclient.collector.rest import RequestBudgetSpent, SparkRestClient, SparkRestError


def _client(statuses: list[int], **budget) -> tuple[SparkRestClient, list[str]]:
    """A client whose server answers ``statuses`` in turn (then 200), recording the paths asked."""
    asked: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        asked.append(request.url.path)
        status = statuses.pop(0) if statuses else 200
        return httpx.Response(status, json=[] if status == 200 else {"message": "busy"})

    return SparkRestClient("http://ui:4040", backoff_s=0, transport=httpx.MockTransport(handler), **budget), asked


def test_every_request_is_counted_retries_included():
    client, asked = _client([503, 503])
    assert client.jobs("app") == [] and client.requests == 3 == len(asked)
    client.stages("app")
    assert client.requests == 4 == len(asked)


def test_no_request_is_made_past_the_budget_and_the_error_says_why():
    client, asked = _client([503], max_requests=2)
    client.jobs("app")  # a 503 and its retry: 2 requests
    with pytest.raises(RequestBudgetSpent, match="budget of 2 Spark REST requests per collection is spent") as err:
        client.stages("app")
    assert isinstance(err.value, SparkRestError) and err.value.attempts == 0
    assert client.requests == 2 == len(asked)


def test_a_retry_stops_at_the_budget():
    client, asked = _client([503, 503, 503], max_requests=2)
    with pytest.raises(RequestBudgetSpent):
        client.jobs("app")
    assert client.requests == 2 == len(asked)


def test_no_request_starts_once_the_time_budget_is_spent():
    client, asked = _client([], time_budget_s=0)
    with pytest.raises(RequestBudgetSpent, match="time budget of 0 s is spent"):
        client.jobs("app")
    assert client.requests == 0 and asked == []
