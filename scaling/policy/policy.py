"""Scaling policy options (``scaling.policy.options.OPTIONS`` declares each: default, bounds, the Flink
key it mirrors). Names mirror Flink's ``job.autoscaler.*`` keys."""

from __future__ import annotations

from dataclasses import dataclass, fields

from scaling.policy.option_types import PolicyError
from scaling.policy.options import OPTION, default
from scaling.policy.options import errors as option_errors
from scaling.policy.periods import parse_period

ALIGNMENT_MODES = OPTION["alignment"].values
"""Flink main's ``job.autoscaler.scaling.parallelism-alignment.mode`` built-ins (FLIP-586,
``alignment.BuiltInAlignmentMode``): they adjust the target but never block a scaling."""
LEGACY_ADJUST_MODES = OPTION["key_group_partitions_adjust_mode"].values
"""The deprecated ``job.autoscaler.scaling.key-group.partitions.adjust.mode`` values (Flink
``alignment.KeyGroupOrPartitionsAdjustMode``), with their blocking fallback."""


def utilization_band(target: float, minimum: float | None = None, maximum: float | None = None
                     ) -> tuple[float, float]:
    """The utilization band (min, max), 0..1: FLIP-271 ``utilization.min`` / ``utilization.max``,
    each defaulting to ``target ∓ 0.3`` clipped to [0, 1]."""
    low = minimum if minimum is not None else max(0.0, target - 0.3)
    high = maximum if maximum is not None else min(1.0, target + 0.3)
    return (round(low, 10), round(high, 10))


#: FLIP-271's band in backlog processing: [0, 1], so that a scale-down never triggers a scaling.
BACKLOG_BAND = (0.0, 1.0)


def effective_band(band: tuple[float, float], backlog_mode: bool) -> tuple[float, float]:
    """The band a plan compares its needed utilization with: ``band`` (the policy's, 0..1), or
    :data:`BACKLOG_BAND` in backlog mode."""
    return BACKLOG_BAND if backlog_mode else band


@dataclass(frozen=True)
class Policy:
    """Options of the DS2 / FLIP-271 policy (SCENARIO.md ``policy``) and of the other policies.

    Each field is a row of ``scaling.policy.options.OPTIONS`` (``Scope.SHARED`` or ``Scope.POLICY``): its
    default, unit, bounds, Flink key and meaning are there and in ``docs/POLICY.md``, generated from it.
    """

    utilization_target: float = default("utilization_target")
    utilization_min: float | None = default("utilization_min")
    utilization_max: float | None = default("utilization_max")
    scale_up_max_factor: float = default("scale_up_max_factor")
    scale_down_max_factor: float = default("scale_down_max_factor")
    vertex_min_parallelism: int = default("vertex_min_parallelism")
    vertex_max_parallelism: int = default("vertex_max_parallelism")
    catch_up_duration_s: float = default("catch_up_duration_s")
    restart_time_s: float = default("restart_time_s")
    backlog_lag_threshold_s: float = default("backlog_lag_threshold_s")
    scale_down_interval_s: float = default("scale_down_interval_s")
    scaling_sources_enabled: bool = default("scaling_sources_enabled")
    excluded_vertices: tuple[str, ...] = default("excluded_vertices")
    alignment: str | None = default("alignment")
    effectiveness_detection_enabled: bool = default("effectiveness_detection_enabled")
    effectiveness_threshold: float = default("effectiveness_threshold")
    restart_time_tracking_enabled: bool = default("restart_time_tracking_enabled")
    restart_time_limit_s: float = default("restart_time_limit_s")
    excluded_periods: tuple[str, ...] = default("excluded_periods")
    algorithm: str = default("algorithm")
    batch_ratio_scale_up: float = default("batch_ratio_scale_up")
    batch_ratio_scale_down: float = default("batch_ratio_scale_down")
    min_parallelism_increase: int = default("min_parallelism_increase")
    key_group_partitions_adjust_mode: str | None = default("key_group_partitions_adjust_mode")
    observed_scalability_enabled: bool = default("observed_scalability_enabled")
    observed_scalability_min_observations: int = default("observed_scalability_min_observations")
    observed_scalability_coefficient_min: float = default("observed_scalability_coefficient_min")
    activation_evaluations: int = default("activation_evaluations")
    scale_down_veto_batch_ratio: float = default("scale_down_veto_batch_ratio")
    scale_down_veto_backlog_growth: float = default("scale_down_veto_backlog_growth")
    batch_overrun_ratio: float = default("batch_overrun_ratio")
    scale_up_min_efficiency: float = default("scale_up_min_efficiency")

    def __post_init__(self) -> None:
        """Each option against its row of ``scaling.policy.options.OPTIONS`` (kind, bounds, choices), then
        the rules between options. Raises ``PolicyError`` naming the option."""
        # Flink spells the modes as enum names: ``scaling.parallelism-alignment.mode: EVENLY_SPREAD``
        # (``alignment.ParallelismAligner.resolveByName`` matches ``BuiltInAlignmentMode.name()``) and
        # the legacy ``KeyGroupOrPartitionsAdjustMode`` parses case-insensitively; accept those too.
        for name in ("alignment", "key_group_partitions_adjust_mode"):
            value = getattr(self, name)
            if isinstance(value, str) and value not in OPTION[name].values and value.lower() in OPTION[name].values:
                object.__setattr__(self, name, value.lower())
        for name in ("excluded_vertices", "excluded_periods"):
            if isinstance(getattr(self, name), list):
                object.__setattr__(self, name, tuple(getattr(self, name)))
        problems = option_errors({f.name: getattr(self, f.name) for f in fields(self)})
        if problems:
            raise PolicyError(problems[0])
        if not self.band[0] <= self.utilization_target <= self.band[1]:
            raise PolicyError(f"utilization_target: {self.utilization_target} lies outside the band {self.band}")
        if self.vertex_min_parallelism > self.vertex_max_parallelism:
            raise PolicyError(f"vertex_min_parallelism: {self.vertex_min_parallelism} is above "
                              f"vertex_max_parallelism {self.vertex_max_parallelism}")
        if not self.batch_ratio_scale_down < self.batch_ratio_scale_up:
            raise PolicyError(f"batch_ratio_scale_down: must be below batch_ratio_scale_up "
                              f"{self.batch_ratio_scale_up}, got {self.batch_ratio_scale_down}")
        if self.excluded_periods:
            for period in self.excluded_periods:
                parse_period(period)

    @property
    def alignment_mode(self) -> tuple[str, bool]:
        """``(mode, legacy)``: the alignment in force (Flink ``ParallelismAligner.resolve``): an
        explicit ``alignment`` wins, then the deprecated adjust mode (``legacy`` True), then
        ``balanced``."""
        if self.alignment is not None:
            return self.alignment, False
        if self.key_group_partitions_adjust_mode is not None:
            return self.key_group_partitions_adjust_mode, True
        return "balanced", False

    @property
    def band(self) -> tuple[float, float]:
        """The utilization band (min, max): FLIP-271 ``utilization.min`` / ``utilization.max``."""
        return utilization_band(self.utilization_target, self.utilization_min, self.utilization_max)
