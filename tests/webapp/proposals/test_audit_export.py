"""The audit trail's exports (``webapp.proposals.exports``): streamed, complete and in order across
pages, ending with their row count (which a stream cut anywhere before it lacks), CSV formula injection
neutralised."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.http import StreamingHttpResponse

from tests.webapp.factories import make_audit_trail, make_job, make_user, read_audit_export
from webapp.proposals.exports import CHUNK_ROWS, CSV_TRAILER, FORMULA_PREFIXES, audit_export_chunks, neutralise
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


@pytest.mark.parametrize("events", [0, 1, CHUNK_ROWS - 2, 2 * CHUNK_ROWS + 7])
@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_an_export_ends_with_the_count_of_its_rows(client, fmt, events):
    job = make_job()
    make_audit_trail(job, events)
    make_audit_trail(make_job(name="other"), 3)
    client.force_login(make_user("vera", role="viewer"))
    rows, count = read_audit_export(_body(client.get(f"/audit/jobs/{job.pk}.{fmt}")), fmt)
    assert count == events and len(rows) == events
    assert [int(row["id"]) for row in rows] == sorted(AuditEvent.objects.filter(job=job).values_list("pk", flat=True))


def test_the_csv_trailer_is_one_record_after_the_rows():
    job = make_job()
    make_audit_trail(job, 2)
    lines = "".join(audit_export_chunks(job=job, fmt="csv")).splitlines()
    assert len(lines) == 4 and lines[-1] == f"{CSV_TRAILER},2"
    assert json.loads("".join(audit_export_chunks(job=job, fmt="json")))["count"] == 2


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_a_stream_cut_before_its_end_lacks_the_count(fmt):
    job = make_job()
    events = 3 * CHUNK_ROWS + 11
    make_audit_trail(job, events)
    chunks = list(audit_export_chunks(job=job, fmt=fmt))
    assert len(chunks) == 4  # CHUNK_ROWS pieces a chunk: the head, 1,511 rows, the end
    whole = "".join(chunks)
    assert read_audit_export(whole, fmt)[1] == events
    trailer_at = whole.rindex(CSV_TRAILER if fmt == "csv" else '"count"')
    cuts = [len("".join(chunks[:k])) for k in range(1, len(chunks))]  # after a chunk
    # inside a chunk, and inside the trailer (its count without the last digit)
    cuts += [len(whole) // 3, trailer_at, trailer_at + len(CSV_TRAILER) + 2, len(whole.rstrip("\r\n}")) - 1]
    for cut in cuts:
        rows, count = read_audit_export(whole[:cut], fmt)
        assert count is None or count != len(rows), cut
