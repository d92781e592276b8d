"""The tests mirror the code's rooms: a test module of ``scaling/``, ``sparkclient/`` or ``webapp/`` sits in
``tests/<package>/<room>/``, a package named after a room of that package. Shared set-up lives in one
place: no function is defined at module level in three or more modules under ``tests/``."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from tests.repo import ROOT

#: The packages whose rooms the tests mirror.
PACKAGES = ("scaling", "sparkclient", "webapp")
#: A module-level function defined in this many modules is a copy (two may share a name by chance).
COPIES = 3


def misplaced(root: Path) -> list[str]:
    """Under ``root/tests/<package>/``: the test modules outside a room, the directories named after no
    room of ``root/<package>/`` (a subpackage), and the room directories that are no package."""
    problems = []
    for package in PACKAGES:
        tests = root / "tests" / package
        problems += [f"{path.relative_to(root)}: not in a room" for path in sorted(tests.glob("test_*.py"))]
        for room in sorted(p for p in tests.iterdir() if p.is_dir() and p.name != "__pycache__"):
            if not (root / package / room.name / "__init__.py").is_file():
                problems.append(f"{room.relative_to(root)}: {package}/{room.name} is no room")
            elif not (room / "__init__.py").is_file():
                problems.append(f"{room.relative_to(root)}: no __init__.py")
    return problems


def _counted(node: ast.stmt) -> bool:
    """A module-level function that a copy would be: not a test, not a pytest hook, and not a pipeline
    entry point (decorated ``@pipeline(...)``, the names the README's contract asks for)."""
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return False
    decorators = [d.func if isinstance(d, ast.Call) else d for d in node.decorator_list]
    pipeline = any(getattr(d, "id", getattr(d, "attr", None)) == "pipeline" for d in decorators)
    return not (node.name.startswith(("test_", "pytest_")) or pipeline)


def copies(root: Path) -> dict[str, list[str]]:
    """Module-level function names defined in :data:`COPIES` or more modules under ``root/tests``, each
    with those modules (fixtures count: one fixture in several modules is a conftest's). The capture
    scripts under ``tests/fixtures`` make data and are not read."""
    modules = defaultdict(list)
    for path in sorted((root / "tests").rglob("*.py")):
        if "fixtures" in path.relative_to(root / "tests").parts:
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if _counted(node):
                modules[node.name].append(str(path.relative_to(root)))
    return {name: paths for name, paths in sorted(modules.items()) if len(set(paths)) >= COPIES}


def test_every_test_module_sits_in_a_room_of_the_code():
    assert misplaced(ROOT) == []


def test_no_function_is_defined_in_three_test_modules():
    assert copies(ROOT) == {}


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


def test_the_room_check_finds_a_module_outside_a_room_an_unknown_room_and_a_room_without_init(tmp_path):
    rooms = {f"{p}/planner/__init__.py": "" for p in PACKAGES}
    root = _write(tmp_path, {**rooms, **{f"tests/{p}/planner/__init__.py": "" for p in PACKAGES},
                             "tests/scaling/test_stray.py": "", "tests/webapp/nowhere/test_x.py": "",
                             "tests/sparkclient/planner/__init__.py": "", "webapp/loop/__init__.py": "",
                             "tests/webapp/loop/test_y.py": ""})
    assert misplaced(root) == ["tests/scaling/test_stray.py: not in a room",
                               "tests/webapp/loop: no __init__.py",
                               "tests/webapp/nowhere: webapp/nowhere is no room"]


def test_the_copy_check_finds_a_function_in_three_modules_and_counts_no_test_hook_or_pipeline(tmp_path):
    helper = "import pytest\n\n\ndef _pending():\n    pass\n\n\n@pytest.fixture\ndef operator():\n    pass\n"
    exempt = ("from sparkclient.contract.spec import pipeline\n\n\ndef test_a():\n    pass\n\n\n"
              "def pytest_collection_modifyitems(items):\n    pass\n\n\n@pipeline(knobs=[])\ndef build(spark, knobs):\n"
              "    pass\n")
    main = "def main():\n    pass\n"  # in two modules, and in a capture script that is not read
    root = _write(tmp_path, {"tests/a/test_one.py": helper + exempt, "tests/b/test_two.py": helper + exempt,
                             "tests/c/conftest.py": helper + exempt, "tests/fixtures/x/capture.py": main,
                             "tests/d/capture.py": main, "tests/e/bench.py": main})
    assert copies(root) == {"_pending": ["tests/a/test_one.py", "tests/b/test_two.py", "tests/c/conftest.py"],
                            "operator": ["tests/a/test_one.py", "tests/b/test_two.py", "tests/c/conftest.py"]}
