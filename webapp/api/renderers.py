"""The API's JSON renderer: every number is a number or null. JSON has no infinity or NaN, and DRF's
strict renderer fails on one, so a float that is not finite (a stored measurement, say) is answered as
null; the model's own JSON spells infinity ``"inf"``, which the serializers turn to null
(``infinity_as_null``)."""

from __future__ import annotations

import math

from rest_framework.renderers import JSONRenderer


def finite_or_null(value: object) -> object:
    """``value`` (serializer output: dicts, lists and scalars) with each non-finite float as None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite_or_null(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_null(item) for item in value]
    return value


class FiniteJSONRenderer(JSONRenderer):
    """DRF's JSON renderer over :func:`finite_or_null` of the data."""

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return super().render(finite_or_null(data), accepted_media_type, renderer_context)
