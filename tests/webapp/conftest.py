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
    monkeypatch.setattr("webapp.proposals.tasks.proposal_execute.delay", lambda *a: sent.append(a))
    monkeypatch.setattr("webapp.proposals.tasks.proposal_execute.apply_async",
                        lambda args, countdown=0: sent.append((*args, countdown)))
    return sent
