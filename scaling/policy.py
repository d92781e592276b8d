"""Scaling policy options. Names mirror Flink's ``job.autoscaler.*`` keys; defaults are Flink's."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

ALIGNMENT_MODES = ("balanced", "evenly_spread", "off")
"""Flink main's ``job.autoscaler.scaling.parallelism-alignment.mode`` built-ins (FLIP-586,
``alignment.BuiltInAlignmentMode``): they adjust the target but never block a scaling."""
LEGACY_ADJUST_MODES = ("evenly_spread", "maximize_utilisation")
"""The deprecated ``job.autoscaler.scaling.key-group.partitions.adjust.mode`` values (Flink
``alignment.KeyGroupOrPartitionsAdjustMode``), with their blocking fallback."""


class PolicyError(ValueError):
    """A policy option is out of range; the message names the option."""


def _number(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise PolicyError(f"{name}: must be a number, got {value!r}")
    return float(value)


def utilization_band(target: float, minimum: float | None = None, maximum: float | None = None
                     ) -> tuple[float, float]:
    """The utilization band (min, max), 0..1: FLIP-271 ``utilization.min`` / ``utilization.max``,
    each defaulting to ``target ∓ 0.3`` clipped to [0, 1]."""
    low = minimum if minimum is not None else max(0.0, target - 0.3)
    high = maximum if maximum is not None else min(1.0, target + 0.3)
    return (round(low, 10), round(high, 10))


@dataclass(frozen=True)
class Policy:
    """Options of the DS2 / FLIP-271 policy (SCENARIO.md ``policy``) and of the other policies.

    Attributes:
        utilization_target: ``job.autoscaler.utilization.target``, in (0, 1].
        utilization_min / utilization_max: the band; default target ∓ 0.3 clipped to [0, 1].
        scale_up_max_factor / scale_down_max_factor: ``job.autoscaler.scale-up.max-factor`` and
            ``job.autoscaler.scale-down.max-factor``: the scale factor is clamped to
            [1 − scale_down_max_factor, 1 + scale_up_max_factor] (FLIP-271 ``JobVertexScaler``); each
            >= 0 (Flink ``AutoscalerValidator``, FLINK-39826).
        vertex_min_parallelism / vertex_max_parallelism: ``job.autoscaler.vertex.{min,max}-parallelism``.
        catch_up_duration_s: ``job.autoscaler.catch-up.duration``, seconds; 0 disables backlog-based
            scaling (no catch-up or restart rate), as in Flink ``ScalingMetricEvaluator``.
        restart_time_s: ``job.autoscaler.restart.time``, seconds.
        restart_time_tracking_enabled / restart_time_limit_s: ``job.autoscaler.restart.time-tracking.
            {enabled,limit}``: learn the restart time from measured rescale downtimes, seconds (limit
            default 15 min, Flink ``AutoScalerOptions.TRACKED_RESTART_TIME_LIMIT``).
        backlog_lag_threshold_s: ``job.autoscaler.backlog-processing.lag-threshold``, seconds.
        scale_down_interval_s: ``job.autoscaler.scale-down.interval`` (FLINK-36018), seconds.
        scaling_sources_enabled: ``job.autoscaler.scaling.sources.enabled``.
        alignment: ``balanced``, ``evenly_spread`` or ``off`` (Flink main's
            ``job.autoscaler.scaling.parallelism-alignment.mode``, FLIP-586); None (unset) means
            ``key_group_partitions_adjust_mode`` when that is set, else ``balanced`` (Flink
            ``ParallelismAligner.resolve``).
        key_group_partitions_adjust_mode: the deprecated ``job.autoscaler.scaling.key-group.
            partitions.adjust.mode``: ``evenly_spread`` or ``maximize_utilisation``, honoured only
            when ``alignment`` is unset; it keeps Flink's blocking fallback.
        effectiveness_detection_enabled / effectiveness_threshold: ``job.autoscaler.scaling.
            effectiveness.detection.enabled`` / ``.threshold``; the threshold must be in [0, 1] only
            when detection is on (FLINK-39826).
        excluded_vertices: ``job.autoscaler.vertex.exclude.ids``.
        excluded_periods: ``job.autoscaler.excluded.periods``: daily ``HH:MM-HH:MM`` windows (UTC)
            or 5-field cron expressions; the plan is computed but not executable inside them.
        algorithm: a name in the registry (``scaling.algorithms.algorithm_names()``): ``ds2``
            (default), ``batch-ratio`` or ``min-increase``. Never imported as a module.
        batch_ratio_scale_up / batch_ratio_scale_down: SPARK-12133's
            ``spark.streaming.dynamicAllocation.scalingUpRatio`` (0.9) / ``scalingDownRatio`` (0.3).
        min_parallelism_increase: FLIP-160 ``jobmanager.adaptive-scheduler.min-parallelism-increase``.
        observed_scalability_enabled / observed_scalability_min_observations /
            observed_scalability_coefficient_min: ``job.autoscaler.observed-scalability.*``
            (FLINK-30571 follow-up, Flink ``JobVertexScaler.calculateObservedScalingCoefficient``):
            divide the scale factor by a scaling coefficient fitted to the job's own history; the
            coefficient's minimum must be in [0.01, 1] only when it is enabled (FLINK-39826).
        activation_evaluations: DS2's activation time (Kalavri et al., OSDI 2018, §4; the DS2
            controller's ``scaling_manager.activation_time``, default 1): the number of consecutive
            evaluations (policy decisions) that must recommend a rescale in the same direction before
            it is applied. 1 acts on the first recommendation (Flink's behaviour). Not a Flink option.
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
    alignment: str | None = None
    effectiveness_detection_enabled: bool = False
    effectiveness_threshold: float = 0.1
    restart_time_tracking_enabled: bool = False
    restart_time_limit_s: float = 900.0
    excluded_periods: tuple[str, ...] = field(default=())
    algorithm: str = "ds2"
    batch_ratio_scale_up: float = 0.9
    batch_ratio_scale_down: float = 0.3
    min_parallelism_increase: int = 1
    key_group_partitions_adjust_mode: str | None = None
    observed_scalability_enabled: bool = False
    observed_scalability_min_observations: int = 3
    observed_scalability_coefficient_min: float = 0.5
    activation_evaluations: int = 1

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type == "float" and value is None:
                raise PolicyError(f"{f.name}: must be a number, got null")
            if f.type in ("float", "float | None") and value is not None:
                if not math.isfinite(_number(f.name, value)):
                    raise PolicyError(f"{f.name}: must be a finite number, got {value!r}")
            if f.type == "int" and (isinstance(value, bool) or not isinstance(value, int)):
                raise PolicyError(f"{f.name}: must be an integer, got {value!r}")
            if f.type == "bool" and not isinstance(value, bool):
                raise PolicyError(f"{f.name}: must be true or false, got {value!r}")
        # Flink spells the modes as enum names: ``scaling.parallelism-alignment.mode: EVENLY_SPREAD``
        # (``alignment.ParallelismAligner.resolveByName`` matches ``BuiltInAlignmentMode.name()``) and
        # the legacy ``KeyGroupOrPartitionsAdjustMode`` parses case-insensitively; accept those too.
        for name, known in (("alignment", ALIGNMENT_MODES),
                            ("key_group_partitions_adjust_mode", LEGACY_ADJUST_MODES)):
            value = getattr(self, name)
            if isinstance(value, str) and value not in known and value.lower() in known:
                object.__setattr__(self, name, value.lower())
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
        if not 0 <= self.catch_up_duration_s:
            raise PolicyError(f"catch_up_duration_s: must be >= 0 (0 disables catch-up), got {self.catch_up_duration_s}")
        for name in ("restart_time_s", "restart_time_limit_s", "backlog_lag_threshold_s"):
            if not 0 <= getattr(self, name) < math.inf:
                raise PolicyError(f"{name}: must be >= 0, got {getattr(self, name)}")
        # Flink ``AutoscalerValidator`` (FLINK-39826): both factors at least 0, no upper bound. An up
        # factor of 0 never scales up; a down factor of 1 or more leaves scale-downs unclamped
        # (``JobVertexScaler``'s ``1 - max-factor`` is then at or below 0).
        for name in ("scale_up_max_factor", "scale_down_max_factor"):
            if not 0 <= getattr(self, name):
                raise PolicyError(f"{name}: must be >= 0, got {getattr(self, name)}")
        if self.alignment is not None and self.alignment not in ALIGNMENT_MODES:
            raise PolicyError(f"alignment: must be one of {', '.join(ALIGNMENT_MODES)}, got {self.alignment!r}")
        if self.key_group_partitions_adjust_mode is not None and \
                self.key_group_partitions_adjust_mode not in LEGACY_ADJUST_MODES:
            raise PolicyError(f"key_group_partitions_adjust_mode: must be one of {', '.join(LEGACY_ADJUST_MODES)}, "
                              f"got {self.key_group_partitions_adjust_mode!r}")
        if self.observed_scalability_min_observations < 1:
            raise PolicyError(f"observed_scalability_min_observations: must be >= 1, "
                              f"got {self.observed_scalability_min_observations}")
        # Flink ``AutoscalerValidator.validateNumberIfEnabled`` (FLINK-39826): an option of a feature is
        # checked only when the feature is on; off, it has no effect and any finite value is accepted.
        if self.observed_scalability_enabled and not 0.01 <= self.observed_scalability_coefficient_min <= 1:
            raise PolicyError(f"observed_scalability_coefficient_min: must be within [0.01, 1] when "
                              f"observed_scalability_enabled, got {self.observed_scalability_coefficient_min}")
        if self.activation_evaluations < 1:
            raise PolicyError(f"activation_evaluations: must be >= 1 (1 acts on the first recommendation), "
                              f"got {self.activation_evaluations}")
        if self.effectiveness_detection_enabled and not 0 <= self.effectiveness_threshold <= 1:
            raise PolicyError(f"effectiveness_threshold: must be within [0, 1] when effectiveness_detection_enabled, "
                              f"got {self.effectiveness_threshold}")
        if not 0 <= self.batch_ratio_scale_down < self.batch_ratio_scale_up:
            raise PolicyError(f"batch_ratio_scale_down: must be >= 0 and below batch_ratio_scale_up "
                              f"{self.batch_ratio_scale_up}, got {self.batch_ratio_scale_down}")
        if self.min_parallelism_increase < 1:
            raise PolicyError(f"min_parallelism_increase: must be >= 1, got {self.min_parallelism_increase}")
        if not isinstance(self.algorithm, str) or not self.algorithm:
            raise PolicyError(f"algorithm: must be a policy name, got {self.algorithm!r}")
        for name in ("excluded_vertices", "excluded_periods"):
            value = getattr(self, name)
            if not isinstance(value, tuple) or not all(isinstance(v, str) for v in value):
                raise PolicyError(f"{name}: must be a list of strings, got {value!r}")
        if self.excluded_periods:
            from scaling.periods import parse_period  # noqa: PLC0415 - avoid an import cycle

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
