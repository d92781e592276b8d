"""Benchmark: server time of the history page of a job with 1,000 audit events (every action, as the
web app writes them: ``tests/webapp/dashboard/history_factories.py``). The target is 300 ms for the first page
(median of 20 requests). Prints the figures and the number of queries; asserts nothing about time (a
benchmark, not a test).

Run it from the repository root (it builds the job in a temporary SQLite database)::

    python -m tests.webapp.dashboard.bench_history [--events 1000] [--requests 20]

``--keep PATH`` builds the database at PATH and leaves it (with a user ``admin``, password
``--password``) for a development server, e.g. to take screenshots of the page.
``tests/webapp/dashboard/test_history_page.py`` checks what the page shows and bounds its queries."""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

EVENTS = 1000
REQUESTS = 20
TARGET_MS = 300.0

#: The pages timed: (name, URL with ``{job}`` for the job's id).
PAGES = [("history, first page", "/jobs/{job}/history/"), ("history (live body)", "/jobs/{job}/history/live/"),
         ("history, page 10", "/jobs/{job}/history/?page=10"),
         ("history, filtered by action", "/jobs/{job}/history/?action=policy_changed"),
         ("history, filtered by actor", "/jobs/{job}/history/?actor=system")]


def build_history(events: int, password: str | None):
    """A job with a succeeded rescale, snapshots, and ``events`` audit events; returns (job, user)."""
    from django.contrib.auth import get_user_model  # noqa: PLC0415 - Django is set up by main() first

    from tests.webapp.dashboard.history_factories import make_every_event  # noqa: PLC0415 - idem
    from tests.webapp.dashboard_factories import make_succeeded  # noqa: PLC0415 - idem
    from tests.webapp.factories import make_job, make_snapshots, make_user  # noqa: PLC0415 - idem

    user = make_user("ada", role="admin")
    user.first_name, user.last_name = "Ada", "Lovelace"
    user.save()
    job = make_job("orders-enrich", metric_window_s=45)
    make_snapshots(job, count=4)
    done = make_succeeded(job, cores_from=1, cores_to=2)
    make_every_event(job, done.pk, user, count=events)
    if password:
        get_user_model().objects.create_superuser("admin", password=password)
    return job, user


def time_page(client, url: str, requests: int) -> tuple[float, int]:
    """The median server time of ``requests`` GETs of ``url`` after one warm-up (ms), and its queries."""
    from django.db import connection, reset_queries  # noqa: PLC0415 - Django is set up by main() first
    from django.test.utils import CaptureQueriesContext  # noqa: PLC0415 - idem

    client.get(url)  # warm caches (templates, query plans)
    reset_queries()  # the build's queries filled the log (it keeps 9,000): count from empty
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200, url
    queries = len(captured)  # now: the next request clears the log
    samples = []
    for _ in range(requests):
        started = time.perf_counter()
        response = client.get(url)
        samples.append(time.perf_counter() - started)
        assert response.status_code == 200, url
    return statistics.median(samples) * 1000, queries


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=EVENTS)
    parser.add_argument("--requests", type=int, default=REQUESTS)
    parser.add_argument("--keep", type=Path, help="build the database at this path and leave it")
    parser.add_argument("--password", default="admin-pw", help="the password of user admin in a kept database")
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="bench-history-"))
    database = args.keep.resolve() if args.keep else workdir / "bench.sqlite3"
    os.environ["DATABASE_URL"] = f"sqlite:///{database}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    os.environ.setdefault("DEBUG", "true")  # plain HTTP, a development key; the requests run with DEBUG off
    import django  # noqa: PLC0415 - after DATABASE_URL is set: the settings read it

    django.setup()
    from django.core.management import call_command  # noqa: PLC0415 - after django.setup()
    from django.db import transaction  # noqa: PLC0415 - idem
    from django.test import Client  # noqa: PLC0415 - idem
    from django.test.utils import setup_test_environment  # noqa: PLC0415 - idem

    setup_test_environment(debug=False)  # the test client's host, in-memory e-mail, no query log
    call_command("migrate", verbosity=0)
    try:
        started = time.perf_counter()
        with transaction.atomic():
            job, user = build_history(args.events, args.password if args.keep else None)
        print(f"job {job.name} (id {job.pk}) with {job.audit_events.count()} audit events built in "
              f"{time.perf_counter() - started:.1f} s (SQLite); server time, median of {args.requests} "
              f"(target {TARGET_MS:.0f} ms for the first page):")
        client = Client()
        client.force_login(user)
        for name, url in PAGES:
            ms, queries = time_page(client, url.format(job=job.pk), args.requests)
            print(f"  {name:30s} {ms:7.1f} ms  {queries:3d} queries")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
