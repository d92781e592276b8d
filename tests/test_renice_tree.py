"""``scripts/renice-tree.py``: once phase 2 is done, `make test` gives phase 1 and its workers a niceness."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import psutil
import pytest

from tests.repo import ROOT
from tests.waiting import wait_for

SCRIPT = ROOT / "scripts" / "renice-tree.py"
#: A parent that starts a child and waits for it: a process tree like phase 1's pytest and its workers.
TREE = "import subprocess, sys; subprocess.run([sys.executable, '-c', 'import time; time.sleep(60)'])"


def script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60,
                          check=False)


@pytest.fixture
def tree():
    """The tree at nice 5, once its child runs."""
    parent = subprocess.Popen(["nice", "-n", "5", sys.executable, "-c", TREE])
    process = psutil.Process(parent.pid)
    try:
        wait_for(process.children, timeout_s=60, interval_s=0.05, what="the child to start")
        yield process
    finally:
        for child in process.children(recursive=True):
            child.kill()
        parent.kill()
        parent.wait(timeout=10)


def test_the_parent_and_every_descendant_get_the_niceness(tree):
    [child] = tree.children(recursive=True)
    assert (tree.nice(), child.nice()) == (5, 5)
    done = script(str(tree.pid), "8")  # raising a niceness needs no privilege
    assert done.returncode == 0 and done.stdout == "phase 1: 2 processes now at nice 8\n", done
    assert (tree.nice(), child.nice()) == (8, 8)


def test_a_refused_lowering_is_counted_not_raised(tree, monkeypatch):
    spec = importlib.util.spec_from_file_location("renice_tree", SCRIPT)  # a script, not a package module
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    def refuse(self, value=None):
        raise psutil.AccessDenied(self.pid)

    monkeypatch.setattr(psutil.Process, "nice", refuse)
    assert module.renice_tree(tree.pid, 0) == (0, 2)


def test_a_gone_process_sets_nothing():
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    done = script(gone.stdout.strip(), "0")
    assert done.returncode == 0 and done.stdout == "phase 1: 0 processes now at nice 0\n", done


@pytest.mark.parametrize("args", [[], ["12"], ["x", "0"], ["12", "y"]])
def test_bad_arguments_exit_2_with_the_usage(args):
    done = script(*args)
    assert done.returncode == 2 and "usage: renice-tree.py PID NICE" in done.stderr
