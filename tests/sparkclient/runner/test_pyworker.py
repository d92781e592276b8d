"""The Python-worker launcher (``sparkclient/runner/pyworker.py``) against a fake JVM speaking Spark's
connect-back protocol: it connects, authenticates and sends its process id *before* the worker
module's imports, then runs the module on that connection; everything else reaches the interpreter
unchanged."""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sparkclient.runner.pyworker import worker_module
from sparkclient.runner.session import PYWORKER, python_worker_launcher

SECRET = "s3cret"
#: A worker module whose imports block until the test creates ``$GO_FILE`` (Spark's slow imports),
#: then doubles one int on the connection, as pyspark's worker modules run their ``main``.
SLOW_WORKER = """
    import os, pathlib, struct, sys, time
    deadline = time.monotonic() + 60
    while not pathlib.Path(os.environ["GO_FILE"]).exists():
        if time.monotonic() > deadline:
            sys.exit(3)
        time.sleep(0.01)
    from pyspark.worker_util import get_sock_file_to_executor

    def main(infile, outfile):
        (n,) = struct.unpack("!i", infile.read(4))
        outfile.write(struct.pack("!i", 2 * n))
        outfile.flush()

    if __name__ == "__main__":
        with get_sock_file_to_executor(timeout=None) as sock_file:
            main(sock_file, sock_file)
"""


def _read_exact(conn_file, n: int) -> bytes:
    data = conn_file.read(n)
    assert len(data) == n, f"the launcher closed the connection after {len(data)} of {n} bytes"
    return data


def _fake_jvm(tmp_path: Path):
    """A listening socket and the launcher's environment pointing at it."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(60)
    (tmp_path / "slowworker.py").write_text(textwrap.dedent(SLOW_WORKER))
    env = {**os.environ, "PYTHON_WORKER_FACTORY_PORT": str(server.getsockname()[1]),
           "PYTHON_WORKER_FACTORY_SECRET": SECRET, "GO_FILE": str(tmp_path / "go")}
    env.pop("PYTHON_WORKER_FACTORY_SOCK_PATH", None)
    return server, env


def _accept_and_auth(server, reply: bytes = b"ok"):
    conn, _ = server.accept()
    conn.settimeout(60)
    conn_file = conn.makefile("rwb")
    (length,) = struct.unpack("!i", _read_exact(conn_file, 4))
    secret = _read_exact(conn_file, length)
    conn_file.write(struct.pack("!i", len(reply)) + reply)
    conn_file.flush()
    return conn, conn_file, secret


def test_the_launcher_connects_back_before_the_modules_imports_then_runs_it(tmp_path):
    server, env = _fake_jvm(tmp_path)
    worker = subprocess.Popen([sys.executable, str(PYWORKER), "-m", "slowworker"], cwd=tmp_path, env=env)
    try:
        conn, conn_file, secret = _accept_and_auth(server)
        assert secret == SECRET.encode()
        (pid,) = struct.unpack("!i", _read_exact(conn_file, 4))
        assert pid == worker.pid
        assert not (tmp_path / "go").exists()  # connected while the module is still importing
        (tmp_path / "go").touch()
        conn_file.write(struct.pack("!i", 21))
        conn_file.flush()
        assert struct.unpack("!i", _read_exact(conn_file, 4)) == (42,)
        assert worker.wait(timeout=60) == 0
    finally:
        worker.kill()
        server.close()


def test_a_refused_secret_ends_the_launcher_with_an_error(tmp_path):
    server, env = _fake_jvm(tmp_path)
    worker = subprocess.Popen([sys.executable, str(PYWORKER), "-m", "slowworker"], cwd=tmp_path, env=env,
                              stderr=subprocess.PIPE, text=True)
    try:
        _accept_and_auth(server, reply=b"err")
        _, err = worker.communicate(timeout=60)
        assert worker.returncode != 0
        assert "ConnectionError: the JVM refused the Python worker's secret" in err
    finally:
        worker.kill()
        server.close()


@pytest.mark.parametrize("argv, module", [
    (["-m", "pyspark.sql.worker.plan_data_source_read"], "pyspark.sql.worker.plan_data_source_read"),
    (["-m", "pyspark.worker"], "pyspark.worker"),
    (["-m", "pyspark.daemon"], None),  # the daemon answers on its standard output: started unchanged
    (["-c", "print(1)"], None),
    (["-m"], None),
    (["-m", "pyspark.worker", "extra"], None),
])
def test_which_command_lines_the_launcher_connects_back_for(argv, module):
    assert worker_module(argv) == module


def test_the_written_launcher_hands_any_other_command_to_the_interpreter(tmp_path):
    launcher = python_worker_launcher(tmp_path / "work dir", sys.executable)
    assert os.access(launcher, os.X_OK)
    out = subprocess.run([str(launcher), "-c", "import sys; print(sys.argv[1:], sys.executable)", "a b"],
                         capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["['a", "b']", sys.executable]
    assert python_worker_launcher(tmp_path / "work dir", sys.executable) == launcher  # rewritten in place
