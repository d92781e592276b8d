"""docker-compose.yml cannot run here (no Docker engine); check that it describes every service,
that each project service's command exists in the project, that its secrets come from the env file,
and that the documented production environment (.env.example) passes ``manage.py check --deploy``."""

import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
EXPECTED = {"web", "worker", "beat", "redis", "postgres", "spark-master", "spark-worker", "generator", "pipeline",
            "migrate"}


def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def load():
    return compose()["services"]


def test_all_services_are_described():
    assert EXPECTED <= set(load())


def test_project_service_commands_exist():
    from django.core.management import get_commands

    checked = 0
    for name, service in load().items():
        if "command" not in service or service.get("image") in ("redis:7",):
            assert "image" in service and name in {"redis", "postgres"}, f"{name} has neither command nor image"
            continue
        argv = shlex.split(service["command"])
        if argv[0] == "python" and argv[1] == "manage.py":
            assert argv[2] in get_commands(), f"{name}: manage.py has no command {argv[2]!r}"
        elif argv[0] == "python" and argv[1] == "-m":
            assert importlib.util.find_spec(argv[2]) is not None, f"{name}: no module {argv[2]}"
        elif argv[0] == "celery":
            assert argv[1:3] == ["-A", "webapp"] and importlib.util.find_spec("webapp.celery")
        elif argv[0] == "gunicorn":
            module, _, attr = argv[1].partition(":")
            assert importlib.util.find_spec("gunicorn") and importlib.util.find_spec(module) and attr == "application"
        elif argv[0] == "spark-class":
            assert (Path(sys.executable).parent / "spark-class").exists() or shutil.which("spark-class")
            assert argv[1].startswith("org.apache.spark.deploy.")
        else:
            raise AssertionError(f"{name}: unknown command {service['command']!r}")
        checked += 1
    assert checked == 8


def test_compose_serves_with_gunicorn_reads_secrets_from_env_and_redis_has_a_password():
    text = (ROOT / "docker-compose.yml").read_text()
    services = load()
    assert services["web"]["command"].startswith("gunicorn ") and "runserver" not in text
    assert all(port.startswith("127.0.0.1:") for port in services["web"]["ports"])
    # No literal secret: every password and key is a ${VAR} from the env file.
    environments = [compose()["x-app"]["environment"]] + [s.get("environment") or {} for s in services.values()]
    assert not [key for env in environments for key in env if "PASSWORD" in key or "SECRET" in key]
    assert "change-me" not in text and "sparkscaler:sparkscaler@" not in text
    assert re.findall(r"://[^@\n]*@", text) == ["://sparkscaler:${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD in .env}@",
                                                "://:${REDIS_PASSWORD:?set REDIS_PASSWORD in .env}@",
                                                "://:${REDIS_PASSWORD:?}@", "://:${REDIS_PASSWORD:?}@"]
    assert "--requirepass" in " ".join(services["redis"]["command"])
    assert compose()["x-app"]["env_file"] == ".env" and services["redis"]["env_file"] == ".env"
    assert '"*"' not in text and "ALLOWED_HOSTS" not in text


def _env_example() -> dict[str, str]:
    values = {}
    for line in (ROOT / ".env.example").read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    return values


def _manage(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    # A clean environment: nothing another test or the shell set leaks into the settings.
    base = {k: os.environ[k] for k in ("PATH", "HOME", "PYTHONPATH", "LANG", "SPARKSCALER_VAR_DIR") if k in os.environ}
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={**base, "DJANGO_SETTINGS_MODULE": "webapp.settings", **env})


def test_check_deploy_with_the_documented_production_environment_gives_no_warnings():
    from django.core.management.utils import get_random_secret_key

    env = _env_example()
    assert env["DEBUG"] == "false" and env["SECRET_KEY"] == "" and env["REDIS_PASSWORD"] == ""
    done = _manage(["check", "--deploy", "--fail-level", "WARNING"], {**env, "SECRET_KEY": get_random_secret_key()})
    print(done.stdout, done.stderr)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues (0 silenced)." in done.stdout


def test_a_secret_key_starting_with_a_dollar_sign_is_taken_as_it_is():
    """Django's ``get_random_secret_key()`` draws from 50 characters including "$"; django-environ
    would read "$abc" as the value of the variable ``abc`` (so a generated key failed once in 50)."""
    key = "$" + "k" * 59
    shown = _manage(["shell", "-c", "from django.conf import settings; print(settings.SECRET_KEY)"],
                    {"SECRET_KEY": key})
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip().splitlines()[-1] == key


def test_debug_is_off_by_default_and_a_secret_key_is_then_required():
    done = _manage(["check"], {})
    assert done.returncode != 0
    assert "SECRET_KEY is not set and DEBUG is off" in done.stderr
    shown = _manage(["shell", "-c", "from django.conf import settings; print(settings.DEBUG)"],
                    {"SECRET_KEY": "x" * 60})
    assert shown.returncode == 0 and shown.stdout.strip().splitlines()[-1] == "False", shown.stderr


_HTTPS_SETTINGS = ("SECURE_SSL_REDIRECT", "SECURE_HSTS_SECONDS", "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE")


def _show_https_settings(env: dict[str, str]) -> list[str]:
    names = ", ".join(f"settings.{name}" for name in _HTTPS_SETTINGS)
    shown = _manage(["shell", "-c", f"from django.conf import settings; print({names})"], env)
    assert shown.returncode == 0, shown.stderr
    return shown.stdout.strip().splitlines()[-1].split()


def test_check_deploy_with_only_a_secret_key_gives_no_warnings():
    """With DEBUG off the HTTPS settings are on by default: no environment beyond SECRET_KEY needed."""
    from django.core.management.utils import get_random_secret_key

    done = _manage(["check", "--deploy", "--fail-level", "WARNING"], {"SECRET_KEY": get_random_secret_key()})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues (0 silenced)." in done.stdout
    assert _show_https_settings({"SECRET_KEY": "k" * 60}) == ["True", "31536000", "True", "True"]


def test_a_plain_http_setup_turns_the_https_settings_off_through_the_environment():
    opt_out = {"SECURE_SSL_REDIRECT": "false", "SECURE_HSTS_SECONDS": "0", "SESSION_COOKIE_SECURE": "false",
               "CSRF_COOKIE_SECURE": "false"}
    assert _show_https_settings({"SECRET_KEY": "k" * 60, **opt_out}) == ["False", "0", "False", "False"]
    # Each one alone: the others stay on.
    assert _show_https_settings({"SECRET_KEY": "k" * 60, "SESSION_COOKIE_SECURE": "false"}) == [
        "True", "31536000", "False", "True"]
    done = _manage(["check", "--deploy"], {"SECRET_KEY": "k" * 60, **opt_out})
    assert all(code in done.stderr for code in ("W004", "W008", "W012", "W016")), done.stdout + done.stderr


def test_debug_on_keeps_plain_http_for_the_demo_and_the_tests():
    assert _show_https_settings({"DEBUG": "true"}) == ["False", "0", "False", "False"]
