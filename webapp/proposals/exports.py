"""The audit trail's exports, streamed: CSV and JSON written from
:func:`webapp.proposals.selectors.iter_audit_rows`, one chunk per :data:`CHUNK_ROWS` rows (one page of
events in memory at a time, whatever the length of the trail).

Each export ends with its row count, so a stream cut short (a killed worker, a dropped connection, which
an HTTP/1.0 client or a buffering proxy sees as an ordinary end) never looks complete: the CSV's last
record is ``#count,<rows>`` (:data:`CSV_TRAILER`), the JSON object's last member ``"count": <rows>``.

CSV cells are neutralised against spreadsheet formula injection (OWASP "CSV Injection"): a text cell
starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return gets a leading ``'``, so a spreadsheet
shows it as text instead of evaluating it."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator

from django.core.serializers.json import DjangoJSONEncoder

from webapp.jobs.models import Job
from webapp.proposals.codes import Reason
from webapp.proposals.reason_text import reason_text
from webapp.proposals.selectors import AUDIT_FIELDS, iter_audit_rows

#: Rows per chunk of the streamed exports: one write to the client per chunk.
CHUNK_ROWS = 500
#: The first cell of the CSV export's last record; its second cell is the number of rows before it.
CSV_TRAILER = "#count"
#: First characters that make a spreadsheet read a cell as a formula (OWASP).
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def neutralise(value: object) -> object:
    """``value`` with a leading ``'`` when it is text starting with one of :data:`FORMULA_PREFIXES`;
    anything else unchanged."""
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES):
        return "'" + value
    return value


class _Line:
    """A file-like object whose ``write`` returns what it was given (csv.writer writes one line)."""

    def write(self, text: str) -> str:
        return text


def csv_cells(row: dict) -> list[object]:
    """An audit row (:func:`~webapp.proposals.selectors.audit_row`) as the cells of :data:`AUDIT_FIELDS`:
    ``before``, ``after`` and ``reason_data`` as sorted JSON, ``reason`` its text, every text neutralised."""
    reason = Reason.from_json(row["reason"])
    flat = {**row, "before": json.dumps(row["before"], sort_keys=True),
            "after": json.dumps(row["after"], sort_keys=True), "reason": reason_text(reason),
            "reason_code": reason.code if reason else "",
            "reason_data": json.dumps(reason.data if reason else {}, sort_keys=True)}
    return [neutralise(flat[field]) for field in AUDIT_FIELDS]


def _chunks(pieces: Iterable[str], size: int = CHUNK_ROWS) -> Iterator[str]:
    """``pieces`` joined ``size`` at a time (the last chunk may be shorter)."""
    batch: list[str] = []
    for piece in pieces:
        batch.append(piece)
        if len(batch) == size:
            yield "".join(batch)
            batch = []
    if batch:
        yield "".join(batch)


def csv_lines(rows: Iterable[dict]) -> Iterator[str]:
    """The CSV export of audit ``rows``, one line each: the header, one line per row, then the trailer
    ``#count,<rows>``."""
    writer = csv.writer(_Line())
    yield writer.writerow(AUDIT_FIELDS)
    count = 0
    for row in rows:
        yield writer.writerow(csv_cells(row))
        count += 1
    yield writer.writerow([CSV_TRAILER, count])


def json_pieces(job_name: str, rows: Iterable[dict]) -> Iterator[str]:
    """The JSON export, ``{"job": <name>, "events": [<row>, ...], "count": <rows>}``, one piece per row."""
    yield '{"job": ' + json.dumps(job_name) + ', "events": ['
    count = 0
    for row in rows:
        yield (", " if count else "") + json.dumps(row, cls=DjangoJSONEncoder)
        count += 1
    yield f'], "count": {count}}}'


def audit_export_chunks(*, job: Job, fmt: str) -> Iterator[str]:
    """The chunks of ``job``'s audit export as ``fmt`` (``"csv"`` or ``"json"``; ValueError otherwise), each
    of :data:`CHUNK_ROWS` rows."""
    if fmt == "csv":
        return _chunks(csv_lines(iter_audit_rows(job=job)))
    if fmt == "json":
        return _chunks(json_pieces(job.name, iter_audit_rows(job=job)))
    raise ValueError(f"no audit export as {fmt!r}")
