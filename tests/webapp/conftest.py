"""Web app tests build short snapshot histories: no stabilization interval unless a test sets one."""

import pytest


@pytest.fixture(autouse=True)
def _no_stabilization(settings):
    settings.SCALER_STABILIZATION_S = 0


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
