"""The Python-worker launcher: on a local master Spark starts its Python workers through this file.

``python pyworker.py -m <module> ...`` connects back to the JVM, authenticates and sends its process id
(pyspark's ``get_sock_file_to_executor`` protocol) with the standard library only, *then* imports the
worker module and runs it as ``__main__`` on that connection: Spark waits only 10 s for a simple worker
to connect back, less than pyspark's imports take on a busy host (docs/ARCHITECTURE.md, "Spark's Python
workers on a busy host"). The worker daemon and any other invocation run unchanged (:func:`main`).
Standard library only, run as a file: nothing of ``sparkclient`` is imported.
"""

from __future__ import annotations

import contextlib
import os
import runpy
import socket
import struct
import sys

#: Modules started unchanged: the worker daemon answers Spark on its standard output, not a socket.
PASS_THROUGH = frozenset({"pyspark.daemon"})
#: The environment of Spark's connect-back protocol (``pyspark.worker_util.get_sock_file_to_executor``).
PORT_ENV, SECRET_ENV, SOCK_PATH_ENV = "PYTHON_WORKER_FACTORY_PORT", "PYTHON_WORKER_FACTORY_SECRET", \
    "PYTHON_WORKER_FACTORY_SOCK_PATH"


def worker_module(argv: list[str]) -> str | None:
    """The module of a simple-worker command line ``["-m", module]`` that this launcher connects
    back for, else None (anything else, or a module of :data:`PASS_THROUGH`)."""
    if len(argv) == 2 and argv[0] == "-m" and argv[1] not in PASS_THROUGH:
        return argv[1]
    return None


def connect_back(environ: os._Environ | dict[str, str]) -> tuple[socket.socket, object]:
    """Connect to the JVM at ``127.0.0.1:$PYTHON_WORKER_FACTORY_PORT`` (``::1`` with
    ``SPARK_PREFER_IPV6=true``), authenticate with ``$PYTHON_WORKER_FACTORY_SECRET`` and send this
    process's id: pyspark's ``local_connect_and_auth`` and ``get_sock_file_to_executor`` (Spark 4.x).

    Returns:
        The socket (its timeout ``$SPARK_AUTH_SOCKET_TIMEOUT`` s, default 15) and its buffered
        read-write file (``$SPARK_BUFFER_SIZE`` bytes, default 65,536).

    Raises:
        OSError: no connection; ConnectionError: the JVM refused the secret.
    """
    host = "::1" if environ.get("SPARK_PREFER_IPV6", "false").lower() == "true" else "127.0.0.1"
    sock = socket.create_connection((host, int(environ[PORT_ENV])),
                                    timeout=int(environ.get("SPARK_AUTH_SOCKET_TIMEOUT", 15)))
    sock_file = sock.makefile("rwb", int(environ.get("SPARK_BUFFER_SIZE", 65536)))
    secret = environ[SECRET_ENV].encode("utf-8")
    sock_file.write(struct.pack("!i", len(secret)) + secret)
    sock_file.flush()
    (length,) = struct.unpack("!i", sock_file.read(4))
    if sock_file.read(length) != b"ok":
        sock.close()
        raise ConnectionError("the JVM refused the Python worker's secret")
    sock_file.write(struct.pack("!i", os.getpid()))
    sock_file.flush()
    return sock, sock_file


def run_connected(module: str, sock: socket.socket, sock_file: object) -> None:
    """Run ``module`` as ``__main__`` with pyspark's ``get_sock_file_to_executor`` answering the
    connection already made (its ``timeout`` argument applied as pyspark applies it)."""
    import pyspark.worker_util  # noqa: PLC0415 - the slow import this launcher defers past the connect-back

    @contextlib.contextmanager
    def connected(timeout: int | None = -1):
        if timeout is None or timeout > 0:
            sock.settimeout(timeout)
        try:
            yield sock_file
        finally:
            sock_file.close()

    pyspark.worker_util.get_sock_file_to_executor = connected
    runpy.run_module(module, run_name="__main__", alter_sys=True)


def main(argv: list[str]) -> None:
    """Connect back and run the worker module of ``argv`` (:func:`worker_module`) when Spark asked for
    a TCP connect-back; otherwise replace this process with ``python <argv>``."""
    module = worker_module(argv)
    if module is None or SOCK_PATH_ENV in os.environ or PORT_ENV not in os.environ or SECRET_ENV not in os.environ:
        os.execv(sys.executable, [sys.executable, *argv])
    sys.path[0] = os.getcwd()  # as ``python -m`` has it, not this file's directory
    sock, sock_file = connect_back(os.environ)
    run_connected(module, sock, sock_file)


if __name__ == "__main__":
    main(sys.argv[1:])
