"""Numbers as the model rounds and checks them: Flink's rounding, the saturating ceiling and the one
finiteness check."""

from __future__ import annotations

import math

INF = math.inf

CEIL_MAX = 2**31 - 1
"""``ceil_exact`` saturates here, as Flink caps a parallelism at ``Integer.MAX_VALUE``."""


def java_round(value: float) -> float:
    """``Math.round`` as Flink uses it (half up), returned as a float; infinities pass through."""
    if math.isinf(value) or math.isnan(value):
        return value
    return float(math.floor(value + 0.5))


def ceil_exact(value: float) -> int:
    """``ceil`` that ignores floating-point noise below 1e-9 (``10.000000000000002`` → 10), saturating
    at ``CEIL_MAX`` (infinity included, as Flink's ``(int) Math.min(Math.ceil(x), Integer.MAX_VALUE)``);
    NaN gives 0."""
    if math.isnan(value):
        return 0
    if value >= CEIL_MAX:
        return CEIL_MAX
    return math.ceil(round(value, 9))


def is_finite_number(value: object) -> bool:
    """Whether ``value`` is an ``int`` or ``float`` (not a ``bool``) that is neither infinite nor NaN
    and fits a float (an ``int`` beyond ~1.8e308 does not)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def finite_or_none(value: object) -> float | None:
    """``value`` as a float when :func:`is_finite_number`, else None."""
    return float(value) if is_finite_number(value) else None
