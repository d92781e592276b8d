#!/usr/bin/env python3
"""CI guard: the browser tests must have run and passed, never been skipped.

Reads a pytest JUnit XML report and fails when it has no test from ``tests/browser``, or when any
of them was skipped or did not pass. Usage: ``check-browser-tests.py test-artifacts/junit.xml``.
"""

import sys
import xml.etree.ElementTree as ET


def main(path: str) -> int:
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as exc:
        print(f"browser tests: no readable JUnit report at {path}: {exc}", file=sys.stderr)
        return 1
    cases = [c for c in root.iter("testcase") if c.get("classname", "").startswith("tests.browser.")]
    bad = [(c.get("name"), child.tag) for c in cases for child in c if child.tag in ("skipped", "failure", "error")]
    if not cases:
        print("browser tests: none ran (tests/browser was not collected or was deselected)", file=sys.stderr)
        return 1
    if bad:
        for name, outcome in bad:
            print(f"browser tests: {name} {outcome}", file=sys.stderr)
        return 1
    print(f"browser tests: {len(cases)} passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "test-artifacts/junit.xml"))
