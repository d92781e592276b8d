"""Migration ``proposals.0014_prediction_infinity_as_null``: a frozen prediction's infinite stage rates,
stored ``"inf"`` before, become null in the proposal's prediction and its earlier revisions'; finite rates,
other fields and a proposal with no infinity are left as they were."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps

from tests.webapp.factories import make_job
from webapp.proposals.models import Proposal

pytestmark = pytest.mark.django_db

migration = importlib.import_module("webapp.proposals.migrations.0014_prediction_infinity_as_null")


def prediction(*rates) -> dict:
    """A prediction as stored before, one stage per ``(true, target, catch-up)`` rates."""
    return {"cores_new": 2, "downtime_source": "configured", "inputs": {"load": 1.5, "vertices": [
        {"vertex_id": f"v{i}", "current": 1, "proposed": 2, "true_processing_rate": true,
         "target_data_rate": target, "catch_up_data_rate": catch_up} for i, (true, target, catch_up) in
        enumerate(rates)]}}


def test_infinite_rates_become_null_and_the_rest_stays():
    job = make_job()
    old = Proposal.objects.create(job=job, prediction=prediction(("inf", 500.0, 0.0), (1000.0, 500.0, "-inf")),
                                  revisions=[{"revision": 1, "prediction": prediction(("inf", 1.0, 2.0))},
                                             {"revision": 2, "reasons": []}])
    finite = Proposal.objects.create(job=job, prediction=prediction((1000.0, 500.0, 0.0)),
                                     revisions=[{"revision": 1, "prediction": prediction((1.0, 2.0, 3.0))}])
    migration.predictions_null_infinity(apps, None)
    old.refresh_from_db()
    assert old.prediction == prediction((None, 500.0, 0.0), (1000.0, 500.0, None))
    assert old.revisions == [{"revision": 1, "prediction": prediction((None, 1.0, 2.0))},
                             {"revision": 2, "reasons": []}]
    before = (finite.prediction, finite.revisions)
    finite.refresh_from_db()
    assert (finite.prediction, finite.revisions) == before
