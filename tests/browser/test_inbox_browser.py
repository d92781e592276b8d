"""The inbox lists each waiting item and links to it, in Chromium
(screenshot: ``test-artifacts/inbox.png``)."""

from __future__ import annotations

import re

import pytest

from tests.browser.conftest import screenshot
from tests.browser.test_dashboard_browser import login
from tests.webapp.factories import make_user
from tests.webapp.inbox.factories import make_every_kind

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]


def test_the_inbox_lists_each_waiting_item_and_links_to_it(page):
    make_user("operator")
    expected = make_every_kind()
    login(page)
    assert page.locator("#inbox-count").inner_text() == str(len(expected))
    page.click("#nav-inbox")
    page.wait_for_url(re.compile(r"/inbox/$"))
    page.wait_for_selector("#inbox")
    screenshot(page, "inbox")
    rows = page.locator("#inbox tbody tr")
    assert rows.count() == len(expected)
    for kind, (job, path) in expected.items():
        row = page.locator(f"#inbox tr[data-kind='{kind}']")
        assert row.count() == 1, kind
        assert row.get_attribute("data-job") == job.name
        assert row.locator("td").nth(3).inner_text().strip(), kind  # the item in words
        assert row.locator("a.inbox-link").get_attribute("href") == path
    for kind, (job, path) in expected.items():
        page.goto("/inbox/")
        with page.expect_navigation():
            page.locator(f"#inbox tr[data-kind='{kind}'] a.inbox-link").click()
        assert page.url.endswith(path), (kind, page.url)
        assert job.name in page.locator("main").inner_text(), kind
    assert page.problems == [], page.problems
