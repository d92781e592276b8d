"""docker-compose.yml cannot run here (no Docker engine); check that it describes every service,
that each project service's command exists in the project, that its secrets come from the env file,
and that the documented production environment (.env.example) passes ``manage.py check --deploy``."""

import argparse
import ast
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import redis
import yaml

from sparkclient.demo.generator import read_counts
from sparkclient.demo.redisproc import free_port, redis_server_binary, start_redis
from sparkclient.runner.arguments import add_run_arguments
from sparkclient.runner.supervisor import driver_command
from tests.repo import ROOT
from tests.waiting import wait_for

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


def _environments() -> dict[str, dict]:
    """The environment each service declares (the app's anchor as ``x-app``), as ``docker inspect`` shows it
    besides the env file's."""
    return {"x-app": compose()["x-app"]["environment"], **{n: s.get("environment") or {} for n, s in load().items()}}


def test_compose_serves_with_gunicorn_and_takes_its_secrets_from_files():
    text = (ROOT / "docker-compose.yml").read_text()
    services = load()
    assert services["web"]["command"].startswith("gunicorn ") and "runserver" not in text
    assert all(port.startswith("127.0.0.1:") for port in services["web"]["ports"])
    # No password or key in any environment: a variable about one names the file that holds it.
    secret_names = {name: f"./secrets/{name}" for name in ("secret_key", "postgres_password", "redis_password")}
    assert {name: spec["file"] for name, spec in compose()["secrets"].items()} == secret_names
    for service, env in _environments().items():
        for key, value in env.items():
            assert not re.search(r"://[^/@]*:[^/@]*@", str(value)), (service, key)  # no user:password@
            if "PASSWORD" in key or "SECRET" in key:
                assert key.endswith("_FILE") and value.removeprefix("/run/secrets/") in secret_names, (service, key)
    app = compose()["x-app"]
    assert app["env_file"] == ".env" and set(app["secrets"]) == set(secret_names)
    assert app["environment"]["DATABASE_URL"] == "postgres://sparkscaler@postgres:5432/sparkscaler"
    assert app["environment"]["REDIS_URL"] == app["environment"]["SPARKSCALER_REDIS_URL"] == "redis://redis:6379/0"
    assert services["postgres"]["secrets"] == ["postgres_password"] and services["redis"]["secrets"] == [
        "redis_password"]
    assert services["postgres"]["environment"]["POSTGRES_PASSWORD_FILE"] == "/run/secrets/postgres_password"
    # Neither .env nor an interpolated variable carries one into the file: compose reads no secret from .env.
    assert "${" not in text and "env_file" not in services["postgres"] and "env_file" not in services["redis"]
    assert not [key for key in _env_example() if "PASSWORD" in key or "SECRET" in key]
    assert "change-me" not in text and '"*"' not in text and "ALLOWED_HOSTS" not in text


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


def test_check_deploy_with_the_documented_production_environment_gives_no_warnings(tmp_path):
    from django.core.management.utils import get_random_secret_key

    env = _env_example()
    assert env["DEBUG"] == "false"
    key = tmp_path / "secret_key"
    key.write_text(get_random_secret_key() + "\n")
    done = _manage(["check", "--deploy", "--fail-level", "WARNING"], {**env, "SECRET_KEY_FILE": str(key)})
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


def _show(env: dict[str, str], *expressions: str) -> list[str]:
    """The ``repr`` of each settings expression (``settings.X``), as a process with ``env`` sees them."""
    shown = _manage(["shell", "-c", "from django.conf import settings; "
                     f"print(repr(({', '.join(expressions)},)))"], env)
    assert shown.returncode == 0, shown.stderr
    return list(ast.literal_eval(shown.stdout.strip().splitlines()[-1]))


def test_debug_without_a_secret_key_draws_a_new_random_key_each_run():
    first, second = (_show({"DEBUG": "true"}, "settings.SECRET_KEY")[0] for _ in range(2))
    assert first != second and min(len(first), len(second)) >= 50
    assert _show({"DEBUG": "true", "SECRET_KEY": "k" * 60}, "settings.SECRET_KEY") == ["k" * 60]


def test_the_key_and_the_passwords_come_from_files(tmp_path):
    for name, value in (("secret_key", "$" + "k" * 59), ("postgres_password", "pg pw/@"),
                        ("redis_password", "r@dis:pw")):
        (tmp_path / name).write_text(value + "\n")
    env = {"SECRET_KEY_FILE": str(tmp_path / "secret_key"),
           "DATABASE_URL": "postgres://sparkscaler@postgres:5432/sparkscaler",
           "DATABASE_PASSWORD_FILE": str(tmp_path / "postgres_password"),
           "REDIS_URL": "redis://redis:6379/0", "REDIS_PASSWORD_FILE": str(tmp_path / "redis_password")}
    assert _show(env, "settings.SECRET_KEY", "settings.DATABASES['default']['PASSWORD']",
                 "settings.DATABASES['default']['USER']", "settings.REDIS_URL", "settings.CELERY_BROKER_URL") == [
        "$" + "k" * 59, "pg pw/@", "sparkscaler", "redis://:r%40dis%3Apw@redis:6379/0",
        "redis://:r%40dis%3Apw@redis:6379/0"]
    done = _manage(["check"], {**env, "REDIS_PASSWORD_FILE": str(tmp_path / "nope")})
    assert done.returncode != 0 and f"REDIS_PASSWORD_FILE={tmp_path / 'nope'}" in done.stderr, done.stderr


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



