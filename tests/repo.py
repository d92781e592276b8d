"""The repository's root: where ``docs/``, ``manage.py`` and ``test-artifacts/`` are, and the working
directory of the commands the tests run."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
