"""``python -m sparkclient run|snapshot|bench-rescale``: run a pipeline under a supervisor
(:mod:`sparkclient.runner.supervisor`), print one snapshot of a running query as a ``micro-batch``
scenario (SCENARIO.md, :mod:`sparkclient.collector.snapshot_cli`), or measure the rescale paths on the
demo pipeline (:mod:`sparkclient.demo.benchrescale`).

    python -m sparkclient snapshot --captures tests/fixtures/spark-4.3.0 | python -m scaling evaluate -
    python -m sparkclient snapshot --url http://127.0.0.1:4040 --query demo [--redis-url redis://...]

Live mode reads ``/api/v1`` of the driver and the query's progress: from Redis
(``ss:progress:<job>``, published by the runner's listener) when ``--redis-url`` is given, else it
rebuilds the batches from the jobs alone (no offsets, so no backlog or arrival rate).
Exit status: 0, 1 when Spark or the captures cannot be read, 2 on bad arguments, 3 when the sample is
not ready (``sparkclient.collector.readiness``: the loop plans no scale-down on it; no scenario printed).
Notes (batches left out, fallbacks) and the collect time go to stderr.
"""

from __future__ import annotations

import argparse
import sys

from sparkclient.collector import snapshot_cli
from sparkclient.demo import benchrescale
from sparkclient.runner.arguments import add_run_arguments


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sparkclient", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    add_run_arguments(sub.add_parser("run", help="run a pipeline (MODULE:FUNCTION) under a supervisor, rescalable "
                                                 "from the dashboard"))
    benchrescale.add_arguments(sub.add_parser("bench-rescale", help="measure each rescale path on the demo pipeline"))
    snapshot_cli.add_arguments(sub.add_parser("snapshot", help="print one snapshot as a micro-batch scenario"))
    args = parser.parse_args(argv)
    if args.command == "run":
        from sparkclient.runner import supervisor  # noqa: PLC0415 - loads Spark, which snapshot must not

        return supervisor.run(args)
    if args.command == "bench-rescale":
        return benchrescale.run(args)
    if args.url and not args.query:
        parser.error("--url needs --query NAME")
    return snapshot_cli.run(args)


if __name__ == "__main__":
    sys.exit(main())
