#!/usr/bin/env python3
"""Check the docstrings of a package: none over 12 lines, few longer than what they document.

Usage: ``python scripts/docstrings.py scaling``. Reads every ``.py`` file under the package with
``ast`` and lists (a) each module, class or function docstring over ``MAX_LINES`` lines and (b) each
of more than ``SHORT_LINES`` lines that is longer than its body, then both counts. Exit status 1 when
(a) > 0 or (b) > ``MAX_LONGER``.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

MAX_LINES = 12
SHORT_LINES = 3
MAX_LONGER = 10

Documented = ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True)
class Docstring:
    """One docstring: where it is, what it documents, its length and its body's, in source lines."""

    path: Path
    line: int
    name: str
    lines: int
    body_lines: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.name}: {self.lines} lines, body {self.body_lines}"


@dataclass(frozen=True)
class Report:
    """The two lists: docstrings over ``MAX_LINES`` lines, and those over ``SHORT_LINES`` longer than their body."""

    too_long: tuple[Docstring, ...]
    longer_than_body: tuple[Docstring, ...]

    @property
    def ok(self) -> bool:
        return not self.too_long and len(self.longer_than_body) <= MAX_LONGER


def _documented(tree: ast.Module) -> list[tuple[str, Documented]]:
    """The module and every class and function in it, nested ones included, with qualified names."""
    found: list[tuple[str, Documented]] = [("<module>", tree)]

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                found.append((name, child))
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return found


def _docstring(path: Path, name: str, node: Documented) -> Docstring | None:
    """The node's docstring with its length and its body's: the source lines from the first statement
    after the docstring to the node's end (for a module, to its last statement's end); None without one."""
    if ast.get_docstring(node, clean=False) is None:
        return None
    doc, rest = node.body[0], node.body[1:]
    lines = doc.end_lineno - doc.lineno + 1
    if not rest:
        return Docstring(path, doc.lineno, name, lines, 0)
    end = rest[-1].end_lineno if isinstance(node, ast.Module) else node.end_lineno
    return Docstring(path, doc.lineno, name, lines, end - rest[0].lineno + 1)


def docstrings(package: Path) -> list[Docstring]:
    """Every module, class and function docstring in the ``.py`` files under ``package``, in file order."""
    found = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        found.extend(d for name, node in _documented(tree) if (d := _docstring(path, name, node)))
    return found


def check(package: Path) -> Report:
    """The docstrings under ``package`` over ``MAX_LINES`` lines, and those over ``SHORT_LINES`` lines
    longer than their body."""
    found = docstrings(package)
    return Report(
        too_long=tuple(d for d in found if d.lines > MAX_LINES),
        longer_than_body=tuple(d for d in found if d.lines > SHORT_LINES and d.lines > d.body_lines),
    )


def main(package: str) -> int:
    report = check(Path(package))
    for d in report.too_long:
        print(f"over {MAX_LINES} lines: {d}")
    for d in report.longer_than_body:
        print(f"longer than its body: {d}")
    print(f"(a) docstrings over {MAX_LINES} lines: {len(report.too_long)}")
    print(f"(b) docstrings over {SHORT_LINES} lines longer than their body: {len(report.longer_than_body)}"
          f" (at most {MAX_LONGER})")
    return 0 if report.ok else 1


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: docstrings.py PACKAGE", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
