"""docker-compose.yml cannot run here (no Docker engine); check that it describes every service and
that each project service's command exists in the project."""

import importlib.util
import shlex
import shutil
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
EXPECTED = {"web", "worker", "beat", "redis", "postgres", "spark-master", "spark-worker", "generator", "pipeline"}


def load():
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]


def test_all_services_are_described():
    assert EXPECTED <= set(load())


def test_project_service_commands_exist():
    from django.core.management import get_commands

    checked = 0
    for name, service in load().items():
        if "command" not in service:
            assert "image" in service and name in {"redis", "postgres"}, f"{name} has neither command nor image"
            continue
        argv = shlex.split(service["command"])
        if argv[0] == "python" and argv[1] == "manage.py":
            assert argv[2] in get_commands(), f"{name}: manage.py has no command {argv[2]!r}"
        elif argv[0] == "python" and argv[1] == "-m":
            assert importlib.util.find_spec(argv[2]) is not None, f"{name}: no module {argv[2]}"
        elif argv[0] == "celery":
            assert argv[1:3] == ["-A", "webapp"] and importlib.util.find_spec("webapp.celery")
        elif argv[0] == "spark-class":
            assert (Path(sys.executable).parent / "spark-class").exists() or shutil.which("spark-class")
            assert argv[1].startswith("org.apache.spark.deploy.")
        else:
            raise AssertionError(f"{name}: unknown command {service['command']!r}")
        checked += 1
    assert checked == 7
