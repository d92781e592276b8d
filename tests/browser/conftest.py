"""Browser tests: Playwright driving Debian's Chromium, headless, against pytest-django's live server.

They fail, never skip, when Chromium or Playwright is missing: ``.ci/run`` must not pass without them.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
import redis

from tests.repo import ROOT
from tests.webapp.fakerunner import FakeRunner

# Playwright's sync API runs an event loop in the test's thread; the ORM calls of the test itself
# (creating data, reading results) are still synchronous and safe.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage"]
ARTIFACTS = Path(os.environ.get("TEST_ARTIFACTS", ROOT / "test-artifacts"))


#: What the width watch logs to the console when a page is wider than its window.
TOO_WIDE = "page wider than the window:"
#: Installed in every page of a watched context (:func:`watch_width`): after the page's load and 300 ms
#: after each change of it (a live refresh, a chart drawn), log :data:`TOO_WIDE` with the page's width,
#: the window's and the innermost elements that end past the window's right edge, once per page and width.
WIDTH_WATCH_JS = """(() => {
  const said = new Set();
  let timer = null;
  const name = (el) => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
    (el.classList.length ? '.' + [...el.classList].join('.') : '');
  function check() {
    const doc = document.documentElement;
    if (!doc || !document.body || doc.scrollWidth <= window.innerWidth) return;
    const key = location.pathname + ' ' + doc.scrollWidth;
    if (said.has(key)) return;
    said.add(key);
    const past = [...document.body.querySelectorAll('*')].filter(el => el.getBoundingClientRect().right >
      window.innerWidth + 1 && ![...el.children].some(c => c.getBoundingClientRect().right > window.innerWidth + 1));
    console.log(`${TOO_WIDE} ${location.pathname}${location.search} is ${doc.scrollWidth} px wide in a ` +
      `${window.innerWidth} px window; past its edge: ` +
      past.slice(0, 5).map(el => `${name(el)} "${el.textContent.trim().slice(0, 80)}"`).join('; '));
  }
  const later = () => { clearTimeout(timer); timer = setTimeout(check, 300); };
  window.addEventListener('load', () => {
    if (!document.body) return;  // not an HTML page (the favicon's SVG document)
    check();
    new MutationObserver(later).observe(document.body, {childList: true, subtree: true, characterData: true});
  });
})();""".replace("${TOO_WIDE}", TOO_WIDE)


def watch_width(context) -> list[str]:
    """Check every page of ``context`` for width (:data:`WIDTH_WATCH_JS`): returns the list each finding
    is appended to, a sentence naming the page, its width, the window's and what sticks out."""
    found: list[str] = []
    context.add_init_script(WIDTH_WATCH_JS)
    context.on("console", lambda msg: msg.text.startswith(TOO_WIDE) and found.append(msg.text))
    return found


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/browser/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def chromium():
    """A headless Debian Chromium driven by Playwright (one per session)."""
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        pytest.fail(f"Chromium is missing at {CHROMIUM}: install the Debian package `chromium` "
                    f"(`make system-deps` does); browser tests never skip", pytrace=False)
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:  # pragma: no cover
        pytest.fail(f"playwright is not installed ({exc}): pip install -e '.[test]'", pytrace=False)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(chromium, live_server):
    """A page in a 1,400 px window on the live server. No page it visits may be wider than its window, in
    any state the test builds (:func:`watch_width`, checked after the test)."""
    context = chromium.new_context(base_url=live_server.url, viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(15_000)
    too_wide = watch_width(context)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.js_errors = errors
    # No console error, page error or failed request (favicon included) on any page.
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    page.on("console", lambda msg: msg.type == "error" and problems.append(f"console error: {msg.text}"))
    page.on("response", lambda r: r.status >= 400 and problems.append(f"HTTP {r.status}: {r.url}"))
    # A request the browser itself aborts (a poll in flight when the page navigates) is not a failure.
    page.on("requestfailed", lambda r: "ERR_ABORTED" not in (r.failure or "") and
            problems.append(f"request failed ({r.failure}): {r.url}"))
    page.problems = problems
    page.too_wide = too_wide
    yield page
    context.close()
    assert not too_wide, too_wide


def screenshot(page, name: str, *, also: Path | None = None) -> Path:
    """Save a full-page screenshot to the test artifacts, and to ``also`` (a committed file such as the
    README's screenshot) only when ``UPDATE_DOCS_SCREENSHOTS=1``, so a test run leaves the tree clean."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    if also is not None and os.environ.get("UPDATE_DOCS_SCREENSHOTS") == "1":
        also.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, also)
    return path


def _restarted(command: dict, index: int) -> dict:
    """Every rescale succeeds as a driver restart with a measured downtime, like ``sparkclient.runner.driver``."""
    return {"status": "succeeded", "path": "driver-restart", "downtime_s": 1.2, "error": ""}


@pytest.fixture
def worker(redis_server, celery_broker, live_server, settings, tmp_path):
    """A real Celery worker process on the test database and the session's Redis (the live server
    enqueues executions on it), and a fake runner answering the control channel."""
    from django.db import connection

    from sparkclient.demo.processes import ProcessGroup

    settings.REDIS_URL = redis_server.url
    redis.Redis.from_url(redis_server.url).flushdb()
    env = {**os.environ, "REDIS_URL": redis_server.url, "CELERY_BROKER_URL": redis_server.url,
           "CELERY_RESULT_BACKEND": redis_server.url, "DATABASE_URL": f"sqlite:///{connection.settings_dict['NAME']}",
           "PYTHONUNBUFFERED": "1", "SCALER_EXECUTION_TIMEOUT_S": "30",
           "SCALER_COLLECT_INTERVAL_S": "3600", "SCALER_RECONCILE_INTERVAL_S": "0.5"}
    group = ProcessGroup(log_dir=tmp_path / "logs", env=env)
    runners: list[FakeRunner] = []

    def runner_for(job: str) -> FakeRunner:
        runner = FakeRunner(redis_server.url, job, answer=_restarted, delay_s=1.5)
        runner.start()
        runners.append(runner)
        return runner

    # With its beat: an execution sends and returns, the reconcile beat records the runner's answer.
    group.start("celery", [sys.executable, "-m", "celery", "-A", "webapp", "worker", "-B", "-P", "threads", "-c", "2",
                           "--loglevel", "INFO", "--without-gossip", "--without-mingle", "--without-heartbeat",
                           "-s", str(tmp_path / "celerybeat-schedule")])
    try:
        yield runner_for
    finally:
        for runner in runners:
            runner.stop()
        group.stop()
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        for log in (tmp_path / "logs").glob("*.log"):
            shutil.copyfile(log, ARTIFACTS / f"browser-{log.name}")
