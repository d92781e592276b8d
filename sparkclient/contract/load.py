"""The demo load's control over Redis: the rate, in events per second, at which the demo event
generator (``sparkclient.demo.generator``) writes to a topic (key :func:`sparkclient.contract.keys.gen_rate`).

The dashboard's and ``manage.py demo_load``'s side sets it (:func:`set_rate`) and shows it
(:func:`get_rate`); the generator reads it again every ``RATE_POLL_S`` seconds; 0 pauses it.
"""

from __future__ import annotations

import logging
import math

import redis

from sparkclient.contract import keys

log = logging.getLogger(__name__)

__all__ = ["get_rate", "set_rate"]


def set_rate(client: redis.Redis, topic: str, rate: float) -> None:
    """Set the generator rate of ``topic`` in events per second (0 pauses it).

    Raises:
        ValueError: ``rate`` is negative, NaN or infinite.
    """
    if not math.isfinite(rate) or rate < 0:
        raise ValueError(f"rate must be a finite number of events/s >= 0, got {rate!r}")
    client.set(keys.gen_rate(topic), repr(float(rate)))


def get_rate(client: redis.Redis, topic: str) -> float | None:
    """The current rate of ``topic`` in events per second, or None when never set (or not a number:
    logged)."""
    value = client.get(keys.gen_rate(topic))
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        log.warning("ignoring non-numeric rate %r in %s", value, keys.gen_rate(topic))
        return None
