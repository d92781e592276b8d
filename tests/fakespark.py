"""A fake Spark UI for tests: a local HTTP server on 127.0.0.1 that answers ``/api/v1`` with the
recorded Spark 4.3.0 captures (``tests/fixtures/spark-4.3.0``), served by
:class:`sparkclient.demo.fakeui.FakeUis`. No Spark needed."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from sparkclient.demo.fakeui import FakeUis, capture_answer
from sparkclient.demo.replay import Capture
from tests.capture_paths import SPARK_4_3_0

_CAPTURE = Capture.load(SPARK_4_3_0)
#: The captured application's id and streaming run id.
APP = _CAPTURE.app_id
RUN_ID = _CAPTURE.run_id


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
    recorded = capture_answer(SPARK_4_3_0)

    def answer(index: int, path: str, query: dict[str, list[str]]) -> tuple[int, bytes]:
        return ui.override[path] if path in ui.override else recorded(index, path, query)

    servers = FakeUis(1, answer).start()
    ui.url, ui.requested = servers.urls[0], servers.requested
    try:
        yield ui
    finally:
        servers.stop()
