"""What a decision answers while Redis is away (``webapp.outage``): the API a JSON 503 with a code
and a message, the dashboard a redirect to the proposal page with that message; neither names the
broker's host, port, URL or the exception. The outage is a broker URL where nothing listens (the
real 60 s outage with a worker is ``tests/webapp/loop/test_faults_redis_outage.py``)."""

from __future__ import annotations

import pytest
import redis
from django.test import RequestFactory

from sparkclient.demo.redisproc import free_port
from tests.conftest import celery_use_broker
from tests.webapp.dashboard_factories import make_succeeded
from tests.webapp.factories import make_job, make_pending, make_user
from webapp.celery import app as celery_app
from webapp.outage import RedisUnavailableMiddleware
from webapp.proposals.models import AuditEvent, Proposal

pytestmark = pytest.mark.django_db

#: Words that would give the broker's address or the exception away.
INTERNALS = ("127.0.0.1", "redis://", "secret", "Error", "Connection refused", "ConnectionError", "111")


@pytest.fixture
def dead_broker():
    """Celery's broker is a Redis URL on a port where nothing listens; returns that port."""
    port = free_port()
    previous = celery_app.conf.broker_url, celery_app.conf.result_backend
    celery_use_broker(f"redis://:secret@127.0.0.1:{port}/0")
    yield port
    celery_use_broker(*previous)


def _assert_no_internals(text: str, port: int) -> None:
    assert str(port) not in text and not [word for word in INTERNALS if word in text], text


@pytest.mark.parametrize("decision", ["approve", "rollback"])
def test_the_api_answers_a_json_503_with_a_code_and_no_internals(client, dead_broker, decision):
    proposal = make_pending("outage") if decision == "approve" else make_succeeded(make_job("done"))
    client.force_login(make_user())
    events = AuditEvent.objects.count()
    response = client.post(f"/api/proposals/{proposal.pk}/{decision}/", {}, content_type="application/json")
    assert response.status_code == 503 and response["Content-Type"] == "application/json"
    assert response["Retry-After"] == "30"
    body = response.json()
    assert set(body) == {"code", "detail"} and body["code"] == "redis_unavailable"
    assert "try again when Redis is back" in body["detail"] and f"proposal {proposal.pk}" in body["detail"]
    _assert_no_internals(response.content.decode(), dead_broker)
    assert Proposal.objects.get(pk=proposal.pk).status == proposal.status
    assert Proposal.objects.count() == 1 and AuditEvent.objects.count() == events


@pytest.mark.parametrize(("decision", "url", "form"), [
    ("approve", "/proposals/{pk}/decide/", {"action": "approve"}),
    ("rollback", "/proposals/{pk}/rollback/", {"reason": "latency"}),
])
def test_the_dashboard_returns_to_the_proposal_page_with_the_message(client, dead_broker, decision, url, form):
    proposal = make_pending("outage") if decision == "approve" else make_succeeded(make_job("done"))
    client.force_login(make_user())
    events = AuditEvent.objects.count()
    response = client.post(url.format(pk=proposal.pk), form)
    assert response.status_code == 302 and response["Location"] == f"/proposals/{proposal.pk}/"
    page = client.get(response["Location"])
    assert page.status_code == 200 and page["Content-Type"].startswith("text/html")
    [message] = [str(m) for m in page.context["messages"]]
    assert "Redis, the task broker, is unreachable" in message and "nothing was changed" in message
    _assert_no_internals(message, dead_broker)
    assert Proposal.objects.get(pk=proposal.pk).status == proposal.status
    assert Proposal.objects.count() == 1 and AuditEvent.objects.count() == events


@pytest.mark.parametrize("path", ["/api/jobs/", "/jobs/1/"])
def test_any_view_that_meets_a_redis_error_answers_503_without_its_text(path):
    error = redis.exceptions.ConnectionError("Error 111 connecting to 10.9.8.7:6380. Connection refused.")
    middleware = RedisUnavailableMiddleware(lambda request: None)
    response = middleware.process_exception(RequestFactory().get(path), error)
    assert response.status_code == 503
    text = response.content.decode()
    assert "10.9.8.7" not in text and "6380" not in text and "Connection refused" not in text
    assert f"GET {path} was not carried out" in text
    assert middleware.process_exception(RequestFactory().get(path), ValueError("x")) is None
