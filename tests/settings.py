"""Settings of the test suite: the development defaults (``DEBUG`` on, so no ``SECRET_KEY`` is
needed) on top of ``webapp.settings``. Child processes the tests start (Celery workers, ``manage.py``)
inherit ``DJANGO_SETTINGS_MODULE`` and ``DEBUG`` from the environment set here."""

import os

os.environ.setdefault("DEBUG", "true")

from webapp.settings import *  # noqa: E402,F403
