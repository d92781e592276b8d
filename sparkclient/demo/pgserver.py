"""A throw-away PostgreSQL server started as a process (Debian's ``initdb`` and ``pg_ctl``), for the
tests and the fleet benchmark.

PostgreSQL refuses to run as root, so as root (CI, containers) the data directory belongs to the
``postgres`` user and the binaries run through ``runuser -u postgres --``.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg


def _bin_dir() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    if on_path:
        return Path(on_path).parent
    raise RuntimeError("PostgreSQL is not installed: `apt-get install postgresql` (scripts/system-deps.sh does it)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class PostgresServer:
    bin_dir: Path
    data_dir: Path
    port: int
    as_user: str | None

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/sparkscaler"

    def _run(self, *args: str, timeout_s: float = 120) -> str:
        argv = [str(self.bin_dir / args[0]), *args[1:]]
        if self.as_user:
            argv = ["runuser", "-u", self.as_user, "--", *argv]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, cwd="/")
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
        return done.stdout

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data_dir / "data"), "-m", "immediate", "-w", "stop", timeout_s=60)
        finally:
            shutil.rmtree(self.data_dir, ignore_errors=True)


def start_postgres() -> PostgresServer:
    """initdb + pg_ctl start on a free port (trust auth on 127.0.0.1, fsync off); creates the
    database ``sparkscaler``."""
    as_user = "postgres" if os.geteuid() == 0 else None
    root = Path(tempfile.mkdtemp(prefix="sparkscaler-pg-"))
    os.chmod(root, 0o755)
    if as_user:
        entry = pwd.getpwnam(as_user)
        os.chown(root, entry.pw_uid, entry.pw_gid)
    server = PostgresServer(_bin_dir(), root, _free_port(), as_user)
    data = root / "data"
    server._run("initdb", "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
    options = (f"-p {server.port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off "
               f"-c synchronous_commit=off -c full_page_writes=off -c max_connections=120")
    server._run("pg_ctl", "-D", str(data), "-o", options, "-l", str(root / "postgres.log"), "-w", "start")
    deadline = time.monotonic() + 30
    while True:
        try:
            with psycopg.connect(f"host=127.0.0.1 port={server.port} user=postgres dbname=postgres",
                                 autocommit=True) as conn:
                conn.execute("CREATE DATABASE sparkscaler")
            return server
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)