# --- no password on a command line (ps, docker inspect) -------------------------------------------

def _command_line(service: dict) -> str:
    command = service.get("command", "")
    return command if isinstance(command, str) else " ".join(command)


def test_no_command_line_carries_a_password():
    """The passwords are only in the secret files; redis's command reads its own from one."""
    spec = compose()
    for name, service in spec["services"].items():
        line = _command_line(service)
        assert "PASSWORD" not in line and "--requirepass" not in line and not re.search(r"://[^ ]*@", line), name
        assert "--redis-url" not in line, name
    script = spec["services"]["redis"]["command"]
    assert script[:2] == ["sh", "-c"] and '"$$(cat /run/secrets/redis_password)"' in script[2]
    assert "configs" not in spec and "env_file" not in spec["services"]["redis"]  # redis needs no app secret


def _answers_with_auth_error(client: redis.Redis) -> bool:
    try:
        client.ping()
    except redis.AuthenticationError:
        return True
    except redis.ConnectionError:
        return False
    raise AssertionError("redis answered without a password")


def _redis_script(tmp_path: Path, port: int) -> str:
    """The redis service's shell command as it runs here: compose's ``$$`` unescaped, the secret and the
    config in ``tmp_path``, no ``chown`` (no redis user here), and this machine's ``redis-server`` on
    loopback ``port`` instead of the image's entrypoint."""
    script = compose()["services"]["redis"]["command"][2].replace("$$", "$")
    for theirs, ours in (("/run/secrets/redis_password", str(tmp_path / "redis_password")),
                         ("/tmp/redis.conf", str(tmp_path / "redis.conf")),
                         ("chown redis:redis", "true"),
                         ("docker-entrypoint.sh redis-server", shlex.quote(redis_server_binary()))):
        assert theirs in script
        script = script.replace(theirs, ours)
    return f"{script} --port {port} --bind 127.0.0.1 --dir {shlex.quote(str(tmp_path))}"


def test_redis_takes_its_password_from_the_secret_file(tmp_path):
    password = "s3cret-" + "x" * 20
    (tmp_path / "redis_password").write_text(password + "\n")
    port = free_port()
    server = subprocess.Popen(["sh", "-c", _redis_script(tmp_path, port)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.STDOUT)
    try:
        anonymous = redis.Redis(port=port, socket_connect_timeout=1)
        wait_for(lambda: _answers_with_auth_error(anonymous), timeout_s=30, what="redis refusing anonymous PING",
                 interval_s=0.1)
        client = redis.Redis(port=port, password=password)
        assert client.ping() and client.config_get("appendonly") == {"appendonly": "yes"}
        assert (tmp_path / "redis.conf").stat().st_mode & 0o077 == 0  # the config is the owner's only
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.mark.parametrize("load", [
    ["sparkclient.demo.generator", "--topic", "t", "--partitions", "1", "--rate", "1000", "--max-events", "5"],
    ["sparkclient.demo.examples.files_load", "--topic", "t", "--rate", "1000", "--file-rows", "5", "--seconds", "1"],
], ids=["generator", "files_load"])
def test_the_loads_read_the_redis_url_and_its_password_file_from_the_environment(tmp_path, load):
    """As compose gives them: a URL without a password and the file that holds it."""
    server = start_redis(workdir=tmp_path / "redis", password="pw/" + "y" * 20)
    (tmp_path / "redis_password").write_text(server.password + "\n")
    extra = ["--inbox", str(tmp_path / "inbox")] if load[0].endswith("files_load") else []
    try:
        done = subprocess.run([sys.executable, "-m", *load, *extra], cwd=ROOT, capture_output=True, text=True,
                              timeout=60, env={**os.environ, "SPARKSCALER_REDIS_URL": f"redis://127.0.0.1:{server.port}/0",
                                               "SPARKSCALER_REDIS_PASSWORD_FILE": str(tmp_path / "redis_password")})
        assert done.returncode == 0, done.stderr
        assert read_counts(redis.Redis.from_url(server.url, decode_responses=True), "t")["total"] >= 5
    finally:
        server.stop()


def test_the_runner_reads_the_redis_url_from_the_environment_and_keeps_it_out_of_its_drivers_argv(monkeypatch):
    url = "redis://:hunter2-secret@redis:6379/0"
    monkeypatch.setenv("SPARKSCALER_REDIS_URL", url)
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    args = parser.parse_args(["--pipeline", "mod:build", "--job", "demo"])
    assert args.redis_url == url
    args.capacity = 2
    cmd, env = driver_command(args, Path("/data/demo"))
    assert not [arg for arg in cmd if "hunter2" in arg] and "--redis-url" not in cmd
    assert env["SPARKSCALER_REDIS_URL"] == url
    # An explicit --redis-url wins, and still reaches the driver through its environment only.
    args = parser.parse_args(["--pipeline", "mod:build", "--job", "demo", "--redis-url", "redis://:other@h:1/0"])
    args.capacity = 2
    cmd, env = driver_command(args, Path("/data/demo"), standby="s1")
    assert not [arg for arg in cmd if "other@" in arg] and env["SPARKSCALER_REDIS_URL"] == "redis://:other@h:1/0"
