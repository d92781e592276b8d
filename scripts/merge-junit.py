#!/usr/bin/env python3
"""CI: merge the JUnit reports of `make test`'s two phases into one report.

Usage: ``merge-junit.py OUT IN [IN ...]``. Writes ``OUT`` as one ``<testsuites>`` holding every
``<testsuite>`` of the inputs, in order, so that one file lists every test with its time. An input
that is missing or unreadable (its phase did not run) is named on stderr, left out, and makes the
exit status 1; ``OUT`` is written from the others all the same.
"""

import sys
import xml.etree.ElementTree as ET


def main(out: str, inputs: list[str]) -> int:
    merged = ET.Element("testsuites")
    status = 0
    for path in inputs:
        try:
            root = ET.parse(path).getroot()
        except (OSError, ET.ParseError) as exc:
            print(f"merge-junit: no readable JUnit report at {path}: {exc}", file=sys.stderr)
            status = 1
            continue
        merged.extend([root] if root.tag == "testsuite" else list(root.iter("testsuite")))
    ET.ElementTree(merged).write(out, encoding="utf-8", xml_declaration=True)
    return status


if __name__ == "__main__":
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2:]))
