"""``scripts/docstrings.py``: no docstring in ``scaling/`` over 12 lines, at most 10 of more than 3 lines
longer than their body."""

from __future__ import annotations

import importlib.util
import re
import sys

from tests.repo import ROOT

_spec = importlib.util.spec_from_file_location("docstrings", ROOT / "scripts" / "docstrings.py")
docstrings = importlib.util.module_from_spec(_spec)
sys.modules["docstrings"] = docstrings  # the script's dataclasses look their module up there
_spec.loader.exec_module(docstrings)


def _listing(found) -> str:
    return "\n".join(str(d) for d in found)


def test_no_scaling_docstring_is_over_12_lines_and_few_are_longer_than_their_body():
    report = docstrings.check(ROOT / "scaling")
    assert not report.too_long, f"docstrings over 12 lines:\n{_listing(report.too_long)}"
    assert len(report.longer_than_body) <= 10, (
        f"{len(report.longer_than_body)} docstrings longer than their body (at most 10):\n"
        f"{_listing(report.longer_than_body)}")


def _function(doc_lines: int, body_lines: int) -> str:
    doc = "\n".join(["    '''Line 1."] + [f"    line {i}." for i in range(2, doc_lines)] + ["    '''"])
    return "def f():\n" + doc + "\n" + "".join(f"    x{i} = {i}\n" for i in range(body_lines))


def test_the_check_counts_a_docstring_over_12_lines_and_one_longer_than_its_body(tmp_path):
    (tmp_path / "at_limit.py").write_text(_function(12, 12))
    (tmp_path / "over_limit.py").write_text(_function(13, 13))
    (tmp_path / "as_long_as_body.py").write_text(_function(5, 5))
    (tmp_path / "longer_than_body.py").write_text(_function(5, 4))
    (tmp_path / "short_and_longer.py").write_text(_function(3, 1))

    report = docstrings.check(tmp_path)

    assert [(d.path.name, d.lines) for d in report.too_long] == [("over_limit.py", 13)]
    assert [(d.path.name, d.name, d.lines, d.body_lines) for d in report.longer_than_body] == [
        ("longer_than_body.py", "f", 5, 4)]
    assert not report.ok  # one over 12 lines is one too many


def test_the_check_fails_past_10_docstrings_longer_than_their_body(tmp_path):
    for i in range(11):
        (tmp_path / f"m{i}.py").write_text(_function(5, 4))

    assert len(docstrings.check(tmp_path).longer_than_body) == 11
    assert not docstrings.check(tmp_path).ok
    (tmp_path / "m10.py").write_text(_function(5, 5))
    assert docstrings.check(tmp_path).ok


def test_every_pointer_from_scaling_to_the_architecture_doc_names_one_of_its_headings():
    headings = re.findall(r"^#+ (.+)$", (ROOT / "docs" / "ARCHITECTURE.md").read_text(), re.MULTILINE)
    pointers = {(path.relative_to(ROOT), " ".join(name.split())) for path in (ROOT / "scaling").rglob("*.py")
                for name in re.findall(r'ARCHITECTURE\.md,\s+"([^"]+)"', path.read_text())}
    assert len(pointers) > 5
    dangling = sorted((str(path), name) for path, name in pointers
                      if not any(h.startswith(name) for h in headings))
    assert not dangling, f"pointers to docs/ARCHITECTURE.md headings that do not exist: {dangling}"
