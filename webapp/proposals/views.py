"""Audit trail export per job, as CSV or JSON (login required; any role may read it)."""

from __future__ import annotations

import csv
import json

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404

from webapp.jobs.models import Job
from webapp.proposals.selectors import AUDIT_FIELDS, audit_rows


@login_required
def audit_export(request: HttpRequest, pk: int, fmt: str) -> HttpResponse:
    """``/audit/jobs/<pk>.csv`` or ``.json``: every audit event of the job, oldest first."""
    job = get_object_or_404(Job, pk=pk)
    rows = audit_rows(job=job)
    filename = f"audit-{job.name}.{fmt}"
    if fmt == "json":
        response = JsonResponse({"job": job.name, "events": rows})
    elif fmt == "csv":
        response = HttpResponse(content_type="text/csv; charset=utf-8")
        writer = csv.DictWriter(response, fieldnames=AUDIT_FIELDS)
        writer.writeheader()
        for row in rows:
            reason = row["reason"] or {}
            writer.writerow({**row, "before": json.dumps(row["before"], sort_keys=True),
                             "after": json.dumps(row["after"], sort_keys=True), "reason": reason.get("text", ""),
                             "reason_code": reason.get("code", ""),
                             "reason_data": json.dumps(reason.get("data", {}), sort_keys=True)})
    else:
        raise Http404("export as .csv or .json")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
