"""Every policy option, declared once, as Flink's ``AutoScalerOptions`` declares each
``job.autoscaler.*`` key once as a ``ConfigOption``: name, kind, unit, default, inclusive bounds, the
Flink key it mirrors, help text and, where our default differs from Flink's, why.

``scaling.Policy`` takes its defaults and per-option checks from :data:`OPTIONS`; the web app builds
a job's policy fields, their validation, the admin form and the API from it; ``python -m scaling
options --markdown`` renders ``docs/POLICY.md`` from it. Options of ``Scope.WEB`` (the proposal
lifecycle, retries, guardrails) exist in the web app only.
"""

from __future__ import annotations

from scaling.policy.option_types import Kind, Option, Scope, option_error

DAY_S, WEEK_S = 86_400.0, 604_800.0
INT_MAX = 2**31 - 1
"""Java's ``Integer.MAX_VALUE``: the bound of the options Flink leaves unbounded (its own tests set
parallelism limits and factors to it); every product with it stays finite."""
MAX_CORES = 4096

AUTOSCALER = "job.autoscaler."

OPTIONS: tuple[Option, ...] = (
    # --- the DS2 / FLIP-271 policy (scaling.Policy) ------------------------------------------------
    Option("algorithm", Kind.NAME, "ds2", unit="",
           help="The scaling policy, by its name in the registry (scaling/planner/algorithms.py): ds2 (FLIP-271 / DS2, "
                "default), batch-ratio (SPARK-12133) or min-increase (FLIP-160), the last two micro-batch only. "
                "Any other name is refused; nothing named here is imported."),
    Option("utilization_target", Kind.NUMBER, 0.7, unit="share", bounds=(0.05, 1.0),
           flink_key=AUTOSCALER + "utilization.target",
           help="The share of each core the plan aims to keep busy."),
    Option("utilization_min", Kind.NUMBER, None, unit="share", bounds=(0.0, 1.0), nullable=True,
           flink_key=AUTOSCALER + "utilization.min",
           help="Lower edge of the utilization band; empty = target − 0.3, clipped to [0, 1]."),
    Option("utilization_max", Kind.NUMBER, None, unit="share", bounds=(0.0, 1.0), nullable=True,
           flink_key=AUTOSCALER + "utilization.max",
           help="Upper edge of the utilization band; empty = target + 0.3, clipped to [0, 1]."),
    Option("catch_up_duration_s", Kind.NUMBER, 120.0, unit="s", bounds=(0.0, DAY_S),
           flink_key=AUTOSCALER + "catch-up.duration", flink_default=1800.0,
           differs_because="A Spark micro-batch query restarts in seconds, not in the minutes a Flink job's state "
                           "restore takes, and the web app's users have always run with a two-minute catch-up: "
                           "the backlog of a restart drains within it.",
           help="Seconds to drain the backlog (and the records that arrive during a restart) after a rescale. "
                "0 disables backlog-based scaling: no catch-up and no restart rate (Flink ScalingMetricEvaluator)."),
    Option("restart_time_s", Kind.NUMBER, 15.0, unit="s", bounds=(0.0, DAY_S), flink_key=AUTOSCALER + "restart.time",
           flink_default=300.0,
           differs_because="Measured rescales of a Spark query (in the driver, or a driver handover) take seconds; "
                           "Flink's five minutes cover a job restart with state restore. The web app's users have "
                           "always run with 15 s.",
           help="Expected downtime of a rescale, seconds, until restart-time tracking measures it."),
    Option("restart_time_tracking_enabled", Kind.SWITCH, False, flink_key=AUTOSCALER + "restart.time-tracking.enabled",
           help="Plan with the measured rescale downtimes (capped at restart_time_limit_s) instead of "
                "restart_time_s."),
    Option("restart_time_limit_s", Kind.NUMBER, 900.0, unit="s", bounds=(0.0, DAY_S),
           flink_key=AUTOSCALER + "restart.time-tracking.limit",
           help="Cap on the tracked restart time, seconds (Flink's default, 15 min)."),
    Option("vertex_min_parallelism", Kind.INTEGER, 1, unit="tasks", bounds=(1, INT_MAX),
           flink_key=AUTOSCALER + "vertex.min-parallelism", help="Fewest partitions (tasks) of one stage."),
    Option("vertex_max_parallelism", Kind.INTEGER, 64, unit="tasks", bounds=(1, INT_MAX),
           flink_key=AUTOSCALER + "vertex.max-parallelism", flink_default=200,
           differs_because="A Spark stage's partitions are the tasks of every micro-batch, each with a per-task "
                           "scheduling cost, and the web app's jobs run on a few dozen cores at most; the web app's "
                           "users have always run with 64.",
           help="Most partitions (tasks) of one stage. Bounds apply as [min(current, min), max(current, max)], "
                "so a bound never forces a change in the opposite direction."),
    Option("scale_up_max_factor", Kind.NUMBER, 100000.0, unit="factor", bounds=(0.0, float(INT_MAX)),
           flink_key=AUTOSCALER + "scale-up.max-factor",
           help="A stage (or the executor count) grows at most by 1 + this factor per evaluation; 0 never "
                "scales up (Flink AutoscalerValidator)."),
    Option("scale_down_max_factor", Kind.NUMBER, 0.6, unit="share", bounds=(0.0, float(INT_MAX)),
           flink_key=AUTOSCALER + "scale-down.max-factor",
           help="A stage (or the executor count) shrinks at most by this share per evaluation; 1 leaves "
                "scale-downs unclamped, as any larger value does (Flink AutoscalerValidator: at least 0)."),
    Option("backlog_lag_threshold_s", Kind.NUMBER, 300.0, unit="s", bounds=(0.0, 1e9),
           flink_key=AUTOSCALER + "backlog-processing.lag-threshold",
           help="Above this lag of a source, seconds, the job is processing a backlog: no scale-down."),
    Option("scale_down_interval_s", Kind.NUMBER, 3600.0, unit="s", bounds=(0.0, WEEK_S),
           flink_key=AUTOSCALER + "scale-down.interval",
           help="How long a scale-down is held (FLINK-36018), seconds; then the largest recommendation of that "
                "window applies (FLINK-36863). 0 scales down at once."),
    Option("activation_evaluations", Kind.INTEGER, 1, unit="evaluations", bounds=(1, 100),
           help="DS2's activation time (Kalavri et al., OSDI 2018, §4), not a Flink option: how many evaluations in "
                "a row must recommend a rescale in the same direction before it applies. 1 acts on the first "
                "(Flink's behaviour); 2 lets a short spike pass."),
    Option("scaling_sources_enabled", Kind.SWITCH, True, flink_key=AUTOSCALER + "scaling.sources.enabled",
           help="Whether source stages may be rescaled."),
    Option("excluded_vertices", Kind.STRINGS, (), flink_key=AUTOSCALER + "vertex.exclude.ids",
           help='Vertex (stage) ids never rescaled, as a JSON list ["v1"].'),
    Option("excluded_periods", Kind.STRINGS, (), flink_key=AUTOSCALER + "excluded.periods",
           help='Flink CalendarUtils expressions, as a JSON list: a daily window "HH:mm[:ss[:SSS]]-HH:mm[:ss[:SSS]]" '
                '(UTC, both ends inclusive, start before end: across midnight is two windows, '
                '"22:00-23:59:59:999" and "00:00-06:00"), a Quartz cron expression of 6 or 7 fields '
                '("sec min hour day-of-month month day-of-week [year]", ? allowed, no L/W/#), or both joined by '
                '"&&"; 5-field Unix cron is still accepted. Plans are computed but not executable inside them '
                "(scaling/policy/periods.py)."),
    Option("alignment", Kind.CHOICE, None, nullable=True, flink_key=AUTOSCALER + "scaling.parallelism-alignment.mode",
           choices=(("balanced", "balanced"), ("evenly_spread", "evenly spread"), ("off", "off")),
           help="How a stage's new parallelism aligns to its partitions or key groups (FLIP-586, Flink's "
                "BuiltInAlignmentMode). balanced: the first value that divides them evenly, or a load-reducing "
                "one; evenly_spread: only values that divide them evenly; off: no alignment. Alignment never "
                "vetoes a scaling: without an aligned value the target stays. Empty: "
                "key_group_partitions_adjust_mode when that is set, else balanced (Flink ParallelismAligner)."),
    Option("key_group_partitions_adjust_mode", Kind.CHOICE, None, nullable=True, scope=Scope.POLICY,
           flink_key=AUTOSCALER + "scaling.key-group.partitions.adjust.mode",
           choices=(("evenly_spread", "evenly spread"), ("maximize_utilisation", "maximize utilisation")),
           help="Deprecated in Flink; honoured only when alignment is empty, with Flink's blocking fallback "
                "(KeyGroupOrPartitionsAdjustMode). Scenarios only."),
    Option("effectiveness_detection_enabled", Kind.SWITCH, True, flink_default=False,
           flink_key=AUTOSCALER + "scaling.effectiveness.detection.enabled",
           differs_because="The web app has always blocked further scale-ups after one that did not raise the "
                           "capacity, until a person clears the block: an approved loop should not keep adding "
                           "cores that do not help. Flink only warns by default.",
           help="Block further scale-ups after a scale-up whose gain in processing rate was below "
                "effectiveness_threshold × the expected gain (FLIP-271 detectIneffectiveScaleUp); off, only warn. "
                "Continuous mode: per vertex, at the next evaluation. Web app (micro-batch): on the job's capacity "
                "(source records/s), once a scale-up is verified ineffective; its knobs are not scaled up again "
                "until a person clears the block."),
    Option("effectiveness_threshold", Kind.NUMBER, 0.1, unit="share", bounds=(0.0, 1.0),
           enabled_by="effectiveness_detection_enabled", flink_key=AUTOSCALER + "scaling.effectiveness.threshold",
           help="The share of the expected gain in processing rate below which a scale-up counts as ineffective."),
    Option("observed_scalability_enabled", Kind.SWITCH, False, flink_key=AUTOSCALER + "observed-scalability.enabled",
           help="Divide the scale factor by a scaling coefficient fitted to the job's own past rescales "
                "(Flink JobVertexScaler.calculateObservedScalingCoefficient): per stage in continuous mode, on "
                "the executor count in micro-batch mode, where more cores are predicted to help less."),
    Option("observed_scalability_min_observations", Kind.INTEGER, 3, unit="rescales", bounds=(1, 100),
           flink_key=AUTOSCALER + "observed-scalability.min-observations",
           help="Fewest past rescales before the coefficient is fitted (1.0, linear, until then). At most 3 are "
                "kept (Flink's history.max.count)."),
    Option("observed_scalability_coefficient_min", Kind.NUMBER, 0.5, unit="share", bounds=(0.01, 1.0),
           enabled_by="observed_scalability_enabled", flink_key=AUTOSCALER + "observed-scalability.coefficient-min",
           help="Lower clamp of the fitted scaling coefficient."),
    Option("scale_down_veto_batch_ratio", Kind.NUMBER, 0.9, unit="ratio", bounds=(0.0, 100.0),
           help="No scale-down (fewer executors, or a stage on fewer task slots min(tasks, cores)) while the "
                "window's batch ratio R = mean batch duration / trigger interval is at or above this "
                "(scale-down-vetoed). The value of "
                "Spark's spark.streaming.dynamicAllocation.scalingUpRatio (SPARK-12133), the ratio at which Spark "
                "adds executors. Flink has no such key: its operators run continuously, with no trigger interval "
                "for a batch to overrun, so its autoscaler reads busy time and backpressure only; a micro-batch "
                "that overruns its trigger delays every later batch, the first sign Spark itself acts on."),
    Option("scale_down_veto_backlog_growth", Kind.NUMBER, 0.05, unit="share", bounds=(0.0, 1.0),
           help="No scale-down while the sources' backlog grows faster than this share of their input rate "
                "(records/s per records/s; scale-down-vetoed). Up to it the growth is noise: the difference of two "
                "rates sampled at batch boundaries, which jitter by a few percent between windows. A source "
                "with no input vetoes at any growth. Flink has no such key: FLIP-271 counts the growth in "
                "TARGET_DATA_RATE only."),
    Option("batch_overrun_ratio", Kind.NUMBER, 1.0, unit="ratio", bounds=(0.0, 100.0),
           help="While the load is inside the utilization band, every batch of the window (at least 2) running "
                "longer than this × the trigger interval while the backlog grows beyond scale_down_veto_backlog_growth "
                "is a scale-up trigger (batch-overrun): the cores grow to bring R to utilization_target, "
                "linearly (DS2). Long batches with a steady backlog keep up (the next batch starts at once "
                "and covers more data): no trigger. 1 = the batch overruns its trigger. Flink has "
                "no such key (see scale_down_veto_batch_ratio)."),
    Option("scale_up_min_efficiency", Kind.NUMBER, 0.3, unit="share", bounds=(0.0, 1.0),
           help="Micro-batch: cores are added only while each step brings at least this share of the gain linear "
                "scaling would bring to the predicted utilization at the target rate: (U(c) − U(c′)) / (U(c) × "
                "(1 − c/c′)) ≥ this, looking up to twice c for the next count that changes a stage's task slots. "
                "A job that scales linearly scores 1 at any size and is never stopped; a job held by a pinned or "
                "bounded stage scores the share of U the other stages carry (Amdahl), so the plan stops where "
                "that share falls below this (diminishing-returns). 0 adds every core that lowers U. Flink has "
                "no such key: its JobVertexScaler divides the scale factor by the observed scaling coefficient, "
                "which makes a sub-linear vertex ask for more, not fewer, instances."),
    Option("batch_ratio_scale_up", Kind.NUMBER, 0.9, unit="ratio", bounds=(0.0, 100.0),
           help="batch-ratio algorithm: spark.streaming.dynamicAllocation.scalingUpRatio (SPARK-12133)."),
    Option("batch_ratio_scale_down", Kind.NUMBER, 0.3, unit="ratio", bounds=(0.0, 100.0),
           help="batch-ratio algorithm: spark.streaming.dynamicAllocation.scalingDownRatio (SPARK-12133); "
                "below batch_ratio_scale_up."),
    Option("min_parallelism_increase", Kind.INTEGER, 1, unit="tasks", bounds=(1, INT_MAX),
           help="min-increase algorithm: jobmanager.adaptive-scheduler.min-parallelism-increase (FLIP-160)."),
    # --- the web app only: the live loop, sizing bounds, guardrails, proposals, retries, verification --
    Option("mode", Kind.CHOICE, "manual", scope=Scope.WEB,
           choices=(("advisor", "advisor (proposals only, never executed)"), ("manual", "manual (a person approves)"),
                    ("auto", "auto (auto-approve inside the guardrails)")),
           help="advisor: proposals are shown, never executed. manual: a person approves each proposal. auto: "
                "proposals inside the guardrails are approved by the policy, the others wait for a person."),
    Option("metric_window_s", Kind.NUMBER, 45.0, unit="s", bounds=(1.0, DAY_S), scope=Scope.WEB,
           flink_key=AUTOSCALER + "metrics.window", flink_default=900.0,
           differs_because="A micro-batch job reports every trigger, so 45 s hold several batches; Flink's 15 min "
                           "smooth per-second metrics of a job that rescales rarely.",
           help="Seconds of metrics per evaluation."),
    Option("min_cores", Kind.INTEGER, 1, unit="cores", bounds=(1, MAX_CORES), scope=Scope.WEB,
           help="Fewest cores (executors × cores each) to run with."),
    Option("max_cores", Kind.INTEGER, 8, unit="cores", bounds=(1, MAX_CORES), scope=Scope.WEB,
           help="Most cores the planner may propose."),
    Option("guard_max_change_factor", Kind.NUMBER, 2.0, unit="factor", bounds=(1.0, 1000.0), scope=Scope.WEB,
           help="Auto-approve only when no knob (cores or the partitions of a stage) changes by more than this "
                "factor in one proposal (2 = at most double or halve)."),
    Option("guard_max_executors", Kind.INTEGER, 8, unit="executors", bounds=(1, MAX_CORES), scope=Scope.WEB,
           help="Quota: auto-approve only proposals that use at most this many executors (cores)."),
    Option("guard_directions", Kind.CHOICE, "up", scope=Scope.WEB,
           choices=(("up", "scale-ups only"), ("down", "scale-downs only"), ("both", "scale-ups and scale-downs")),
           help="Which directions may be auto-approved, e.g. scale-ups only."),
    Option("guard_excluded_periods", Kind.STRINGS, (), scope=Scope.WEB,
           help='Change windows closed to auto-approval: JSON list in the syntax of excluded_periods (daily '
                '"HH:mm[:ss]-HH:mm[:ss]" windows in UTC, start before end, or cron expressions). Proposals made '
                "inside one wait for a person."),
    Option("auto_approve_standby_wait_s", Kind.NUMBER, 120.0, unit="s", bounds=(0.0, 3600.0), scope=Scope.WEB,
           help="Auto mode, a change that needs a new driver (a memory knob, or the cores in local mode): the "
                "approval waits until the standby driver prepared for the proposal is ready, so the rescale hands "
                "over at once, for at most this many seconds; then it approves anyway (the rescale then waits "
                "for its standby). A standby that failed to start ends the wait. 0 approves at once."),
    Option("revision_min_change", Kind.NUMBER, 0.3, unit="share", bounds=(0.0, 100.0), scope=Scope.WEB,
           help="A pending proposal is revised in place only when the demand it answers (busy cores at the target "
                "rate) moved by more than this share (0.3 = 30 %), or its configuration would no longer carry the "
                "demand inside the utilization band. A backlog growing while it waits is not a revision."),
    Option("withdraw_after_evaluations", Kind.INTEGER, 3, unit="evaluations", bounds=(1, 1000), scope=Scope.WEB,
           help="Withdraw a pending proposal after this many evaluations in a row that no longer support it "
                "(load inside the band, or pointing the other way)."),
    Option("proposal_ttl_s", Kind.NUMBER, 900.0, unit="s", bounds=(1.0, WEEK_S), scope=Scope.WEB,
           help="A pending proposal expires after this many seconds without a decision."),
    Option("restart_strategy", Kind.CHOICE, "exponential-delay", scope=Scope.WEB,
           choices=(("none", "none (no retry)"), ("fixed-delay", "fixed delay"),
                    ("exponential-delay", "exponential delay"), ("failure-rate", "failure rate")),
           help="How a failed execution is retried (Flink restart strategies, FLIP-160). After the retries are "
                "spent the job is rolled back to its last configuration that succeeded."),
    Option("restart_attempts", Kind.INTEGER, 3, unit="attempts", bounds=(0, 100), scope=Scope.WEB,
           help="fixed-delay / exponential-delay: retries after the first failed attempt."),
    Option("restart_delay_s", Kind.NUMBER, 10.0, unit="s", bounds=(0.0, DAY_S), scope=Scope.WEB,
           help="fixed-delay and failure-rate: seconds between attempts; exponential-delay: the first back-off."),
    Option("restart_max_delay_s", Kind.NUMBER, 120.0, unit="s", bounds=(0.0, DAY_S), scope=Scope.WEB,
           help="exponential-delay: the longest back-off, seconds; at least restart_delay_s."),
    Option("restart_backoff_multiplier", Kind.NUMBER, 2.0, unit="factor", bounds=(1.0, 100.0), scope=Scope.WEB,
           help="exponential-delay: back-off growth per failure."),
    Option("failure_rate_max_failures", Kind.INTEGER, 3, unit="failures", bounds=(1, 1000), scope=Scope.WEB,
           help="failure-rate: give up when more failures than this fall within the interval."),
    Option("failure_rate_interval_s", Kind.NUMBER, 300.0, unit="s", bounds=(1.0, WEEK_S), scope=Scope.WEB,
           help="failure-rate: the interval, seconds."),
    Option("verification_windows", Kind.INTEGER, 2, unit="windows", bounds=(1, 1000), scope=Scope.WEB,
           help="After an execution, verify the prediction once the new configuration ran this many metric "
                "windows."),
    Option("verification_tolerance", Kind.NUMBER, 0.1, unit="share", bounds=(0.0, 1.0), scope=Scope.WEB,
           help="Largest relative error of the realized capacity against the predicted one, either way, that "
                "still counts as verified (the proposal page shows both and the error); also the margin on the "
                "predicted catch-up after a verified restart."),
    # --- memory: the pressure gate and the recommend-only right-sizing (scaling/planner/memory.py) -----------
    Option("memory_gc_pressure_threshold", Kind.NUMBER, 0.3, unit="share", bounds=(0.0, 1.0), scope=Scope.WEB,
           flink_key=AUTOSCALER + "memory.gc-pressure.threshold", flink_default=1.0,
           differs_because="Flink's 1.0 never pauses (no JVM spends more than all its time in GC); a micro-batch "
                           "job spending 30 % of its task time in GC looks slow for the wrong reason, and more "
                           "cores do not help it, so the gate is on by default.",
           help="Above this share of the window's task time spent in GC (Σ jvmGcTime / Σ executorRunTime) the job "
                "is under memory pressure (Flink ScalingExecutor.isJobUnderMemoryPressure): no scale-down, and a "
                "scale-up only with the pressure named. 1 turns the GC gate off."),
    Option("memory_heap_usage_threshold", Kind.NUMBER, 1.0, unit="share", bounds=(0.0, 1.0), scope=Scope.WEB,
           flink_key=AUTOSCALER + "memory.heap-usage.threshold",
           help="Above this heap used at its peak / the heap maximum (the mean over the metric window) the job is "
                "under memory pressure (as the GC threshold). Spark's peak counts garbage not yet "
                "collected, so a busy JVM nears 1 without pressure: 1 (Flink's default) turns the heap gate off."),
    Option("memory_tuning_overhead", Kind.NUMBER, 0.2, unit="share", bounds=(0.0, 1.0), scope=Scope.WEB,
           flink_key=AUTOSCALER + "memory.tuning.overhead",
           help="The recommended heap (spark.executor.memory, or spark.driver.memory in local mode) is the heap "
                "used at its peak × (1 + this), rounded up to 64 MB, within memory_min_mb and memory_max_mb."),
    Option("memory_pressure_growth", Kind.NUMBER, 2.0, unit="×", bounds=(1.0, 8.0), scope=Scope.WEB,
           help="Under memory pressure the heap used at its peak is capped by the heap maximum, so it does not "
                "measure what the job needs: the recommended heap is then at least the running heap × this "
                "(and again at each recommendation while the pressure lasts), within memory_max_mb. A RocksDB "
                "state-memory bound the state stores fill grows by the same factor, within its knob's max."),
    Option("memory_min_mb", Kind.INTEGER, 512, unit="MB", bounds=(512, 1_048_576), scope=Scope.WEB,
           help="The smallest heap recommended, MB (Spark refuses a heap below 450 MB: 300 MB reserved × 1.5)."),
    Option("memory_max_mb", Kind.INTEGER, 65_536, unit="MB", bounds=(512, 1_048_576), scope=Scope.WEB,
           help="The largest heap recommended, MB."),
    Option("memory_apply", Kind.SWITCH, False, scope=Scope.WEB, flink_key=AUTOSCALER + "memory.tuning.enabled",
           help="Off (recommend-only, the default): the job page and API show the memory recommendation and what it "
                "would save or fix; nothing restarts for it unless an operator proposes it or adds it to an approval. "
                "On (with a memory knob): under memory pressure the job proposes the heap on its own; otherwise it "
                "comes with a proposal that changes another knob, never a restart for memory alone."),
)

