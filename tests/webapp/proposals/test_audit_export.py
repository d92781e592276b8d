"""The audit trail's exports (``webapp.proposals.exports``): streamed, complete and in order across
pages, CSV formula injection neutralised."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.http import StreamingHttpResponse

from tests.webapp.factories import make_job, make_user
from webapp.proposals.exports import FORMULA_PREFIXES, neutralise
from webapp.proposals.models import AuditEvent
from webapp.proposals.selectors import iter_audit_rows

pytestmark = pytest.mark.django_db


def _body(response) -> str:
    assert isinstance(response, StreamingHttpResponse)
    return b"".join(response.streaming_content).decode()


@pytest.mark.parametrize("prefix", FORMULA_PREFIXES)
def test_a_csv_cell_starting_a_formula_is_prefixed_with_a_quote(client, prefix):
    job = make_job()
    payload = f"{prefix}HYPERLINK(\"http://x.invalid\",\"click\")"
    AuditEvent.objects.create(job=job, actor_name=payload, action="approved", after={"note": payload})
    client.force_login(make_user("vera", role="viewer"))
    rows = list(csv.DictReader(io.StringIO(_body(client.get(f"/audit/jobs/{job.pk}.csv")), newline="")))
    assert rows[0]["actor"] == "'" + payload
    assert rows[0]["action"] == "approved" and rows[0]["after"].startswith("{")  # safe cells are unchanged
    events = json.loads(_body(client.get(f"/audit/jobs/{job.pk}.json")))["events"]
    assert events[0]["actor"] == payload  # JSON is not a spreadsheet: the value as stored


@pytest.mark.parametrize("value", ["policy:ds2", "system", "a=b", "", 12, None, "'=already"])
def test_other_cells_are_left_as_they_are(value):
    assert neutralise(value) == value


def test_rows_come_in_order_across_pages_even_at_one_instant():
    job = make_job()
    other = make_job(name="other")
    events = AuditEvent.objects.bulk_create(
        [AuditEvent(job=job if i % 3 else other, actor_name=f"a{i}", action="proposed") for i in range(23)])
    AuditEvent.objects.filter(job=job).update(at=events[0].at)  # one instant: the id breaks the ties
    ids = [row["id"] for row in iter_audit_rows(job=job, page=4)]
    assert ids == sorted(AuditEvent.objects.filter(job=job).values_list("pk", flat=True)) and len(ids) == 15


def test_an_unknown_format_is_not_found(client):
    job = make_job()
    client.force_login(make_user("vera", role="viewer"))
    assert client.get(f"/audit/jobs/{job.pk}.xlsx").status_code == 404
