"""The pipeline contract: how a user's own PySpark job is run, monitored and rescaled.

A pipeline is a Python module anywhere on ``sys.path`` that exposes a build function::

    from sparkclient.contract.spec import Knob, KnobTarget, pipeline, run_context

    @pipeline(knobs=[
        Knob("cores", default=1, min=1, max=8, sets=KnobTarget.EXECUTORS),
        Knob("source_partitions", default=2, min=1, max=16, sets=KnobTarget.SOURCE_PARTITIONS),
        Knob("work_partitions", default=2, min=1, max=32, sets=KnobTarget.REPARTITION),
        Knob("state_partitions", default=4, min=1, max=64, sets=KnobTarget.STATE_PARTITIONS),
    ])
    def build(spark: SparkSession, knobs: Mapping[str, int]) -> StreamingQuery:
        ctx = run_context()                       # job name and work directory chosen by the runner
        ...                                       # readStream ... .option("numPartitions", knobs["source_partitions"])
        return df.writeStream.option("checkpointLocation", str(ctx.workdir / "checkpoint")).start()

and is run with ``python -m sparkclient run --pipeline mymodule:build --job NAME``.

What each :class:`KnobTarget` sets, and how the runner applies a change of it:

- ``executors``: the executor count (local mode: the cores of ``local[N]``, a new driver; any
  cluster manager with ``requestTotalExecutors``: in place, the query keeps running);
- ``shuffle_partitions`` / ``state_partitions``: ``spark.sql.shuffle.partitions``. Spark pins the
  stateful operators' partitions in the checkpoint's offset log: once the checkpoint holds state the
  runner changes it with the offline RocksDB repartition (:mod:`sparkclient.runner.staterepartition`)
  between stop and restart. A stateless query's shuffles take the new value at a restart of the
  query inside the running driver. A pipeline declares at most one of the two (they are the same
  Spark setting). With such a knob the
  runner also turns off adaptive execution's partition coalescing
  (``spark.sql.adaptive.coalescePartitions.enabled=false``, ``sparkconf.session_settings``): Spark keeps
  adaptive execution for a stateless query writing to a DSv2 sink, and it would run a
  ``repartition(col)`` or join shuffle with fewer tasks than the knob, so the knob would not set the
  stage's tasks. An operator who passes that setting with ``--conf`` keeps it, and the binding
  reports the stage as coalesced;
- ``source_partitions`` and ``repartition``: values the build function passes to its source options
  and ``repartition(n)`` calls; a change restarts the query inside the running driver. A pipeline
  reading several sources (a stream-stream join) may declare one ``source_partitions`` knob per
  source: the k-th binds to the k-th scan stage in data-flow order (a join's left input first), as
  the k-th ``repartition`` knob binds to the k-th ``repartition(n)`` stage;
- ``memory`` (the heap of each JVM that runs tasks), ``memory_overhead`` (each executor's non-heap
  memory, on a cluster) and ``state_memory`` (the RocksDB state stores' bounded memory of each JVM),
  MB: set when the driver starts and fixed for a JVM's life, so a change starts a new driver in
  every mode (:mod:`sparkclient.contract.sparkconf` gives the settings and why). At most one knob per
  memory target, with ``min`` at least its floor (:data:`MEMORY_FLOORS_MB`); an operator ``--conf``
  of a key the knob sets is refused at start;
- ``other``: a setting of the pipeline that the autoscaler never changes (trigger interval, ...).

Errors: :class:`KnobError` (an invalid declaration or value, naming the knob) and
:class:`PipelineLoadError` (the ``MODULE:FUNCTION`` reference cannot be loaded, saying why).
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

__all__ = [
    "Knob",
    "KnobError",
    "KnobTarget",
    "PipelineLoadError",
    "PipelineSpec",
    "RunContext",
    "knobs_from_json",
    "knobs_to_json",
    "load_pipeline",
    "pipeline",
    "run_context",
    "validate_values",
]

#: Environment variables through which the runner tells a build function where it runs.
ENV_JOB, ENV_WORKDIR = "SPARKSCALER_JOB", "SPARKSCALER_WORKDIR"
#: The Spark setting that ``shuffle_partitions`` and ``state_partitions`` knobs set.
SHUFFLE_PARTITIONS_CONF = "spark.sql.shuffle.partitions"
#: Spark's adaptive execution setting that lets it coalesce a shuffle's partitions at run time.
ADAPTIVE_COALESCE_CONF = "spark.sql.adaptive.coalescePartitions.enabled"
#: The smallest heap a ``memory`` knob may set, MB: Spark refuses a heap under 450 MB
#: (``UnifiedMemoryManager.getMaxMemory``: 1.5 × its 300 MB reserved memory).
MEMORY_MIN_MB = 512
MEMORY_OVERHEAD_MIN_MB = 384
STATE_MEMORY_MIN_MB = 64
#: Bounds of any knob value; larger values are refused as nonsense before anything is built.
KNOB_VALUE_LIMIT = 1_000_000


class KnobTarget(StrEnum):
    """What a knob sets (see the module docstring for how each is applied)."""

    EXECUTORS = "executors"
    SHUFFLE_PARTITIONS = "shuffle_partitions"
    STATE_PARTITIONS = "state_partitions"
    SOURCE_PARTITIONS = "source_partitions"
    REPARTITION = "repartition"
    MEMORY = "memory"
    MEMORY_OVERHEAD = "memory_overhead"
    STATE_MEMORY = "state_memory"
    OTHER = "other"

    @property
    def is_memory(self) -> bool:
        """Whether the knob sizes memory a JVM takes at its start, MB (a target of :data:`MEMORY_FLOORS_MB`)."""
        return self in MEMORY_FLOORS_MB

    def needs_new_jvm(self, *, local: bool) -> bool:
        """Whether a change of the knob needs a new JVM (local mode when ``local``): a memory target
        that sets anything there (the overhead sizes executors, and local mode has none)."""
        return self.is_memory and not (local and self is KnobTarget.MEMORY_OVERHEAD)

    @property
    def is_parallelism(self) -> bool:
        """Whether the knob sets a stage's task count (the autoscaler may change it)."""
        return self in (KnobTarget.SHUFFLE_PARTITIONS, KnobTarget.STATE_PARTITIONS,
                        KnobTarget.SOURCE_PARTITIONS, KnobTarget.REPARTITION)

    @property
    def session_conf(self) -> str | None:
        """The Spark session setting the knob sets, or None when the build function applies it."""
        return SHUFFLE_PARTITIONS_CONF if self in (KnobTarget.SHUFFLE_PARTITIONS, KnobTarget.STATE_PARTITIONS) \
            else None


