"""ARCHITECTURE.md: arrows point one way. ``scaling`` imports no Django, Celery, Spark or HTTP
library; ``sparkclient`` imports no Django."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = {
    "scaling": {"django", "celery", "pyspark", "py4j", "httpx", "requests", "urllib3", "redis", "rest_framework",
                "webapp", "sparkclient"},
    "sparkclient": {"django", "rest_framework", "celery", "webapp"},
}


def imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_stay_in_their_layer(package):
    files = sorted((ROOT / package).rglob("*.py"))
    assert files, f"no Python files under {package}/"
    offending = {str(f.relative_to(ROOT)): sorted(imported_roots(f) & FORBIDDEN[package]) for f in files}
    assert {f: names for f, names in offending.items() if names} == {}
