"""The expected downtime a proposal shows comes from the job's own measured rescales of the same
kind: a cores change from the runner's cores changes (driver restart, warm handover, executors in
place), a partition change from in-process restarts only (the demo showed 30.8 s, the
median of two handovers, for a state repartition that took 4.5 s in process)."""

from __future__ import annotations

import pytest

from tests.webapp.dashboard_factories import make_succeeded
from tests.webapp.factories import make_job
from webapp.proposals.predictions import measured_downtimes_s

pytestmark = pytest.mark.django_db


def test_each_kind_of_change_is_predicted_from_the_rescales_of_its_own_kind():
    job = make_job()
    make_succeeded(job, downtime_s=48.9, path="driver-handover")
    make_succeeded(job, downtime_s=12.7, path="driver-handover")
    make_succeeded(job, downtime_s=20.0, path="driver-restart")
    make_succeeded(job, downtime_s=0.0, path="in-place")
    make_succeeded(job, downtime_s=4.5, path="in-process")
    assert sorted(measured_downtimes_s(job=job, restart=True)) == [0.0, 12.7, 20.0, 48.9]
    assert measured_downtimes_s(job=job, restart=False) == [4.5]
