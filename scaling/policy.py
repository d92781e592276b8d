"""Scaling policy options. Names mirror Flink's ``job.autoscaler.*`` keys; defaults are Flink's."""

from __future__ import annotations

from dataclasses import dataclass, field


class PolicyError(ValueError):
    """A policy option is out of range; the message names the option."""


@dataclass(frozen=True)
class Policy:
    """Options of the DS2 / FLIP-271 policy (SCENARIO.md ``policy``).

    Attributes:
        utilization_target: ``job.autoscaler.utilization.target``, in (0, 1].
        utilization_min / utilization_max: the band; default target ∓ 0.3 clipped to [0, 1].
        scale_up_max_factor / scale_down_max_factor: ``job.autoscaler.scale-up.max-factor``,
            ``job.autoscaler.scale-down.max-factor``.
        vertex_min_parallelism / vertex_max_parallelism: ``job.autoscaler.vertex.{min,max}-parallelism``.
        catch_up_duration_s: ``job.autoscaler.catch-up.duration``, seconds.
        restart_time_s: ``job.autoscaler.restart.time``, seconds.
        backlog_lag_threshold_s: ``job.autoscaler.backlog-processing.lag-threshold``, seconds.
        scale_down_interval_s: ``job.autoscaler.scale-down.interval`` (FLINK-36018), seconds.
    """

    utilization_target: float = 0.7
    utilization_min: float | None = None
    utilization_max: float | None = None
    scale_up_max_factor: float = 100000.0
    scale_down_max_factor: float = 0.6
    vertex_min_parallelism: int = 1
    vertex_max_parallelism: int = 200
    catch_up_duration_s: float = 1800.0
    restart_time_s: float = 300.0
    backlog_lag_threshold_s: float = 300.0
    scale_down_interval_s: float = 3600.0
    scaling_sources_enabled: bool = True
    excluded_vertices: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if not 0 < self.utilization_target <= 1:
            raise PolicyError(f"utilization_target: must be within (0, 1], got {self.utilization_target}")
        for name in ("utilization_min", "utilization_max"):
            value = getattr(self, name)
            if value is not None and not 0 <= value <= 1:
                raise PolicyError(f"{name}: must be within [0, 1], got {value}")
        if not self.band[0] <= self.utilization_target <= self.band[1]:
            raise PolicyError(f"utilization_target: {self.utilization_target} lies outside the band {self.band}")
        if self.vertex_min_parallelism < 1:
            raise PolicyError(f"vertex_min_parallelism: must be >= 1, got {self.vertex_min_parallelism}")
        if self.vertex_min_parallelism > self.vertex_max_parallelism:
            raise PolicyError(f"vertex_min_parallelism: {self.vertex_min_parallelism} is above "
                              f"vertex_max_parallelism {self.vertex_max_parallelism}")
        if self.catch_up_duration_s <= 0:
            raise PolicyError(f"catch_up_duration_s: must be > 0, got {self.catch_up_duration_s}")
        if self.restart_time_s < 0:
            raise PolicyError(f"restart_time_s: must be >= 0, got {self.restart_time_s}")
        if self.scale_up_max_factor <= 0:
            raise PolicyError(f"scale_up_max_factor: must be > 0, got {self.scale_up_max_factor}")
        if not 0 < self.scale_down_max_factor <= 1:
            raise PolicyError(f"scale_down_max_factor: must be within (0, 1], got {self.scale_down_max_factor}")

    @property
    def band(self) -> tuple[float, float]:
        """The utilization band (min, max): FLIP-271 ``utilization.min`` / ``utilization.max``."""
        low = self.utilization_min if self.utilization_min is not None else max(0.0, self.utilization_target - 0.3)
        high = self.utilization_max if self.utilization_max is not None else min(1.0, self.utilization_target + 0.3)
        return (round(low, 10), round(high, 10))
