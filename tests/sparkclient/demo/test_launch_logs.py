"""``make demo`` prints where each process logs, the jobs' drivers included
(:func:`sparkclient.demo.launch.log_places`)."""

from __future__ import annotations

from pathlib import Path

from sparkclient.demo.launch import log_places
from sparkclient.demo.processes import Child, ProcessGroup


def test_every_child_and_every_job_s_driver_log_is_named(tmp_path):
    group = ProcessGroup(log_dir=tmp_path / "logs")
    for name in ("generator", "runner_demo", "celery"):
        group.children.append(Child(name, None, tmp_path / "logs" / f"{name}.log"))
    text = log_places(group, ["demo", "files"], run_dir=Path("var/demo"))
    assert text.splitlines() == [
        "Logs:", f"  generator: {tmp_path}/logs/generator.log", f"  runner_demo: {tmp_path}/logs/runner_demo.log",
        f"  celery: {tmp_path}/logs/celery.log",
        "  driver of job demo (Spark, the query's errors): var/demo/demo/driver.log",
        "  driver of job files (Spark, the query's errors): var/demo/files/driver.log"]
