#!/usr/bin/env python3
"""`make test`: give a process and its descendants a niceness, once phase 2 has finished.

Usage: ``renice-tree.py PID NICE``. Phase 1 runs at ``nice -n 19`` so that it takes only the CPU phase 2
leaves idle; once phase 2 is done that priority would starve it beside any other busy process (a nice-19
process gets about 1.5 % of a core against one nice-0 process), so the Makefile gives phase 1 the recipe's
own niceness back. Prints what it set. Lowering a niceness needs ``CAP_SYS_NICE`` (root): without it the
processes keep theirs, the script says so on stderr and still exits 0, since the run is only slower.
Exits 2 on bad arguments.
"""

import sys

import psutil


def renice_tree(pid: int, nice: int) -> tuple[int, int]:
    """Set ``nice`` on process ``pid`` and every descendant alive now; returns (set, refused) counts.
    A process that exits meanwhile counts as neither; a refusal (``psutil.AccessDenied``) is counted."""
    try:
        root = psutil.Process(pid)
        tree = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0, 0
    done = refused = 0
    for process in tree:
        try:
            process.nice(nice)
            done += 1
        except psutil.AccessDenied:
            refused += 1
        except psutil.NoSuchProcess:
            pass
    return done, refused


def main(argv: list[str]) -> int:
    try:
        pid, nice = int(argv[0]), int(argv[1])
    except (IndexError, ValueError):
        print("usage: renice-tree.py PID NICE (two integers)", file=sys.stderr)
        return 2
    done, refused = renice_tree(pid, nice)
    print(f"phase 1: {done} processes now at nice {nice}")
    if refused:
        print(f"phase 1: {refused} processes keep their niceness: lowering it needs CAP_SYS_NICE; the rest "
              "of phase 1 takes only idle CPU", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
