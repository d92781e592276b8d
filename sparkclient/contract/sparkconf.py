"""The Spark settings a pipeline's knobs fix at the driver's start (:mod:`sparkclient.contract.spec`).

A ``memory`` knob sets the heap of the JVM that runs the tasks: in local mode the driver's
(``spark.driver.memory``: the tasks run in it), on a cluster each executor's
(``spark.executor.memory``). Spark reads both only when it starts the JVM (``spark-submit`` passes
the driver's as ``-Xmx``; ``spark.conf.set`` refuses them at run time), so they go to the session
builder of a new driver, never to a running session. Flink's memory tuning likewise applies a
TaskManager's new heap by restarting it (``job.autoscaler.memory.tuning.*``,
``org.apache.flink.autoscaler.tuning.MemoryTuning``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sparkclient.contract.spec import Knob, KnobError, KnobTarget

__all__ = ["DRIVER_MEMORY_CONF", "EXECUTOR_MEMORY_CONF", "is_local", "launch_settings", "memory_conf"]

DRIVER_MEMORY_CONF = "spark.driver.memory"
EXECUTOR_MEMORY_CONF = "spark.executor.memory"


def is_local(master: str) -> bool:
    """Whether ``master`` (the runner's ``--master``) runs the tasks in the driver: ``local`` or ``local[...]``."""
    return master == "local" or master.startswith("local[")


def memory_conf(master: str) -> str:
    """The Spark setting of the heap that runs the tasks under ``master``: ``spark.driver.memory``
    in local mode, else ``spark.executor.memory``."""
    return DRIVER_MEMORY_CONF if is_local(master) else EXECUTOR_MEMORY_CONF


def launch_settings(knobs: Sequence[Knob], values: Mapping[str, int] | None, *, master: str,
                    operator_conf: Mapping[str, str]) -> dict[str, str]:
    """The settings the driver's session builder takes for the pipeline's knobs: ``{}`` without a
    ``memory`` knob, else ``{memory_conf(master): "<v>m"}`` with v the knob's value in MB. With
    ``values`` None only the operator's settings are checked, and ``{}`` is returned (the
    supervisor's check before any driver starts).

    Raises:
        KnobError: the operator's ``--conf`` settings (``operator_conf``) give the same key: two
            sources for one heap; the message names the knob and the key.
        KeyError: ``values`` lacks the memory knob (values come from
            :func:`sparkclient.contract.spec.validate_values`).
    """
    knob = next((k for k in knobs if k.sets is KnobTarget.MEMORY), None)
    if knob is None:
        return {}
    key = memory_conf(master)
    if key in operator_conf:
        raise KnobError(knob.name, f"sets {key} under --master {master}, and --conf {key}={operator_conf[key]} "
                                   f"sets it too: drop the --conf (the knob's value is the heap) or the knob")
    return {} if values is None else {key: f"{values[knob.name]}m"}
