"""What ``make demo`` prints (:mod:`sparkclient.demo.launch`): where each process it starts logs, and each
job's drivers, at the paths they really write to; the dashboard, which the notices' links lead to."""

from __future__ import annotations

import argparse
from pathlib import Path

from sparkclient.runner.arguments import add_run_arguments
from sparkclient.runner.driverlog import driver_log


def printed_logs(printed: str) -> dict[str, Path]:
    """The ``Logs:`` block of the printout: what logs (a process, or a job's drivers) → where."""
    block = printed.split("Logs:\n", 1)[1].splitlines()
    lines = block[:next(i for i, line in enumerate(block) if not line.startswith("  "))]
    return {name: Path(path) for name, path in (line.strip().rsplit(": ", 1) for line in lines)}


def runner_workdir(argv: list[str]) -> Path:
    """The ``--workdir`` of a ``python -m sparkclient run`` command line, as the runner reads it."""
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    return Path(parser.parse_args(argv[argv.index("run") + 1:]).workdir)


def test_each_process_and_each_job_s_drivers_log_where_printed(demo_commands):
    logs = printed_logs(demo_commands.printed)
    started = {" ".join(argv) for argv, _env in demo_commands.commands if " ".join(argv) in demo_commands.logs}
    assert len(started) == 6  # generator, files_load, two runners, celery, web
    written = {demo_commands.logs[argv] for argv in started}
    runners = [argv for argv, _env in demo_commands.commands if argv[1:4] == ["-m", "sparkclient", "run"]]
    drivers = {driver_log(runner_workdir(argv)) for argv in runners}
    assert len(drivers) == 2
    assert sorted(map(str, logs.values())) == sorted(map(str, written | drivers))
    assert logs["drivers of job demo (Spark, the query's errors)"] == driver_log(runner_workdir(
        next(argv for argv in runners if argv[argv.index("--job") + 1] == "demo")))
    assert {name for name in logs if not name.startswith("drivers")} == {
        "generator", "files_load", "runner_demo", "runner_files", "celery", "web"}


def test_every_process_links_its_notices_to_the_printed_dashboard(demo_commands):
    assert "Dashboard: http://127.0.0.1:8123/\n" in demo_commands.printed
    assert {env["SCALER_NOTIFY_BASE_URL"] for _argv, env in demo_commands.commands} == {"http://127.0.0.1:8123/"}


def test_a_base_url_of_the_caller_s_is_kept(run_demo):
    run = run_demo(SCALER_NOTIFY_BASE_URL="https://scaler.example.com/")
    assert {env["SCALER_NOTIFY_BASE_URL"] for _argv, env in run.commands} == {"https://scaler.example.com/"}
