"""``make demo`` (``python -m sparkclient.demo``, :mod:`sparkclient.demo.launch`) puts its Redis password on
no command line, where ``ps`` shows it to every user of the machine: its real Redis server runs, and every
other command the demo starts or runs is recorded at ``subprocess`` (nothing else starts; the server's own
command line is recorded as it is given); the Spark driver
each runner would start is derived from the runner's own command line as the runner derives it."""

from __future__ import annotations

import argparse
import signal
import subprocess
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import unquote, urlsplit

import pytest

from sparkclient.demo import launch, processes, redisproc
from sparkclient.runner.arguments import add_run_arguments
from sparkclient.runner.supervisor import driver_command


class _Recorded:
    """What ``subprocess.Popen`` gives back: a process that has exited."""

    pid, returncode = 0, 0

    def poll(self) -> int:
        return 0


@pytest.fixture
def demo_commands(tmp_path, monkeypatch):
    """Run the demo's ``main`` with both examples; returns ``(password, commands, redis argv)``: the
    password of its Redis, each started or run command as ``(argv, env)``, and the real Redis server's
    command line."""
    commands: list[tuple[list[str], dict[str, str]]] = []
    servers, redis_argvs = [], []

    def popen(argv, *, env=None, **_kwargs):
        commands.append((list(argv), dict(env or {})))
        return _Recorded()

    def run(argv, *, env=None, **_kwargs):
        commands.append((list(argv), dict(env or {})))
        return subprocess.CompletedProcess(argv, 0, stdout="", stderr="")

    def start_redis(**kwargs):
        server = redisproc.start_redis(**kwargs)
        servers.append(server)
        return server

    def redis_popen(argv, **kwargs):
        redis_argvs.append(list(argv))  # as given: redis-server rewrites the title ps shows afterwards
        return subprocess.Popen(argv, **kwargs)

    monkeypatch.setenv("SPARKSCALER_VAR_DIR", str(tmp_path / "var"))
    monkeypatch.delenv("SPARKSCALER_REDIS_URL", raising=False)
    # The demo's process group starts nothing; the real Redis server (redisproc) is started as usual.
    monkeypatch.setattr(processes, "subprocess", SimpleNamespace(
        Popen=popen, run=run, DEVNULL=subprocess.DEVNULL, STDOUT=subprocess.STDOUT))
    monkeypatch.setattr(processes, "end_process_group", lambda *_args, **_kwargs: [])
    monkeypatch.setattr(launch, "wait_http", lambda *_args, **_kwargs: None)
    monkeypatch.setattr(launch, "start_redis", start_redis)
    monkeypatch.setattr(redisproc, "subprocess", SimpleNamespace(
        Popen=redis_popen, DEVNULL=subprocess.DEVNULL, STDOUT=subprocess.STDOUT,
        TimeoutExpired=subprocess.TimeoutExpired))
    monkeypatch.setattr(launch, "_port_free", lambda _port: False)  # never 6379: the machine is shared
    monkeypatch.setattr(signal, "signal", lambda *_args: None)  # pytest keeps its handlers
    assert launch.main(["--examples", "nexmark,files"]) == 0
    [server], [redis_argv] = servers, redis_argvs
    assert server.process.poll() is not None  # the demo stopped it
    return server.password, commands, redis_argv


def _driver_argv(runner_argv: list[str], env: dict[str, str], monkeypatch) -> list[str]:
    """The driver command the runner of ``runner_argv`` (``python -m sparkclient run ...``) would start
    in the environment ``env``."""
    monkeypatch.setenv("SPARKSCALER_REDIS_URL", env["SPARKSCALER_REDIS_URL"])
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    args = parser.parse_args(runner_argv[runner_argv.index("run") + 1:])
    args.capacity = 2
    return driver_command(args, Path(args.workdir))[0]


def test_no_command_the_demo_starts_carries_its_redis_password(demo_commands, monkeypatch):
    password, commands, redis_argv = demo_commands
    assert len(password) >= 20
    started = {argv[argv.index("-m") + 1] if "-m" in argv else argv[2] for argv, _env in commands}
    assert {"sparkclient.demo.generator", "sparkclient.demo.examples.files_load", "sparkclient", "celery",
            "migrate", "ensure_admin", "register_job", "runserver"} <= started
    runners = [(argv, env) for argv, env in commands if argv[1:4] == ["-m", "sparkclient", "run"]]
    assert len(runners) == 2
    drivers = [_driver_argv(argv, env, monkeypatch) for argv, env in runners]
    for argv in [redis_argv, *[argv for argv, _env in commands], *drivers]:
        line = " ".join(argv)
        assert password not in line and unquote(password) not in line and "--redis-url" not in line, line
    # The password reaches them through their environment: every Redis URL is this run's, with it.
    for _argv, env in commands:
        for name in ("REDIS_URL", "SPARKSCALER_REDIS_URL"):
            assert unquote(urlsplit(env[name]).password) == password
