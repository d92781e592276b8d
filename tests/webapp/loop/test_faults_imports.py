"""Faults: no lazy import of a heavy module inside a task. The first execution after a
worker restart deadlocked on ``from sparkclient.runner.driver import ...`` (which loads pyspark) run inside
the task by several worker threads at once. Every import inside a function of the modules the
Celery tasks run must be of a module that loads none of the heavy packages."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

from tests.repo import ROOT

HEAVY = ("pyspark", "py4j", "pandas", "pyarrow", "plotly")
#: The modules Celery tasks run (webapp/loop/tasks.py and what it calls).
TASK_MODULES = sorted([*(ROOT / "webapp" / "loop").glob("*.py"), *(ROOT / "webapp" / "proposals").glob("*.py"),
                       ROOT / "webapp" / "jobs" / "services.py", ROOT / "webapp" / "jobs" / "policy_mapping.py",
                       *(ROOT / "webapp" / "inbox").glob("*.py"), ROOT / "webapp" / "outage.py"])


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


#: Run in one fresh interpreter: start a worker (Django set up, the task modules imported), then
#: import each module in a forked child of it, so each sees the worker's state and nothing else.
_PROBE = """
import json, os, sys
os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'tests.settings')
from webapp.celery import app
import django
django.setup()
app.loader.import_default_modules()
heavy, out = tuple(sys.argv[1].split(',')), {}
for module in sys.argv[2:]:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        before = set(sys.modules)
        __import__(module)
        new = sorted(m for m in set(sys.modules) - before if m.split('.')[0] in heavy)[:5]
        os.write(write, json.dumps(new).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        out[module] = json.loads(pipe.read() or 'null')
    os.waitpid(pid, 0)
print(json.dumps(out))
"""


@cache
def _heavy_by_module() -> dict[str, tuple[str, ...]]:
    """For every module imported inside a function of the task modules: the modules of the heavy
    packages that importing it loads in a worker that has just started (what a task would import
    from its thread)."""
    modules = sorted({module for path in TASK_MODULES for _, module in lazy_imports(path)})
    done = subprocess.run([sys.executable, "-c", _PROBE, ",".join(HEAVY), *modules], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert None not in found.values(), f"a probe child failed: {found}"
    return {module: tuple(heavy) for module, heavy in found.items()}


def heavy_loaded_by(module: str) -> tuple[str, ...]:
    """The heavy modules that importing ``module`` inside a task loads (see :func:`_heavy_by_module`)."""
    return _heavy_by_module()[module]


def test_the_probe_sees_a_heavy_import():
    """The probe itself can fail: a module that loads pyspark is reported."""
    done = subprocess.run([sys.executable, "-c", _PROBE, ",".join(HEAVY), "pandas", "json"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["json"] == []
    assert "pandas" in found["pandas"], found


@pytest.mark.parametrize("path", TASK_MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_heavy_module_is_imported_inside_a_task_function(path):
    offending = [f"{path.relative_to(ROOT)}:{line} imports {module}, which loads {', '.join(heavy)}"
                 for line, module in lazy_imports(path) if (heavy := heavy_loaded_by(module))]
    assert offending == []


def test_the_worker_loads_the_control_channel_and_the_collector_modules_with_its_tasks():
    code = ("import os, sys; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'tests.settings'); "
            "from webapp.celery import app; import django; django.setup(); app.loader.import_default_modules(); "
            "print('sparkclient.contract.control' in sys.modules, 'sparkclient.collector.progress' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.stdout.strip().splitlines()[-1] == "True True", done.stderr
