"""``make demo`` (``python -m sparkclient.demo``, :mod:`sparkclient.demo.launch`) puts its Redis password on
no command line, where ``ps`` shows it to every user of the machine: its real Redis server runs, and every
other command the demo starts or runs is recorded at ``subprocess`` (``demo_commands``, conftest.py: nothing
else starts; the server's own command line is recorded as it is given); the Spark driver
each runner would start is derived from the runner's own command line as the runner derives it."""

from __future__ import annotations

import argparse
from pathlib import Path
from urllib.parse import unquote, urlsplit

from sparkclient.runner.arguments import add_run_arguments
from sparkclient.runner.supervisor import driver_command


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
    password, commands, redis_argv = demo_commands.password, demo_commands.commands, demo_commands.redis_argv
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
