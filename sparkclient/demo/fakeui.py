"""Fake Spark UIs: HTTP servers on 127.0.0.1 that answer ``/api/v1`` from recorded captures, one port
per UI, all served by one thread (no Spark needed).

- :func:`capture_answer`: the captures as recorded (``tests/fixtures/spark-4.3.0``), for the tests.
- :func:`replay_answer`: a :class:`sparkclient.demo.replay.Replay` of them in the present, for the
  fleet benchmark (``sparkclient.demo.fakefleet``).

A job's registered Spark UI is an origin without a path (``webapp.jobs.sparkui``), so each UI has a
port of its own.
"""

from __future__ import annotations

import json
import selectors
import threading
import time
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from sparkclient.demo.replay import CAPTURE_DIR, Capture, Replay

#: ``(ui index, path without query and trailing slash, query) -> (HTTP status, JSON body)``.
Answer = Callable[[int, str, dict[str, list[str]]], tuple[int, bytes]]

NOT_FOUND = (404, b'{"message": "no such resource"}')


def capture_routes(directory: Path = CAPTURE_DIR) -> dict[str, Path]:
    """``path -> capture file`` of the application, jobs, stages and executors lists as recorded."""
    app = Capture.load(directory).app_id
    return {"/api/v1/applications": directory / "p1_applications.json",
            f"/api/v1/applications/{app}/jobs": directory / "p1_app_jobs.json",
            f"/api/v1/applications/{app}/stages": directory / "p1_app_stages.json",
            f"/api/v1/applications/{app}/executors": directory / "p1_app_executors.json"}


def capture_answer(directory: Path = CAPTURE_DIR) -> Answer:
    """Answer the :func:`capture_routes` with the recorded files; anything else is a JSON 404."""
    routes = capture_routes(directory)

    def answer(_index: int, path: str, _query: dict[str, list[str]]) -> tuple[int, bytes]:
        return (200, routes[path].read_bytes()) if path in routes else NOT_FOUND

    return answer


def replay_answer(replay: Replay, clock: Callable[[], float] = time.time) -> Answer:
    """Answer as a driver running ``replay`` would at ``clock()``: the application and executors as
    recorded, the jobs and stages of the batches completed so far, each visible batch's SQL execution
    and its stages' ``taskSummary``; anything else is a JSON 404."""
    capture = replay.capture
    base = f"/api/v1/applications/{capture.app_id}"
    static = {"/api/v1/applications": json_bytes(capture.applications),
              f"{base}/executors": json_bytes(capture.executors)}

    found: dict[str, bytes] = {}  # SQL executions and task summaries, the same bytes for every job

    def answer(_index: int, path: str, query: dict[str, list[str]]) -> tuple[int, bytes]:
        if path in static:
            return 200, static[path]
        key = f"{path}?{sorted(query.items())}"
        if key in found:
            return 200, found[key]
        if path in (f"{base}/jobs", f"{base}/stages"):
            return 200, replay.body(path.rsplit("/", 1)[1], clock())
        parts = path[len(base) + 1:].split("/") if path.startswith(base + "/") else []
        try:
            if len(parts) == 2 and parts[0] == "sql":
                doc = replay.sql(int(parts[1]), clock())
            elif len(parts) == 4 and parts[0] == "stages" and parts[3] == "taskSummary":
                wanted = [float(q) for q in ",".join(query.get("quantiles", ["0.05,0.25,0.5,0.75,0.95"])).split(",")]
                doc = replay.task_summary(int(parts[1]), wanted, clock())
            else:
                doc = None
        except ValueError:
            return 400, b'{"message": "malformed id or quantile"}'
        if doc is None:
            return NOT_FOUND
        if len(found) > 512:
            found.clear()
        found[key] = json_bytes(doc)
        return 200, found[key]

    return answer


def json_bytes(value: object) -> bytes:
    return json.dumps(value).encode()


class _Handler(BaseHTTPRequestHandler):
    server: _UiServer

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        parts = urlsplit(self.path)
        path = parts.path.rstrip("/")
        if self.server.owner.record:
            self.server.owner.requested.append(path)
        self.server.owner.counts[self.server.index] += 1
        status, body = self.server.owner.answer(self.server.index, path, parse_qs(parts.query))
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:  # quiet
        pass


class _UiServer(HTTPServer):
    def __init__(self, owner: FakeUis, index: int) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.owner, self.index = owner, index


class FakeUis:
    """``count`` fake Spark UIs on free ports of 127.0.0.1, answered by ``answer`` in one thread.

    ``urls[i]`` is UI ``i``'s root (``http://127.0.0.1:PORT``); ``requested`` lists the paths asked
    for (all UIs) when ``record``, ``counts[i]`` how many requests UI ``i`` answered. Requests are
    answered one at a time, in the order they arrive.
    """

    def __init__(self, count: int, answer: Answer, *, record: bool = True) -> None:
        self.answer, self.record = answer, record
        self.requested: list[str] = []
        self.counts: Counter[int] = Counter()
        self._servers = [_UiServer(self, i) for i in range(count)]
        self.urls = [f"http://127.0.0.1:{s.server_address[1]}" for s in self._servers]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="fake-spark-uis", daemon=True)

    def _serve(self) -> None:
        with selectors.DefaultSelector() as selector:
            for server in self._servers:
                selector.register(server, selectors.EVENT_READ)
            while not self._stop.is_set():
                for key, _events in selector.select(timeout=0.2):
                    key.fileobj.handle_request()

    def start(self) -> FakeUis:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        for server in self._servers:
            server.server_close()
