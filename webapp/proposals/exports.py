"""The audit trail's exports, streamed: CSV and JSON written row by row from
:func:`webapp.proposals.selectors.iter_audit_rows` (one page of events in memory at a time, whatever the
length of the trail).

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


def csv_lines(rows: Iterable[dict]) -> Iterator[str]:
    """The CSV export of audit ``rows``: the header line, then one line per row."""
    writer = csv.writer(_Line())
    yield writer.writerow(AUDIT_FIELDS)
    for row in rows:
        yield writer.writerow(csv_cells(row))


def json_chunks(job_name: str, rows: Iterable[dict]) -> Iterator[str]:
    """The JSON export, ``{"job": <name>, "events": [<row>, ...]}``, one chunk per row."""
    yield '{"job": ' + json.dumps(job_name) + ', "events": ['
    separator = ""
    for row in rows:
        yield separator + json.dumps(row, cls=DjangoJSONEncoder)
        separator = ", "
    yield "]}"


def audit_export_chunks(*, job: Job, fmt: str) -> Iterator[str]:
    """The chunks of ``job``'s audit export as ``fmt`` (``"csv"`` or ``"json"``; ValueError otherwise)."""
    if fmt == "csv":
        return csv_lines(iter_audit_rows(job=job))
    if fmt == "json":
        return json_chunks(job.name, iter_audit_rows(job=job))
    raise ValueError(f"no audit export as {fmt!r}")
