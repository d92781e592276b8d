"""The memory options one decision reads (rows of ``scaling.policy.options.OPTIONS``, the web app's
``memory_*`` and ``guard_max_change_factor``), as one value with the table's defaults."""

from __future__ import annotations

from dataclasses import dataclass, fields

from scaling.policy.option_types import PolicyError
from scaling.policy.options import default
from scaling.policy.options import errors as option_errors

__all__ = ["MEMORY_OPTIONS", "MemoryPolicy"]


@dataclass(frozen=True)
class MemoryPolicy:
    """The memory gate's thresholds (shares 0..1), the recommendation's overhead (share), growth under
    pressure (×) and bounds (MB), ``memory_apply`` and ``guard_max_change_factor`` (the most a heap
    that rides along moves per step). Raises ``PolicyError`` naming an option out of its bounds."""

    memory_gc_pressure_threshold: float = default("memory_gc_pressure_threshold")
    memory_heap_usage_threshold: float = default("memory_heap_usage_threshold")
    memory_tuning_overhead: float = default("memory_tuning_overhead")
    memory_pressure_growth: float = default("memory_pressure_growth")
    memory_min_mb: int = default("memory_min_mb")
    memory_max_mb: int = default("memory_max_mb")
    memory_apply: bool = default("memory_apply")
    guard_max_change_factor: float = default("guard_max_change_factor")

    def __post_init__(self) -> None:
        problems = option_errors({f.name: getattr(self, f.name) for f in fields(self)})
        if problems:
            raise PolicyError(problems[0])
        if self.memory_min_mb > self.memory_max_mb:
            raise PolicyError(f"memory_min_mb: {self.memory_min_mb} is above memory_max_mb {self.memory_max_mb}")


#: The option names :class:`MemoryPolicy` holds, in its field order.
MEMORY_OPTIONS = tuple(f.name for f in fields(MemoryPolicy))
