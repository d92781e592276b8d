"""A hostile Spark UI for tests: an HTTP server on 127.0.0.1 (a thread per connection) whose answers
are what a sick or hostile driver sends: a huge body (:func:`huge_body`), a body or headers that trickle
a byte a second (:func:`trickle_body`, :func:`trickle_headers`), a redirect (:func:`redirect`). Each
path of ``answers`` gets its answer; any other path a JSON 404."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

#: An answer: it writes to the handler's socket until done, the client gone, or ``stop`` set.
Answer = Callable[[BaseHTTPRequestHandler, threading.Event], None]
MiB = 1024 * 1024


@dataclass
class HostileSpark:
    """``url``: the UI root; ``answers``: path (``/api/v1/...``) -> its :data:`Answer`; ``requested``:
    the paths asked for, in order."""

    url: str = ""
    answers: dict[str, Answer] = field(default_factory=dict)
    requested: list[str] = field(default_factory=list)


def huge_body(total_bytes: int, *, declared: bool) -> Answer:
    """``total_bytes`` of JSON whitespace in 1 MiB writes, with a ``Content-Length`` when ``declared``
    (else ended by closing the connection)."""
    chunk = b" " * MiB

    def answer(handler: BaseHTTPRequestHandler, stop: threading.Event) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        if declared:
            handler.send_header("Content-Length", str(total_bytes))
        handler.end_headers()
        sent = 0
        while sent < total_bytes and not stop.is_set():
            handler.wfile.write(chunk[: total_bytes - sent])
            sent += len(chunk)

    return answer


def _trickle(handler: BaseHTTPRequestHandler, stop: threading.Event, text: bytes) -> None:
    """``text`` a byte a second, then a byte a second of whitespace until the client goes."""
    index = 0
    while not stop.is_set():
        handler.wfile.write(text[index:index + 1] if index < len(text) else b" ")
        handler.wfile.flush()
        index += 1
        stop.wait(1.0)


def trickle_body() -> Answer:
    """Headers at once, then a body of one byte a second that never ends."""
    def answer(handler: BaseHTTPRequestHandler, stop: threading.Event) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.end_headers()
        _trickle(handler, stop, b"[")

    return answer


def trickle_headers() -> Answer:
    """A status line and headers of one byte a second that never end."""
    def answer(handler: BaseHTTPRequestHandler, stop: threading.Event) -> None:
        _trickle(handler, stop, b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Slow: ")

    return answer


def redirect(location: str) -> Answer:
    """A ``302 Found`` to ``location``."""
    def answer(handler: BaseHTTPRequestHandler, stop: threading.Event) -> None:
        handler.send_response(302)
        handler.send_header("Location", location)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    return answer


@contextmanager
def hostile_spark() -> Iterator[HostileSpark]:
    """Serve ``answers`` until the block ends; then every answer still writing stops."""
    ui = HostileSpark()
    stop = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            path = self.path.split("?", 1)[0]
            ui.requested.append(path)
            answer = ui.answers.get(path)
            try:
                if answer is None:
                    self.send_response(404)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"{}")
                else:
                    answer(self, stop)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up: what it should do
                pass

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - http.server's name
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    ui.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield ui
    finally:
        stop.set()
        server.shutdown()
        server.server_close()
