"""What the OpenAPI schema promises, kept true to what the API answers.

- Every operation documents its error answers: 401/403 (not signed in, no permission), 404 (no such
  object, or a page past the last one) and, where a query filter, a page number or a body is
  validated, 400 with DRF's validation body.
- Object ids in paths are integers (the router only routes digits: see ``views.ID_PATTERN``); any
  404 under ``/api/`` is JSON (:class:`ApiNotFoundMiddleware`).
- Lists take ``page`` as an integer >= 1; anything else is a 400 (``pagination.StrictPageNumberPagination``).
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.defaults import page_not_found
from drf_spectacular.openapi import AutoSchema as SpectacularAutoSchema
from drf_spectacular.utils import OpenApiResponse

from webapp.api.pagination import MAX_PATH_ID
from webapp.api.serializers import DetailSerializer

#: DRF's validation error body: each field (or ``non_field_errors``, or ``detail``) with its messages.
VALIDATION_ERROR = {
    "type": "object",
    "description": 'Validation errors: `{"field": ["message", ...]}` per bad field, or `{"detail": "..."}`.',
    "additionalProperties": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
}


class AutoSchema(SpectacularAutoSchema):
    """drf-spectacular's schema with the error answers every API view can give, and integer ids."""

    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        errors = {
            "401": OpenApiResponse(DetailSerializer, "No valid token or session."),
            "403": OpenApiResponse(DetailSerializer, "Signed in without the permission this needs."),
            "404": OpenApiResponse(DetailSerializer, "No such object (or a page past the last one)."),
        }
        if self._is_list_view() or self.method in ("POST", "PUT", "PATCH"):
            errors["400"] = OpenApiResponse(VALIDATION_ERROR, "A malformed filter, page number or body.")
        for code, body in errors.items():
            if code not in responses:
                responses[code] = self._get_response_for_code(body, code, direction=direction)
        return dict(sorted(responses.items()))

    def _resolve_path_parameters(self, variables):
        parameters = super()._resolve_path_parameters(variables)
        for parameter in parameters:
            if parameter["schema"].get("pattern") == "^[0-9]{1,18}$":
                parameter["schema"] = {"type": "integer", "minimum": 0, "maximum": MAX_PATH_ID}
        return parameters


class ApiNotFoundMiddleware:
    """A 404 under ``/api/`` that is not already JSON answers ``{"detail": "Not found."}``, as the schema
    documents: a path no route matches (an id of 19 digits or more, past ``views.ID_PATTERN``) gets
    Django's 404 page, which is HTML with DEBUG on (``handler404`` below is not used then)."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.status_code == 404 and request.path.startswith("/api/") \
                and not response.get("Content-Type", "").startswith("application/json"):
            return JsonResponse({"detail": "Not found."}, status=404)
        return response


def not_found(request: HttpRequest, exception: Exception | None = None):
    """``handler404``: a JSON ``{"detail": ...}`` under ``/api/`` (what the schema documents), Django's
    page elsewhere."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Not found."}, status=404)
    return page_not_found(request, exception)
