"""Page-number pagination with a validated ``page`` (its own module: DRF imports the pagination class
while its generic views are being defined, so this must not import them)."""

from __future__ import annotations

from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import PageNumberPagination

#: The largest object id the URLs route (18 digits, ``views.ID_PATTERN``) and the largest page number.
MAX_PATH_ID = 10**18 - 1


class StrictPageNumberPagination(PageNumberPagination):
    """Page-number pagination whose ``page`` is an integer >= 1: a malformed one (``page=x``,
    ``page=0``, ``page=``) is a 400 naming the parameter, a page past the last one a 404."""

    last_page_strings = ()

    def get_page_number(self, request, paginator) -> int:
        raw = request.query_params.get(self.page_query_param)
        if raw is None:
            return 1
        field = serializers.IntegerField(min_value=1, max_value=MAX_PATH_ID)
        try:
            return field.run_validation(raw)
        except ValidationError as exc:
            raise ValidationError({self.page_query_param: exc.detail}) from exc

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_query_param:
                parameter["schema"] = {"type": "integer", "minimum": 1, "maximum": MAX_PATH_ID}
        return parameters