OPTION: dict[str, Option] = {o.name: o for o in OPTIONS}
"""The options by name."""


def default(name: str) -> object:
    """The one default of option ``name``. Raises ``KeyError`` for an unknown name."""
    return OPTION[name].default


def policy_options() -> tuple[Option, ...]:
    """The options of ``scaling.Policy`` (a scenario's ``policy``), in table order."""
    return tuple(o for o in OPTIONS if o.in_policy)


def job_options() -> tuple[Option, ...]:
    """The options of a job's policy in the web app, in table order."""
    return tuple(o for o in OPTIONS if o.per_job)


def flink_defaults() -> dict[str, object]:
    """Flink's defaults of the ``scaling.Policy`` options whose default here differs from Flink's:
    ``Policy(**flink_defaults())`` runs Flink's configuration (the ported Flink tests, the
    benchmark's ``flink-defaults`` setting)."""
    return {o.name: o.flink_default for o in policy_options() if o.flink_default is not None}


def errors(values: dict[str, object]) -> list[str]:
    """The per-option errors of ``values`` (``"<name>: <why>"``, table order), each option alone;
    an option missing from ``values`` is not checked. Cross-option rules are the caller's."""
    out = []
    for option in OPTIONS:
        if option.name not in values:
            continue
        switch = option.enabled_by
        enabled = switch is None or bool(values.get(switch, OPTION[switch].default))
        error = option_error(option, values[option.name], enabled=enabled)
        if error:
            out.append(error)
    return out

