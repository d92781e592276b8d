"""``python -m scaling bench``: print the comparison table, the acceptance notes, and write the
report and the JSON rows."""

from __future__ import annotations

import json
import sys

from scaling.bench.acceptance import acceptance
from scaling.bench.memory import describe_memory, format_memory_table, memory_target, run_memory_bench
from scaling.bench.report import write_report
from scaling.bench.run import SETTINGS, describe_setting, run_bench
from scaling.bench.table import format_table


def run_cli(*, quick: bool, seed: int, json_file: str | None, report: str | None,
            settings: tuple[str, ...] = tuple(SETTINGS)) -> int:
    """Print one table per setting with its targets (``scaling.bench.acceptance``) and the memory
    workloads' table with its target (``scaling.bench.memory``); write the JSON rows
    (a ``setting`` key added) and the report of the last setting."""
    rows_json = []
    total_s = 0.0
    result = None
    for setting in settings:
        result = run_bench(quick=quick, seed=seed, setting=setting,
                           progress=lambda line: print(f"  {line}", file=sys.stderr))
        total_s += result.wall_s
        print(f"== {describe_setting(setting)} ==")
        print(format_table(result.rows))
        print()
        targets = acceptance(result.rows)
        missed = [t for t in targets if not t.met]
        print(f"Targets at {setting} (ds2): " +
              ("every target met" if not missed else f"{len(missed)} missed"))
        for t in targets:
            print(f"  {'met   ' if t.met else 'MISSED'} {t.label}: {t.measured}")
        print()
        memory = run_memory_bench(seed=seed, setting=setting)
        print(f"-- memory workloads at {setting} ({describe_memory()}) --")
        print(format_memory_table(memory))
        target = memory_target(memory)
        print(f"  {'met   ' if target.met else 'MISSED'} {target.label}: {target.measured}")
        print()
        rows_json.extend({"setting": setting, **row.as_json()} for row in result.rows)
    if json_file:
        with open(json_file, "w", encoding="utf-8") as handle:
            json.dump(rows_json, handle, indent=1)
            handle.write("\n")
    if report and result is not None:
        notes = [f"MISSED {t.label}: {t.measured}" for t in acceptance(result.rows) if not t.met]
        print(f"report: {write_report(result, report, notes=notes)}")
    print(f"{len(rows_json)} runs in {total_s:.1f} s (seed {seed}, {'quick' if quick else 'full'})")
    return 0
