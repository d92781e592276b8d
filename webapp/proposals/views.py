"""Audit trail export per job, as CSV or JSON (login required; any role may read it), streamed."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, StreamingHttpResponse
from django.shortcuts import get_object_or_404

from webapp.jobs.models import Job
from webapp.proposals.exports import audit_export_chunks

#: The content type of each export format.
EXPORT_TYPES = {"csv": "text/csv; charset=utf-8", "json": "application/json"}


@login_required
def audit_export(request: HttpRequest, pk: int, fmt: str) -> StreamingHttpResponse:
    """``/audit/jobs/<pk>.csv`` or ``.json``: every audit event of the job, oldest first, streamed page
    by page and ending with the row count, which a cut stream lacks (``webapp.proposals.exports``)."""
    if fmt not in EXPORT_TYPES:
        raise Http404("export as .csv or .json")
    job = get_object_or_404(Job, pk=pk)
    response = StreamingHttpResponse(audit_export_chunks(job=job, fmt=fmt), content_type=EXPORT_TYPES[fmt])
    response["Content-Disposition"] = f'attachment; filename="audit-{job.name}.{fmt}"'
    return response
