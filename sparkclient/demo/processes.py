"""Start and stop the demo's child processes (Redis, Celery, Django, generator, Spark runner).

Each child runs in its own session (process group), so stopping it also stops what it started
(the runner's JVM, Celery's pool). Used by ``python -m sparkclient.demo`` and by the end-to-end tests.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from sparkclient.runner.procgroup import end_process_group

BASE_DIR = Path(__file__).resolve().parents[2]


@dataclass
class Child:
    """One child process with its log file."""

    name: str
    process: subprocess.Popen
    log_path: Path


@dataclass
class ProcessGroup:
    """Children started in order and stopped in reverse order (SIGTERM, then SIGKILL)."""

    log_dir: Path
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    children: list[Child] = field(default_factory=list)

    def start(self, name: str, args: list[str], *, extra_env: dict[str, str] | None = None) -> Child:
        """Start ``args`` (``python`` means this interpreter) with output to ``<log_dir>/<name>.log``."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_dir / f"{name}.log"
        argv = [sys.executable if a == "python" else a for a in args]
        env = {**self.env, **(extra_env or {})}
        with open(log_path, "ab") as log:
            process = subprocess.Popen(argv, cwd=BASE_DIR, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                       stderr=subprocess.STDOUT, start_new_session=True)
        child = Child(name, process, log_path)
        self.children.append(child)
        return child

    def run(self, name: str, args: list[str], *, timeout_s: float = 300) -> str:
        """Run a short command to completion; returns its output.

        Raises:
            RuntimeError: it exited non-zero; the message carries its output.
        """
        argv = [sys.executable if a == "python" else a for a in args]
        done = subprocess.run(argv, cwd=BASE_DIR, env=self.env, capture_output=True, text=True, timeout=timeout_s)
        if done.returncode != 0:
            raise RuntimeError(f"{name} failed (exit {done.returncode}):\n{done.stdout}\n{done.stderr}")
        return done.stdout

    def dead(self) -> list[Child]:
        """Children that have exited."""
        return [c for c in self.children if c.process.poll() is not None]

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop every child, newest first: SIGTERM to its process group, SIGKILL to what is left
        after ``timeout_s`` (:func:`sparkclient.runner.procgroup.end_process_group`)."""
        for child in reversed(self.children):
            end_process_group(child.process.pid, term_wait_s=timeout_s, kill_wait_s=5.0, what=child.name)
            child.process.poll()
        self.children.clear()


def wait_http(url: str, *, timeout_s: float = 60.0, process: subprocess.Popen | None = None) -> None:
    """Wait until ``url`` answers any HTTP status.

    Raises:
        RuntimeError: ``process`` exited, or nothing answered within ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"the process serving {url} exited with code {process.returncode}")
        try:
            httpx.get(url, timeout=2.0)
            return
        except httpx.HTTPError:
            time.sleep(0.3)
    raise RuntimeError(f"{url} did not answer within {timeout_s:.0f} s")
