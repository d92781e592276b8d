"""Issue 15, Faults: no lazy import of a heavy module inside a task. The first execution after a
worker restart deadlocked on ``from sparkclient.runner import ...`` (which loads pyspark) run inside
the task by several worker threads at once. Every import inside a function of the modules the
Celery tasks run must be of a module that loads none of the heavy packages."""

from __future__ import annotations

import ast
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("pyspark", "py4j", "pandas", "pyarrow", "plotly")
#: The modules Celery tasks run (webapp/*/tasks.py and what they call).
TASK_MODULES = sorted([*(ROOT / "webapp" / "proposals").glob("*.py"), ROOT / "webapp" / "jobs" / "tasks.py",
                       ROOT / "webapp" / "jobs" / "services.py", ROOT / "webapp" / "jobs" / "policy.py",
                       ROOT / "webapp" / "outage.py"])


def lazy_imports(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` of every import statement inside a function of ``path``."""
    found = []
    for func in ast.walk(ast.parse(path.read_text())):
        if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(func):
                if isinstance(node, ast.Import):
                    found += [(node.lineno, alias.name) for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    found.append((node.lineno, node.module))
    return found


@cache
def heavy_loaded_by(module: str) -> tuple[str, ...]:
    """The modules of the heavy packages that importing ``module`` loads in a worker that has just
    started (Django set up, the task modules imported): what a task would import from its thread."""
    code = ("import os, sys; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'tests.settings'); "
            "from webapp.celery import app; import django; django.setup(); app.loader.import_default_modules(); "
            f"before = set(sys.modules); import {module}; "
            f"print(sorted(m for m in set(sys.modules) - before if m.split('.')[0] in {HEAVY!r})[:5])")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return tuple(ast.literal_eval(done.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("path", TASK_MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_heavy_module_is_imported_inside_a_task_function(path):
    offending = [f"{path.relative_to(ROOT)}:{line} imports {module}, which loads {', '.join(heavy)}"
                 for line, module in lazy_imports(path) if (heavy := heavy_loaded_by(module))]
    assert offending == []


def test_the_worker_loads_the_control_channel_and_the_collector_modules_with_its_tasks():
    code = ("import os, sys; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'tests.settings'); "
            "from webapp.celery import app; import django; django.setup(); app.loader.import_default_modules(); "
            "print('sparkclient.control' in sys.modules, 'sparkclient.progress' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.stdout.strip().splitlines()[-1] == "True True", done.stderr
