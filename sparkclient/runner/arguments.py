"""The ``run`` command's flags; :mod:`sparkclient.runner.supervisor` documents them.

They live apart from the supervisor (which loads Spark through the driver) so that
``python -m sparkclient`` builds every command's parser without loading Spark: ``snapshot`` never needs it.
"""

from __future__ import annotations

import argparse

from sparkclient.contract.credentials import control_redis_url
from sparkclient.contract.spec import KnobError
from sparkclient.runner.crashloop import CrashLoopRule
from sparkclient.runner.firstbatch import FIRST_BATCH_TIMEOUT_S

__all__ = ["add_run_arguments", "parse_pairs"]


def parse_pairs(flags: list[str], option: str = "--knob", shape: str = "NAME=VALUE") -> dict[str, str]:
    """``["a=1", "b=2"]`` as ``{"a": "1", "b": "2"}``.

    Raises:
        KnobError: a flag that is not NAME=VALUE.
    """
    out = {}
    for flag in flags:
        name, sep, value = flag.partition("=")
        if not sep or not name.strip():
            raise KnobError(None, f"{option} takes {shape}, got {flag!r}")
        out[name.strip()] = value.strip()
    return out


def _positive_int(text: str) -> int:
    """``text`` as an int of at least 1 (argparse ``type``; ArgumentTypeError otherwise)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"takes a whole number of at least 1, got {text!r}")
    return value


def _positive_float(text: str) -> float:
    """``text`` as a float above 0 (argparse ``type``; ArgumentTypeError otherwise)."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"takes a number of seconds above 0, got {text!r}")
    return value


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``run`` command's flags (see :mod:`sparkclient.runner.supervisor`)."""
    parser.add_argument("--pipeline", required=True, help="MODULE:FUNCTION of the build function (on sys.path)")
    parser.add_argument("--job", required=True, help="job name: the Redis keys and the dashboard's job")
    parser.add_argument("--master", default="local",
                        help="'local' (local[executors]; an executors change starts a new driver) or a cluster "
                             "manager: spark://host:port, k8s://..., yarn (executors changed in place)")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting for the driver's SparkSession (repeatable), e.g. "
                             "spark.kubernetes.container.image=..., spark.decommission.enabled=true")
    parser.add_argument("--knob", action="append", default=[], metavar="NAME=VALUE",
                        help="initial knob value (repeatable); ignored once the job has stored values")
    parser.add_argument("--redis-url", default=control_redis_url(),
                        help="control channel, password in the URL; prefer the default, $SPARKSCALER_REDIS_URL "
                             "(with the password of the file $SPARKSCALER_REDIS_PASSWORD_FILE when set), which "
                             "keeps the password out of the process list")
    parser.add_argument("--workdir", help="checkpoint, sink and driver log go here (default: var/jobs/JOB)")
    parser.add_argument("--ui-port", type=int, default=4040)
    parser.add_argument("--max-executors", type=int, help="cap on the executors a plan may ask for")
    parser.add_argument("--master-ui", help="standalone master UI (for its free cores), e.g. http://host:8080")
    parser.add_argument("--warm-up-batches", type=_positive_int, metavar="N",
                        help="micro-batches with rows a standby driver runs on the pipeline's plan before a warm "
                             "handover (default: the runner's); each costs the standby CPU beside the running driver")
    rule = CrashLoopRule()  # the defaults, declared there
    parser.add_argument("--crash-loop-crashes", type=_positive_int, metavar="N",
                        help=f"this many driver crashes within --crash-loop-window-s, however long each driver "
                             f"lived, are a crash loop (default {rule.crashes})")
    parser.add_argument("--crash-loop-window-s", type=float, metavar="S",
                        help=f"the crash-loop window, seconds (default {rule.window_s:.0f}); older crashes no "
                             "longer count")
    parser.add_argument("--crash-backoff-s", type=float, metavar="S",
                        help=f"the wait before restarting a driver after its window's first crash, seconds "
                             f"(default {rule.backoff_s:g}); it doubles with each crash of the window")
    parser.add_argument("--crash-backoff-cap-s", type=float, metavar="S",
                        help=f"the longest wait before a restart, seconds (default {rule.backoff_cap_s:g})")
    parser.add_argument("--first-batch-timeout", type=_positive_float, default=FIRST_BATCH_TIMEOUT_S, metavar="S",
                        help="seconds from a rescale command to the first batch on its configuration; none by then "
                             "fails it (no-first-batch), also across drivers that crashed on it; keep it below the "
                             f"web app's SCALER_EXECUTION_TIMEOUT_S (default {FIRST_BATCH_TIMEOUT_S:.0f})")
    parser.add_argument("--driver", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--capacity", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--standby", help=argparse.SUPPRESS)
