"""``run_demo`` and ``demo_commands``: ``make demo``'s ``main`` (:mod:`sparkclient.demo.launch`) with both
examples, its real Redis server running and every other command it starts or runs recorded at ``subprocess``
(nothing else starts)."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest

from sparkclient.demo import launch, processes, redisproc


class _Recorded:
    """What ``subprocess.Popen`` gives back: a process that has exited."""

    pid, returncode = 0, 0

    def poll(self) -> int:
        return 0


@dataclass(frozen=True)
class DemoRun:
    """What one run of the demo's ``main`` did."""

    password: str  # its Redis server's
    commands: list[tuple[list[str], dict[str, str]]]  # each command started or run: (argv, env)
    redis_argv: list[str]  # the real Redis server's command line, as given
    logs: dict[str, Path]  # each started command's output file, by its argv joined with spaces
    printed: str  # what it printed


@pytest.fixture
def run_demo(tmp_path, monkeypatch, capsys) -> Callable[..., DemoRun]:
    """Run the demo's ``main`` with both examples on port 8123, the environment's variables set to
    ``environ`` (each variable of it), once per call (:class:`DemoRun`)."""
    commands: list[tuple[list[str], dict[str, str]]] = []
    logs: dict[str, Path] = {}
    servers, redis_argvs = [], []

    def popen(argv, *, env=None, stdout=None, **_kwargs):
        commands.append((list(argv), dict(env or {})))
        logs[" ".join(argv)] = Path(stdout.name)
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
    monkeypatch.delenv("SCALER_NOTIFY_BASE_URL", raising=False)
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

    def demo(**environ: str) -> DemoRun:
        for recorded in (commands, logs, servers, redis_argvs):
            recorded.clear()
        capsys.readouterr()
        for name, value in environ.items():
            monkeypatch.setenv(name, value)
        assert launch.main(["--examples", "nexmark,files", "--port", "8123"]) == 0
        [server], [redis_argv] = servers, redis_argvs
        assert server.process.poll() is not None  # the demo stopped it
        return DemoRun(server.password, list(commands), redis_argv, dict(logs), capsys.readouterr().out)

    return demo


@pytest.fixture
def demo_commands(run_demo) -> DemoRun:
    """One run of the demo's ``main`` (:func:`run_demo`) in the tests' environment."""
    return run_demo()
