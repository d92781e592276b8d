"""``python -m sparkclient snapshot --url``: live mode against a Spark UI, played by a local HTTP
server on 127.0.0.1 that answers ``/api/v1`` with the Spark 4.3.0 captures (no Spark needed)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.capture_paths import SPARK_4_3_0
from tests.fakespark import APP, fake_spark_ui
from tests.repo import ROOT


@pytest.fixture
def spark_ui():
    """The fake Spark UI's root URL and the list of paths it was asked for."""
    with fake_spark_ui() as ui:
        yield ui.url, ui.requested


def snapshot(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sparkclient", "snapshot", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=False)


def test_url_mode_reads_the_rest_api_and_prints_the_same_topology_as_the_captures(spark_ui):
    url, requested = spark_ui
    # The captures are days old and live mode's window ends now: a window reaching back to them.
    live = snapshot("--url", url, "--query", "ds2q", "--window-s", "1e9", "--timeout-s", "10")
    assert live.returncode == 0, live.stderr
    assert {f"/api/v1/applications/{APP}/jobs", f"/api/v1/applications/{APP}/stages",
            f"/api/v1/applications/{APP}/executors"} <= set(requested)
    assert "no published progress; batches rebuilt from /jobs" in live.stderr
    # The SQL execution is not served: the vertex names fall back, and the note says why.
    assert "vertex names fall back" in live.stderr and "HTTP 404" in live.stderr
    offline = snapshot("--captures", str(SPARK_4_3_0))
    assert offline.returncode == 0, offline.stderr
    live_doc, offline_doc = json.loads(live.stdout), json.loads(offline.stdout)
    assert live_doc["mode"] == "micro-batch" and live_doc["steps"]
    shape = lambda doc: ([(v["id"], v["parallelism"], v.get("source", False)) for v in doc["vertices"]],  # noqa: E731
                         doc["edges"], doc["cluster"]["executors"], doc["cluster"]["cores_per_executor"])
    assert shape(live_doc) == shape(offline_doc)


def test_url_mode_output_pipes_into_scaling_evaluate(spark_ui):
    url, _ = spark_ui
    live = snapshot("--url", url, "--query", "ds2q", "--window-s", "1e9", "--timeout-s", "10")
    assert live.returncode == 0, live.stderr
    evaluated = subprocess.run([sys.executable, "-m", "scaling", "evaluate", "-"], input=live.stdout, cwd=ROOT,
                               capture_output=True, text=True, timeout=120, check=False)
    assert evaluated.returncode == 0, evaluated.stderr


def test_url_mode_names_an_unknown_query_and_exits_1(spark_ui):
    url, _ = spark_ui
    done = snapshot("--url", url, "--query", "no-such-query", "--timeout-s", "10")
    assert done.returncode == 1 and done.stdout == ""
    assert "no-such-query" in done.stderr and APP in done.stderr


def test_url_mode_reports_an_unreachable_spark_and_exits_1(spark_ui):
    url, _ = spark_ui
    done = snapshot("--url", url + "/not-a-spark-ui", "--query", "ds2q", "--timeout-s", "5")
    assert done.returncode == 1 and done.stdout == ""
    assert "404" in done.stderr and "Traceback" not in done.stderr
