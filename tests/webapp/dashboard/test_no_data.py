"""No figure from no data: a job whose window holds no completed micro-batch (its first batch still
running, the heap already measured) gets no memory recommendation on its page, in the API or on a
person's request, its charts say "no data yet" instead of drawing an empty time axis, and its numbers
are stale since a time (its registration); the first completed batch brings the recommendation and
the points back."""

from __future__ import annotations

import json
import re

import pytest
from django.utils import timezone

from scaling.values.memory import MB
from tests.webapp.factories import HEAP_KNOB, make_job, make_snapshots, make_user
from webapp.jobs.models import MetricSnapshot, VertexSnapshot
from webapp.loop.evaluate import evaluation_run
from webapp.proposals.memory import memory_request

pytestmark = pytest.mark.django_db


def _figure(html: str, element: str):
    return json.loads(re.search(rf'id="{element}" type="application/json">(.*?)</script>', html, re.S).group(1))


def _first_batch_running(*, batches: int):
    """A job with a heap knob, four 15 s windows of a job keeping up, the heap at 102 of 1024 MB in
    each; ``batches`` 0: no micro-batch completed in any (no stages either), else that many in the newest."""
    job = make_job("first-batch", knobs=[HEAP_KNOB], cluster="local@host", metric_window_s=45)
    snapshots = make_snapshots(job, enrich_busy_s=5.0, backlog_step=0, batch_duration_s=1.0, keeping_up=True)
    pks = [s.pk for s in snapshots]
    MetricSnapshot.objects.filter(pk__in=pks).update(gc_share=0.0, heap_peak_bytes=102 * MB,
                                                     heap_max_bytes=1024 * MB, batches=0)
    if batches:
        MetricSnapshot.objects.filter(pk=pks[-1]).update(batches=batches)
        VertexSnapshot.objects.filter(snapshot_id__in=pks[:-1]).delete()
    else:
        VertexSnapshot.objects.filter(snapshot_id__in=pks).delete()
    return job


@pytest.mark.parametrize("batches", [0, 1])
def test_no_recommendation_and_charts_that_say_no_data_yet_before_the_first_batch(client, batches):
    job = _first_batch_running(batches=batches)
    client.force_login(make_user())
    html = client.get(f"/jobs/{job.pk}/").content.decode()
    memory = client.get(f"/api/jobs/{job.pk}/memory/").json()
    rescales = client.get(f"/jobs/{job.pk}/rescales/").content.decode()
    if batches:  # the control: one completed batch is data
        assert memory["withheld"] is None and memory["recommendation"]["recommended_mb"] == 512
        assert 'data-recommended-mb="512"' in html and "(peak 102 MB + 20 %)" in html
        assert 'id="propose-memory"' in html and memory_request(job) is not None
        assert 'id="series-empty"' not in html and _figure(html, "series-figure") is not None
        assert 'id="executors-empty"' not in rescales and _figure(rescales, "executors-figure") is not None
        return
    assert evaluation_run(job=job) is None and not job.proposals.exists()
    assert (memory["recommendation"], memory["sizes"], memory["heap_peak_mb"]) == (None, [], 102.0)
    assert (memory["withheld"]["code"], memory["withheld"]["data"]["cause"]) == ("memory-withheld", "no-batch")
    assert memory_request(job) is None
    assert 'id="memory-withheld" data-code="memory-withheld" data-cause="no-batch"' in html
    assert "no micro-batch of this run completed in the window yet" in html
    assert "data-recommended-mb" not in html and "peak 102 MB" not in html
    assert not re.search(r"from a [a-z-]*\s*peak", html)  # the memory-resize reason's words
    assert 'id="propose-memory"' not in html
    for page, element, figure in ((html, "series-empty", "series-figure"), (html, "dag-empty", "dag-figure"),
                                  (rescales, "executors-empty", "executors-figure")):
        placeholder = re.search(rf'id="{element}">(.*?)</p>', page, re.S)
        assert placeholder and placeholder.group(1).lower().startswith("no data yet"), element
        assert _figure(page, figure) is None  # nothing for Plotly to draw an empty axis with
    live = client.get(f"/jobs/{job.pk}/live/").json()
    assert live["series"] is None and live["dag"] is None
    # no batch ever: the page's numbers are stale since the job was registered, a time
    since = f"stale since {timezone.localtime(job.created_at):%H:%M:%S} (no micro-batch completed)"
    assert since in html and since in live["stale"] and "the start" not in html
