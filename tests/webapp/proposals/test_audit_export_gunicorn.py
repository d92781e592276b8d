"""The audit export through the production server: gunicorn started as a process with docker-compose.yml's
command line (bound to a free port on loopback) on the test database, with the production settings
(``DEBUG`` off) over plain HTTP.

An export of 200,000 events arrives whole, with its count, to a client that stops reading for longer than
gunicorn's worker timeout (shortened from compose's 60 s to :data:`TIMEOUT_S`, so the test need not wait a
minute); and a stream cut by killing the workers still answers ``200``, over HTTP/1.0 ends like a complete
one, and lacks the count. Figures are printed (``pytest -s``); nothing asserts a duration."""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
import sys
import time

import httpx
import psutil
import pytest
import yaml
from django.db import connection

from sparkclient.demo.processes import wait_http
from sparkclient.demo.redisproc import free_port
from sparkclient.runner.procgroup import end_process_group
from tests.repo import ROOT
from tests.webapp.factories import make_audit_trail, make_job, make_user, read_audit_export

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.timeout(900)]

EVENTS = 200_000
#: gunicorn's worker timeout in the first test, seconds; the client pauses longer than that mid-stream.
TIMEOUT_S = 5
PAUSE_S = TIMEOUT_S + 4
#: Events of the cut export: its CSV (5 MB) is larger than the most a killed worker's socket can still hold
#: and deliver (Linux's largest autotuned send buffer, net.ipv4.tcp_wmem, 4 MiB), so the cut is always short.
CUT_EVENTS = 40_000


def compose_web_argv(port: int, timeout_s: int | None = None) -> list[str]:
    """The web service's command of docker-compose.yml, bound to ``127.0.0.1:port`` (and with
    ``--timeout timeout_s`` when given), run by this interpreter."""
    argv = shlex.split(yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["web"]["command"])
    assert argv[0] == "gunicorn" and argv[argv.index("--bind") + 1] == "0.0.0.0:8000"
    argv[argv.index("--bind") + 1] = f"127.0.0.1:{port}"
    if timeout_s is not None:
        argv[argv.index("--timeout") + 1] = str(timeout_s)
    return [sys.executable, "-m", *argv]


@pytest.fixture
def start_gunicorn(tmp_path, settings):
    """Start gunicorn (:func:`compose_web_argv`) on the test database, as the production settings run
    it over plain HTTP; returns ``(process, port)``. Stops it (its process group) afterwards."""
    started = []
    base = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "SPARKSCALER_VAR_DIR") if k in os.environ}
    env = {**base, "DJANGO_SETTINGS_MODULE": "webapp.settings", "DEBUG": "false",
           "SECRET_KEY": settings.SECRET_KEY,  # the test's sessions are signed with it
           "DATABASE_URL": f"sqlite:///{connection.settings_dict['NAME']}", "ALLOWED_HOSTS": "127.0.0.1",
           "SECURE_SSL_REDIRECT": "false", "SECURE_HSTS_SECONDS": "0", "SESSION_COOKIE_SECURE": "false",
           "CSRF_COOKIE_SECURE": "false"}

    def start(timeout_s: int | None = None) -> tuple[subprocess.Popen, int]:
        port = free_port()
        with (tmp_path / "gunicorn.log").open("ab") as log:
            process = subprocess.Popen(compose_web_argv(port, timeout_s), cwd=ROOT, env=env, stdout=log,
                                       stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        started.append(process)
        try:
            wait_http(f"http://127.0.0.1:{port}/accounts/login/", timeout_s=120, process=process)
        except RuntimeError as exc:
            raise AssertionError(f"{exc}:\n{(tmp_path / 'gunicorn.log').read_text()[-3000:]}") from None
        return process, port

    yield start
    for process in started:
        end_process_group(process.pid, term_wait_s=30, what="gunicorn")
        process.wait(timeout=10)


def _session_cookie(client, settings) -> dict[str, str]:
    client.force_login(make_user("vera", role="viewer"))  # committed: the test is transactional
    return {settings.SESSION_COOKIE_NAME: client.cookies[settings.SESSION_COOKIE_NAME].value}


def test_an_export_of_200000_events_outlives_the_worker_timeout_and_arrives_whole(client, settings,
                                                                                  start_gunicorn):
    job = make_job()
    make_audit_trail(job, EVENTS)
    cookies = _session_cookie(client, settings)
    _process, port = start_gunicorn(timeout_s=TIMEOUT_S)
    for fmt in ("csv", "json"):
        started = time.monotonic()
        with httpx.stream("GET", f"http://127.0.0.1:{port}/audit/jobs/{job.pk}.{fmt}", cookies=cookies,
                          timeout=120) as response:
            assert response.status_code == 200
            chunks = response.iter_bytes()
            body = [next(chunks)]
            time.sleep(PAUSE_S)  # the socket's buffers fill; the worker waits to write
            body += list(chunks)  # raises on an incomplete chunked body
        body = b"".join(body)
        seconds = time.monotonic() - started
        print(f"\n{fmt}: {EVENTS} events, {len(body) / 1e6:.1f} MB in {seconds:.1f} s "
              f"(a pause of {PAUSE_S} s included)")
        rows, count = read_audit_export(body.decode(), fmt)
        assert count == EVENTS and len(rows) == EVENTS
        ids = [int(row["id"]) for row in rows]
        assert ids == sorted(set(ids))


def _get_http10(port: int, path: str, cookies: dict[str, str], *, cut_after: int | None = None,
                cut=None) -> tuple[str, bytes]:
    """GET ``path`` over HTTP/1.0 (the end of the body is the end of the connection); with ``cut_after``,
    through a small receive buffer, and ``cut()`` is called once that many bytes arrived. Returns the
    status line and the body."""
    with socket.socket() as sock:
        if cut_after is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)  # before connect: the window
        sock.settimeout(60)
        sock.connect(("127.0.0.1", port))
        cookie = "; ".join(f"{k}={v}" for k, v in cookies.items())
        sock.sendall(f"GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nCookie: {cookie}\r\n\r\n".encode())
        received = bytearray()
        while chunk := sock.recv(65536):
            received += chunk
            if cut_after is not None and len(received) >= cut_after:
                cut()
                cut_after = None
    head, _, body = bytes(received).partition(b"\r\n\r\n")
    return head.split(b"\r\n")[0].decode(), body


def _kill_workers(master: subprocess.Popen) -> None:
    for worker in psutil.Process(master.pid).children():
        worker.kill()


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_a_stream_cut_mid_way_answers_200_and_lacks_the_count(client, settings, start_gunicorn, fmt):
    job = make_job()
    make_audit_trail(job, CUT_EVENTS)
    cookies = _session_cookie(client, settings)
    master, port = start_gunicorn()
    path = f"/audit/jobs/{job.pk}.{fmt}"
    status, cut = _get_http10(port, path, cookies, cut_after=64 * 1024, cut=lambda: _kill_workers(master))
    assert status.split()[1] == "200"  # the status went out with the first bytes: it looks successful
    assert read_audit_export(cut.decode(errors="replace"), fmt)[1] is None
    # The workers come back; a whole export is longer than what the cut stream carried, and ends with its count.
    wait_http(f"http://127.0.0.1:{port}/accounts/login/", timeout_s=60, process=master)
    status, whole = _get_http10(port, path, cookies)
    assert status.split()[1] == "200" and read_audit_export(whole.decode(), fmt)[1] == CUT_EVENTS
    print(f"\n{fmt}: cut after {len(cut) / 1e6:.2f} MB of {len(whole) / 1e6:.2f} MB")
    assert len(cut) < len(whole) and whole.startswith(cut)
