"""Settings of the test suite: the development defaults (``DEBUG`` on, so no ``SECRET_KEY`` is
needed) on top of ``webapp.settings``. Child processes the tests start (Celery workers, ``manage.py``)
inherit ``DJANGO_SETTINGS_MODULE`` and ``DEBUG`` from the environment set here."""

import os

os.environ.setdefault("DEBUG", "true")

from webapp.settings import *  # noqa: E402,F403

if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":  # noqa: F405
    # WAL's recommended sync level for the throwaway test database: a commit no longer waits for an
    # fsync of the log (1.4 ms a commit on this disk against 0.03 ms); a crash of the process still
    # loses nothing, only a crash of the machine could. The web tests that commit (``live_server``,
    # ``transaction=True``, worker processes, which load these settings too) commit thousands of times.
    DATABASES["default"]["OPTIONS"]["init_command"] += "PRAGMA synchronous=NORMAL;"  # noqa: F405
