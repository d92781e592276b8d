"""The web app's Redis connection (broker aside): runner status, progress and control channel."""

from functools import lru_cache

import redis
from django.conf import settings


@lru_cache(maxsize=4)
def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, decode_responses=True, socket_timeout=10, socket_connect_timeout=5)


def get_redis() -> redis.Redis:
    """A shared client on ``settings.REDIS_URL`` (strings decoded)."""
    return _client(settings.REDIS_URL)
