"""``python -m scaling bench``: print the comparison table, the acceptance notes, and write the
report and the JSON rows."""

from __future__ import annotations

import json
import sys

from scaling.bench.run import acceptance_notes, format_table, run_bench


def run_cli(*, quick: bool, seed: int, json_file: str | None, report: str | None) -> int:
    result = run_bench(quick=quick, seed=seed, progress=lambda line: print(f"  {line}", file=sys.stderr))
    notes = acceptance_notes(result.rows, result.policy)
    print(format_table(result.rows))
    print()
    print("Acceptance (ds2, micro-batch): " + ("every target met" if not notes else f"{len(notes)} missed"))
    for note in notes:
        print(f"  {note}")
    if json_file:
        with open(json_file, "w", encoding="utf-8") as handle:
            json.dump([row.as_json() for row in result.rows], handle, indent=1)
            handle.write("\n")
    if report:
        from scaling.bench.report import write_report  # noqa: PLC0415

        print(f"report: {write_report(result, report, notes=notes)}")
    print(f"{len(result.rows)} runs in {result.wall_s:.1f} s (seed {seed}, {'quick' if quick else 'full'})")
    return 0
