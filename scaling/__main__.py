"""``python -m scaling evaluate FILE.json|-`` (SCENARIO.md), ``python -m scaling perf``,
``python -m scaling bench [--quick] [--json FILE] [--report FILE] [--seed N]``,
``python -m scaling bench --convergence [--compare-busy-cap]`` and
``python -m scaling options --markdown`` (docs/POLICY.md).

Exit status: 0 on success, 2 on invalid input (one line on stderr naming the field).
"""

from __future__ import annotations

import argparse
import json
import sys

from scaling.bench.perf import run as run_perf
from scaling.scenario.format import evaluate_text
from scaling.scenario.values import ScenarioError
from scaling.words.options_doc import markdown


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scaling", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    ev = sub.add_parser("evaluate", help="evaluate a scenario (SCENARIO.md); '-' reads stdin")
    ev.add_argument("file")
    perf = sub.add_parser("perf", help="time one evaluation of a 1,000-vertex random DAG by both planners")
    perf.add_argument("--vertices", type=int, default=1000)
    perf.add_argument("--samples", type=int, default=240)
    perf.add_argument("--repeat", type=int, default=15)
    perf.add_argument("--seed", type=int, default=7)
    bench = sub.add_parser("bench", help="compare the policies on simulated workloads (scaling.bench)")
    bench.add_argument("--quick", action="store_true", help="the quick workloads (under 2 minutes)")
    bench.add_argument("--seed", type=int, default=7)
    bench.add_argument("--json", dest="json_file", help="write the table as JSON rows to this file")
    bench.add_argument("--report", default="bench-report.html", help="the Plotly report ('' for none)")
    bench.add_argument("--setting", action="append", choices=("flink-defaults", "tuned"),
                       help="run only this setting (repeatable); default both")
    bench.add_argument("--convergence", action="store_true",
                       help="ds2's convergence from 1/8 of the needed parallelism (scaling.bench.convergence)")
    bench.add_argument("--compare-busy-cap", action="store_true",
                       help="with --convergence: also the table with the old 1000 ms/s cap on busy time")
    options = sub.add_parser("options", help="the policy options (scaling/policy/options.py)")
    options.add_argument("--markdown", action="store_true", help="as docs/POLICY.md (the only format)")
    args = parser.parse_args(argv)

    if args.command == "options":
        print(markdown(), end="")
        return 0

    if args.command == "bench":
        from scaling.bench.cli import run_cli, run_convergence_cli  # noqa: PLC0415 - loads the simulator, plotly

        if args.convergence:
            return run_convergence_cli(seed=args.seed, compare_busy_cap=args.compare_busy_cap,
                                       setting=(args.setting or ["tuned"])[0])
        chosen = tuple(args.setting) if args.setting else ("flink-defaults", "tuned")
        return run_cli(quick=args.quick, seed=args.seed, json_file=args.json_file, report=args.report,
                       settings=chosen)
    if args.command == "perf":
        print(run_perf(vertices=args.vertices, samples=args.samples, repeat=args.repeat, seed=args.seed))
        return 0
    try:
        if args.file == "-":
            text = sys.stdin.read()
        else:
            with open(args.file, encoding="utf-8") as handle:
                text = handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        print(f"error: file: cannot read {args.file}: {exc}".replace("\n", " "), file=sys.stderr)
        return 2
    code, out = evaluate_command(text)
    print(out, file=sys.stdout if code == 0 else sys.stderr)
    return code


def evaluate_command(text: str) -> tuple[int, str]:
    """What ``python -m scaling evaluate`` does with a document, in-process: ``(0, plan JSON)`` or
    ``(2, "error: <field>: <what is wrong>")`` (one line). Only ``ScenarioError`` is an input
    error; anything else is a bug and propagates (the fuzz test would catch it)."""
    try:
        result = evaluate_text(text)
    except ScenarioError as exc:
        return 2, f"error: {exc}".replace("\n", " ")
    return 0, json.dumps(result, indent=2)


if __name__ == "__main__":
    sys.exit(main())
