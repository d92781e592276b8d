"""A fake Spark UI for tests: a local HTTP server on 127.0.0.1 that answers ``/api/v1`` with the
recorded Spark 4.3.0 captures (``tests/fixtures/spark-4.3.0``). No Spark needed."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.capture_paths import SPARK_4_3_0

#: The captured application's id and streaming run id.
APP = json.loads((SPARK_4_3_0 / "p1_applications.json").read_text())[0]["id"]
RUN_ID = json.loads((SPARK_4_3_0 / "p1_recentProgress.json").read_text())[-1]["runId"]
ROUTES = {"/api/v1/applications": "p1_applications.json",
          f"/api/v1/applications/{APP}/jobs": "p1_app_jobs.json",
          f"/api/v1/applications/{APP}/stages": "p1_app_stages.json",
          f"/api/v1/applications/{APP}/executors": "p1_app_executors.json"}


@dataclass
class FakeSparkUI:
    """``url``: the UI root; ``requested``: the paths asked for; ``override``: path -> (status, body)
    answered instead of the capture (e.g. a 500 or a non-JSON body)."""

    url: str = ""
    requested: list[str] = field(default_factory=list)
    override: dict[str, tuple[int, bytes]] = field(default_factory=dict)


@contextmanager
def fake_spark_ui() -> Iterator[FakeSparkUI]:
    """Serve the captures until the block ends; unknown paths get a JSON 404."""
    ui = FakeSparkUI()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            path = self.path.split("?")[0].rstrip("/")
            ui.requested.append(path)
            if path in ui.override:
                status, body = ui.override[path]
            elif path in ROUTES:
                status, body = 200, (SPARK_4_3_0 / ROUTES[path]).read_bytes()
            else:
                status, body = 404, b'{"message": "no such resource"}'
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):  # keep the test output quiet
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    ui.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield ui
    finally:
        server.shutdown()
        server.server_close()