#: Each memory target's smallest ``min``, MB, and why.
MEMORY_FLOORS_MB = {
    KnobTarget.MEMORY: (MEMORY_MIN_MB, "Spark refuses a heap under 450 MB"),
    KnobTarget.MEMORY_OVERHEAD: (MEMORY_OVERHEAD_MIN_MB, "Spark's spark.executor.minMemoryOverhead"),
    KnobTarget.STATE_MEMORY: (STATE_MEMORY_MIN_MB, "one RocksDB memtable at its default size"),
}


class KnobError(ValueError):
    """A knob declaration or value is invalid; ``knob`` names it (None for the whole set)."""

    def __init__(self, knob: str | None, message: str) -> None:
        super().__init__(f"knob {knob!r}: {message}" if knob else message)
        self.knob = knob


class PipelineLoadError(RuntimeError):
    """``MODULE:FUNCTION`` could not be loaded as a pipeline; the message says why and what to do."""


def _int(knob: str | None, field: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise KnobError(knob, f"{field} must be an integer, got {value!r}")
    try:
        number = float(value)
    except ValueError:
        raise KnobError(knob, f"{field} must be an integer, got {value!r}") from None
    if not number.is_integer() or not -KNOB_VALUE_LIMIT <= number <= KNOB_VALUE_LIMIT:
        raise KnobError(knob, f"{field} must be an integer within ±{KNOB_VALUE_LIMIT}, got {value!r}")
    return int(number)


@dataclass(frozen=True)
class Knob:
    """One knob of a pipeline: an integer the build function (or the runner) applies.

    Attributes:
        name: the key in ``knobs`` (letters, digits, ``_``).
        default: the value when nothing else is configured.
        min, max: inclusive bounds; the autoscaler never proposes outside them.
        sets: what the knob sets (:class:`KnobTarget`).
        description: what it does, in words, for the dashboard.

    Raises:
        KnobError: an invalid name, bounds that do not hold ``1 <= min <= default <= max`` for a
            parallelism or executors knob, or ``min <= default <= max`` otherwise; a memory
            knob with ``min`` under its floor (:data:`MEMORY_FLOORS_MB`).
    """

    name: str
    default: int
    min: int
    max: int
    sets: KnobTarget = KnobTarget.OTHER
    description: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or not self.name.replace("_", "").isalnum() \
                or not self.name.isascii() or len(self.name) > 64:
            raise KnobError(None, f"a knob name must be 1-64 ASCII letters, digits or '_', got {self.name!r}")
        try:
            object.__setattr__(self, "sets", KnobTarget(self.sets))
        except ValueError:
            raise KnobError(self.name, f"sets must be one of {[t.value for t in KnobTarget]}, "
                                       f"got {self.sets!r}") from None
        for field in ("default", "min", "max"):
            object.__setattr__(self, field, _int(self.name, field, getattr(self, field)))
        low = 1 if self.sets is not KnobTarget.OTHER else -KNOB_VALUE_LIMIT
        if not low <= self.min <= self.default <= self.max:
            raise KnobError(self.name, f"needs {low} <= min <= default <= max, got min={self.min}, "
                                       f"default={self.default}, max={self.max}")
        floor = MEMORY_FLOORS_MB.get(self.sets)
        if floor is not None and self.min < floor[0]:
            raise KnobError(self.name, f"a {self.sets.value} knob's min must be at least {floor[0]} MB ({floor[1]}), "
                                       f"got min={self.min}")

    def check(self, value: Any) -> int:
        """``value`` as an int inside ``[min, max]``.

        Raises:
            KnobError: not an integer, or outside the bounds.
        """
        number = _int(self.name, "the value", value)
        if not self.min <= number <= self.max:
            raise KnobError(self.name, f"{number} is outside its bounds [{self.min}, {self.max}]")
        return number

    def to_dict(self) -> dict[str, Any]:
        """The knob as a JSON-ready dict (the shape the web app registers)."""
        return {"name": self.name, "default": self.default, "min": self.min, "max": self.max,
                "sets": self.sets.value, "description": self.description}

    @classmethod
    def from_dict(cls, data: Any) -> Knob:
        """Parse :meth:`to_dict` output.

        Raises:
            KnobError: not an object, a missing or unknown key, or an invalid value.
        """
        if not isinstance(data, Mapping):
            raise KnobError(None, f"a knob must be a JSON object, got {data!r:.80}")
        known = {"name", "default", "min", "max", "sets", "description"}
        unknown = sorted(set(data) - known)
        missing = sorted({"name", "default", "min", "max"} - set(data))
        name = data.get("name") if isinstance(data.get("name"), str) else None
        if unknown or missing:
            raise KnobError(name, f"unknown keys {unknown} / missing keys {missing}; a knob has {sorted(known)}")
        description = data.get("description", "")
        if not isinstance(description, str):
            raise KnobError(name, "description must be a string")
        return cls(name=data["name"], default=data["default"], min=data["min"], max=data["max"],
                   sets=data.get("sets", KnobTarget.OTHER.value), description=description[:500])


def check_knob_set(knobs: Sequence[Knob]) -> tuple[Knob, ...]:
    """Check a pipeline's knobs as a whole and return them as a tuple.

    Raises:
        KnobError: duplicate names, more than one ``executors`` knob or knob of one memory
            target, or both a ``shuffle_partitions`` and a ``state_partitions`` knob (one Spark
            setting), or more than one of either.
    """
    knobs = tuple(knobs)
    names = [k.name for k in knobs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise KnobError(duplicates[0], "is declared more than once")
    for target in (KnobTarget.EXECUTORS, *MEMORY_FLOORS_MB):
        several = [k.name for k in knobs if k.sets is target]
        if len(several) > 1:
            raise KnobError(several[1], f"a pipeline has at most one {target.value!r} knob (also {several[0]!r})")
    shuffle = [k.name for k in knobs if k.sets.session_conf]
    if len(shuffle) > 1:
        raise KnobError(shuffle[1], f"{SHUFFLE_PARTITIONS_CONF} is set by one knob only (also {shuffle[0]!r}); "
                                    "declare it as state_partitions when the query has state")
    return knobs


def validate_values(knobs: Sequence[Knob], values: Mapping[str, Any], *, partial: bool = False) -> dict[str, int]:
    """Every knob's value, checked against its bounds; missing knobs take their defaults.

    Args:
        knobs: the pipeline's knobs.
        values: ``{name: value}``; values may be numbers or numeric strings.
        partial: when True, only the given names are returned (still checked).

    Returns:
        ``{name: int}`` in declaration order.

    Raises:
        KnobError: an unknown name, a non-integer, or a value outside its knob's bounds.
    """
    by_name = {k.name: k for k in knobs}
    if not isinstance(values, Mapping):
        raise KnobError(None, f"knob values must be an object of name -> integer, got {values!r:.80}")
    unknown = sorted(str(n) for n in values if n not in by_name)
    if unknown:
        raise KnobError(unknown[0], f"is not a knob of this pipeline; its knobs are {sorted(by_name)}")
    out: dict[str, int] = {}
    for knob in knobs:
        if knob.name in values:
            out[knob.name] = knob.check(values[knob.name])
        elif not partial:
            out[knob.name] = knob.default
    return out


def knobs_to_json(knobs: Iterable[Knob]) -> str:
    """The knob declarations as a JSON array (see :meth:`Knob.to_dict`)."""
    return json.dumps([k.to_dict() for k in knobs])


def knobs_from_json(text: str | bytes | None) -> tuple[Knob, ...]:
    """Parse :func:`knobs_to_json` output (a runner's published knobs are input: checked in full).

    Raises:
        KnobError: not a JSON array of valid knobs, or an invalid set (:func:`check_knob_set`).
    """
    try:
        data = json.loads(text or "")
    except (ValueError, TypeError) as exc:
        raise KnobError(None, f"knob declarations are not JSON: {exc}") from None
    if not isinstance(data, list):
        raise KnobError(None, "knob declarations must be a JSON array")
    return check_knob_set([Knob.from_dict(item) for item in data])


BuildFunction = Callable[[Any, Mapping[str, int]], Any]


@dataclass(frozen=True)
class PipelineSpec:
    """A loaded pipeline: its ``MODULE:FUNCTION`` reference, build function and knobs."""

    ref: str
    build: BuildFunction
    knobs: tuple[Knob, ...]

    def knob(self, target: KnobTarget) -> Knob | None:
        """The (first) knob that sets ``target``, or None."""
        return next((k for k in self.knobs if k.sets is target), None)


def pipeline(*, knobs: Sequence[Knob]) -> Callable[[BuildFunction], BuildFunction]:
    """Decorator declaring a build function's knobs (stored as ``function.knobs``).

    Raises:
        KnobError: an invalid knob set (:func:`check_knob_set`).
    """
    checked = check_knob_set(knobs)

    def wrap(function: BuildFunction) -> BuildFunction:
        function.knobs = checked  # type: ignore[attr-defined]
        return function

    return wrap


def load_pipeline(ref: str) -> PipelineSpec:
    """Load ``MODULE:FUNCTION`` from ``sys.path``: the operator's own command-line choice.

    The knobs come from ``FUNCTION.knobs`` (the :func:`pipeline` decorator), else from the module's
    ``KNOBS`` list.

    Raises:
        PipelineLoadError: a malformed reference, a module that fails to import, a missing or
            non-callable function, or no knob declaration; the message says what to do.
        KnobError: the declared knobs are invalid.
    """
    module_name, sep, attr = (ref or "").partition(":")
    if not sep or not module_name or not attr or not all(p.isidentifier() for p in module_name.split(".")) \
            or not attr.isidentifier():
        raise PipelineLoadError(f"--pipeline must be MODULE:FUNCTION, e.g. mypipelines.clicks:build, got {ref!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise PipelineLoadError(f"cannot import pipeline module {module_name!r}: {exc}; put its folder on "
                                "PYTHONPATH (or run from it)") from exc
    build = getattr(module, attr, None)
    if not callable(build):
        raise PipelineLoadError(f"module {module_name!r} has no function {attr!r} (build(spark, knobs) -> "
                                "StreamingQuery)")
    knobs = getattr(build, "knobs", None)
    if knobs is None:
        knobs = getattr(module, "KNOBS", None)
    if knobs is None:
        raise PipelineLoadError(f"pipeline {ref!r} declares no knobs: decorate {attr} with "
                                "@sparkclient.contract.spec.pipeline(knobs=[...]) or define KNOBS in the module")
    return PipelineSpec(ref=ref, build=build, knobs=check_knob_set(knobs))


@dataclass(frozen=True)
class RunContext:
    """Where the runner runs a pipeline: the job name and a work directory for its checkpoint and
    sink (read by a build function through :func:`run_context`)."""

    job: str
    workdir: Path

    @property
    def checkpoint(self) -> Path:
        """The conventional checkpoint location, ``<workdir>/checkpoint``."""
        return self.workdir / "checkpoint"


def run_context() -> RunContext:
    """The :class:`RunContext` the runner set for this driver (``SPARKSCALER_JOB`` /
    ``SPARKSCALER_WORKDIR``); outside a runner: job ``local`` and the current directory."""
    return RunContext(job=os.environ.get(ENV_JOB, "local"), workdir=Path(os.environ.get(ENV_WORKDIR, ".")))
