"""Request body parsers of the API: DRF's, with multipart bodies checked for their structure first.

Django's multipart parser is lenient: a body that is not form data at all (``--B\\r\\nFalse--B--``, a
JSON value wrapped in boundaries) parses as an empty form, so an approve or a rollback without
required fields would be carried out on a body that says nothing. :class:`StrictMultiPartParser`
refuses such a body with a 400 instead (RFC 2046 §5.1.1 delimiters, RFC 7578 form-data parts).
"""

from __future__ import annotations

import io

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import MultiPartParser


def multipart_problem(body: bytes, boundary: bytes) -> str | None:
    """What is wrong with multipart ``body`` (delimited by ``boundary``), or None when it is a list of
    form-data parts: each part opens with a delimiter line and headers naming its
    ``Content-Disposition``, and the body ends with the close delimiter (then at most a line break)."""
    delimiter, close = b"--" + boundary, b"--" + boundary + b"--"
    body = body.rstrip(b"\r\n")
    if body == close:
        return None  # an empty form
    if not body.startswith(delimiter + b"\r\n"):
        return "it does not start with its boundary"
    if not body.endswith(b"\r\n" + close):
        return "it does not end with its closing boundary on a line of its own"
    inner = body[len(delimiter) + 2:-len(close) - 2]
    for part in inner.split(b"\r\n" + delimiter + b"\r\n"):
        headers, separator, _value = part.partition(b"\r\n\r\n")
        if not separator or b"content-disposition:" not in headers.lower():
            return "a part has no Content-Disposition header"
    return None


class StrictMultiPartParser(MultiPartParser):
    """DRF's ``multipart/form-data`` parser that first refuses a body that is not form data (a 400)."""

    def parse(self, stream, media_type=None, parser_context=None):
        """Check the body's structure (:func:`multipart_problem`), then parse it as DRF does.

        Raises:
            ParseError: no boundary, a body over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` bytes, or a body that
                is not a list of form-data parts.
        """
        boundary = _boundary(media_type or "")
        if not boundary:
            raise ParseError("Multipart body without a boundary in its Content-Type.")
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        body = stream.read() if limit is None else stream.read(limit + 1)
        if limit is not None and len(body) > limit:
            raise ParseError(f"Multipart body over {limit} bytes.")
        if problem := multipart_problem(body, boundary):
            raise ParseError(f"Malformed multipart body: {problem}. Send form-data fields, or JSON.")
        return super().parse(io.BytesIO(body), media_type, parser_context)


def _boundary(media_type: str) -> bytes:
    for parameter in media_type.split(";")[1:]:
        name, _, value = parameter.strip().partition("=")
        if name.lower() == "boundary":
            return value.strip('"').encode("latin-1", errors="replace")
    return b""
