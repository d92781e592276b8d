"""Web app tests build short snapshot histories: no stabilization interval unless a test sets one."""

import pytest


@pytest.fixture(autouse=True)
def _no_stabilization(settings):
    settings.SCALER_STABILIZATION_S = 0
