"""The one finiteness check (``scaling.policy.numbers``) at its edges, and two of its callers."""

import math
from decimal import Decimal
from fractions import Fraction

import pytest

from scaling.policy.numbers import finite_or_none, is_finite_number
from scaling.values.metrics import MetricsError, VertexMetrics
from scaling.values.topology import TopologyError, Vertex

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


@pytest.mark.parametrize("retention_s", [math.inf, math.nan, True, 0, -1, "60"])
def test_a_vertex_refuses_a_retention_that_is_not_a_finite_number_above_0(retention_s):
    with pytest.raises(TopologyError, match=r"vertices\[v\]\.retention_s: must be a finite number > 0"):
        Vertex("v", parallelism=1, retention_s=retention_s)


@pytest.mark.parametrize("field", ["records_in_per_s", "records_out_per_s", "backlog"])
def test_vertex_metrics_refuse_an_infinite_count_or_rate(field):
    values = {"records_in_per_s": 10.0, "records_out_per_s": 10.0, "busy_time_ms_per_s": 500.0, field: math.inf}
    with pytest.raises(MetricsError, match=f"{field}: must be finite, got inf"):
        VertexMetrics(**values)
