"""``scripts/merge-junit.py``: `.ci/run` merges the JUnit reports of `make test`'s two phases, and the
browser check reads the merged report."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from tests.repo import ROOT


def script(name: str, *args: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / name), *map(str, args)], capture_output=True,
                          text=True, timeout=60, check=False)


def write_junit(path: Path, *cases: tuple[str, str]) -> Path:
    body = "".join(f'<testcase classname="{cls}" name="{name}" time="1.5"/>' for cls, name in cases)
    path.write_text(f'<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" '
                    f'tests="{len(cases)}">{body}</testsuite></testsuites>')
    return path


def test_the_merged_report_holds_every_test_of_both_phases_and_the_browser_check_reads_it(tmp_path):
    first = write_junit(tmp_path / "junit-1.xml", ("tests.scaling.test_a", "test_one"),
                        ("tests.webapp.test_b", "test_two"))
    second = write_junit(tmp_path / "junit-2.xml", ("tests.browser.test_c", "test_page"))
    merged = tmp_path / "junit.xml"

    done = script("merge-junit.py", merged, first, second)

    assert done.returncode == 0, done.stderr
    suites = ET.parse(merged).getroot().findall("testsuite")
    assert [[c.get("name") for c in s.iter("testcase")] for s in suites] == [["test_one", "test_two"], ["test_page"]]
    checked = script("check-browser-tests.py", merged)
    assert checked.returncode == 0 and "browser tests: 1 passed" in checked.stdout, checked.stderr


def test_a_phase_without_its_report_fails_the_merge_and_then_the_browser_check(tmp_path):
    first = write_junit(tmp_path / "junit-1.xml", ("tests.scaling.test_a", "test_one"))
    merged = tmp_path / "junit.xml"

    done = script("merge-junit.py", merged, first, tmp_path / "junit-2.xml")

    assert done.returncode == 1 and "junit-2.xml" in done.stderr
    assert [c.get("name") for c in ET.parse(merged).getroot().iter("testcase")] == ["test_one"]
    checked = script("check-browser-tests.py", merged)
    assert checked.returncode == 1 and "none ran" in checked.stderr
