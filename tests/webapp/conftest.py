"""Web app tests build short snapshot histories: no stabilization interval unless a test sets one."""

import pytest
from rest_framework.authtoken.models import Token

from tests.webapp.factories import make_user


@pytest.fixture(autouse=True)
def _no_stabilization(settings):
    settings.SCALER_STABILIZATION_S = 0


@pytest.fixture
def real_stabilization(settings):
    """The web app's default stabilization interval, 30 s (``pytest.mark.usefixtures`` of a module)."""
    settings.SCALER_STABILIZATION_S = 30.0


@pytest.fixture
def operator(client):
    """An operator, signed in on ``client``."""
    user = make_user("op")
    client.force_login(user)
    return user


@pytest.fixture
def admin_api(client):
    """``client`` with an admin's API token."""
    token = Token.objects.create(user=make_user("api-admin", role="admin"))
    client.defaults["HTTP_AUTHORIZATION"] = f"Token {token.key}"
    return client


@pytest.fixture
def enqueued(monkeypatch):
    """Executions the services enqueue, recorded instead of sent: ``(proposal id,)`` or
    ``(proposal id, attempt, countdown)``."""
    sent = []
    monkeypatch.setattr("webapp.proposals.dispatch.send", lambda proposal_id, attempt, countdown_s: sent.append(
        (proposal_id,) if attempt == 1 and countdown_s <= 0 else (proposal_id, attempt, countdown_s)))
    return sent


@pytest.fixture
def no_enqueue(monkeypatch):
    """Record the proposal ids of enqueued executions instead of sending them to a broker."""
    sent = []
    monkeypatch.setattr("webapp.proposals.dispatch.send", lambda pk, attempt, countdown_s: sent.append(pk))
    return sent
