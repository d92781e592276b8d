"""The one finiteness check (``scaling.values.numbers``) at its edges."""

import math
from decimal import Decimal
from fractions import Fraction

import pytest

from scaling.values.numbers import finite_or_none, is_finite_number

EDGES = [
    (True, False),
    (False, False),
    (0, True),
    (-3, True),
    (0.0, True),
    (-0.0, True),
    (1.5, True),
    (5e-324, True),
    (1.7976931348623157e308, True),
    (math.inf, False),
    (-math.inf, False),
    (math.nan, False),
    ("1", False),
    ("nan", False),
    (None, False),
    (Decimal("1"), False),
    (Fraction(1, 2), False),
    (2**63, True),
    (2**1023, True),
    (10**400, False),
    (-(10**400), False),
]


@pytest.mark.parametrize(("value", "finite"), EDGES, ids=[repr(v)[:20] for v, _ in EDGES])
def test_is_finite_number(value, finite):
    assert is_finite_number(value) is finite


@pytest.mark.parametrize(("value", "finite"), EDGES, ids=[repr(v)[:20] for v, _ in EDGES])
def test_finite_or_none_returns_the_float_or_none(value, finite):
    result = finite_or_none(value)
    if finite:
        assert type(result) is float and result == value
    else:
        assert result is None
