"""The mutation run (`make mutation`): mutmut over the modules of `[tool.mutmut]` in pyproject.toml,
one mutant at a time (`--max-children 1`), stopped after `--minutes`; then the score per package.

A slow job outside `make test` and CI. mutmut keeps each verdict in mutants/<module>.meta as it goes,
so a run stopped by the time cap still scores every mutant it checked; a later run goes on from
there (delete mutants/ for a fresh one). The score of a package is killed / checked, where a mutant
that timed out counts as killed and one no selected test reaches ("no tests") as not killed (the
score over the mutants a test reaches is printed beside it). The
surviving mutants are listed, one name a line, in mutants/survivors.txt (`mutmut show NAME` gives
the diff of one).

    python scripts/mutation.py [--minutes 40] [--score-only] [NAME_OR_GLOB ...]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tomllib
from collections import Counter
from fnmatch import fnmatch
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MUTANTS = ROOT / "mutants"
#: mutmut's exit codes of a mutant's test run (mutmut.stats.status_by_exit_code).
KILLED = {1, 3, 36, -24, 24, 152, 255}  # a failing test, or a timeout
SURVIVED = {0}
NO_TESTS = {5, 33}
NOT_CHECKED = {None}


def packages() -> list[str]:
    """The mutated packages: the folders of `only_mutate`, e.g. "scaling/planner"."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]
    return [pattern.removesuffix("/*") for pattern in config["only_mutate"]]


def run(minutes: float, names: list[str]) -> int | None:
    """`mutmut run --max-children 1 [NAMES]`, its process group stopped after `minutes`: its exit
    code, or None when the time cap stopped it (mutmut ignores SIGINT: SIGTERM, then SIGKILL)."""
    command = [str(Path(sys.executable).with_name("mutmut")), "run", "--max-children", "1", *names]
    process = subprocess.Popen(command, cwd=ROOT, start_new_session=True)
    try:
        return process.wait(timeout=minutes * 60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        return None


def unchecked(names: list[str]) -> list[str]:
    """The mutants of `names` (names or globs) not checked yet, once mutmut made them; else `names`.
    mutmut reruns every mutant it is given by name, so a stopped run goes on with the others only."""
    found = verdicts()
    if not names or not found:
        return names
    return sorted(m for m, code in found.items() if code is None and any(fnmatch(m, name) for name in names))


def verdicts() -> dict[str, int | None]:
    """Every mutant's name and exit code, from mutmut's meta files."""
    found: dict[str, int | None] = {}
    for meta in sorted(MUTANTS.rglob("*.py.meta")):
        found.update(json.loads(meta.read_text())["exit_code_by_key"])
    return found


def module_path(mutant: str) -> str:
    """The source path of a mutant's name: "scaling.planner.gate.x_f__mutmut_3" (a function) or
    "scaling.planner.gate.xǁGateǁcheck__mutmut_1" (a method) -> "scaling/planner/gate"."""
    return mutant.rsplit(".", 1)[0].replace(".", "/")


def percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f} %" if whole else "-"


def score(found: dict[str, int | None], names: list[str], *, modules: bool = False) -> list[str]:
    """One line per package (or, with `modules`, per module of them): killed / checked, and the
    counts of each verdict."""
    if modules:
        names = sorted({module_path(m) for m in found if any(fnmatch(module_path(m), f"{p}/*") for p in names)})
    lines = []
    for package in names:
        counts: Counter[str] = Counter()
        for mutant, code in found.items():
            if module_path(mutant) != package and not fnmatch(module_path(mutant), f"{package}/*"):
                continue
            kind = ("killed" if code in KILLED else "survived" if code in SURVIVED
                    else "no tests" if code in NO_TESTS else "not checked" if code in NOT_CHECKED else "other")
            counts[kind] += 1
        checked = sum(counts.values()) - counts["not checked"]
        reached = checked - counts["no tests"]
        killed = counts["killed"]
        lines.append(f"{package}: {killed} killed / {checked} checked ({percent(killed, checked)}), "
                     f"/ {reached} reached by a test ({percent(killed, reached)}); "
                     f"{counts['survived']} survived, {counts['no tests']} reached by no test, "
                     f"{counts['other']} other, {counts['not checked']} not checked of {sum(counts.values())}")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=40, help="the time cap of the run (default 40)")
    parser.add_argument("names", nargs="*", help="only these mutants (names or globs: 'scaling.values.readiness.*')")
    parser.add_argument("--score-only", action="store_true", help="print the score of the last run, run nothing")
    args = parser.parse_args()
    todo = unchecked(args.names)
    if args.names and not todo:
        print("every mutant of these names is checked already")
    code = 0 if args.score_only or (args.names and not todo) else run(args.minutes, todo)
    found = verdicts()
    if not found:
        print("mutmut made no mutant", file=sys.stderr)
        return 1
    survivors = sorted(m for m, c in found.items() if c in SURVIVED | NO_TESTS)
    (MUTANTS / "survivors.txt").write_text("".join(f"{m}\n" for m in survivors))
    if not args.score_only:
        print("stopped by the time cap" if code is None else f"mutmut exited with {code}")
    print("per module:\n" + "\n".join(score(found, packages(), modules=True)))
    print("per package:\n" + "\n".join(score(found, packages())))
    print(f"surviving mutants (survived or reached by no test): {MUTANTS / 'survivors.txt'}")
    return 0 if code in (0, None) else code


if __name__ == "__main__":
    sys.exit(main())
