"""The one place a plan's reasons become sentences (scenario output, web pages, API): each code of
``scaling.values.reasons`` (``PlanReason``, ``VertexReason``, ``Limit``) has one renderer over its data.
Tests assert codes and data; the words may change here without touching a planner."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping

from scaling.values.findings import Finding, PinnedAction
from scaling.values.mode import Mode
from scaling.values.reasons import AwaitingActivation, Limit, PlanLimit, PlanReason, Reason, VertexReason, VetoSignal

Data = Mapping[str, float | int | str | None]

#: What pages call the planner's ``JobPlan.load`` (stored as ``load``): the share of the running cores,
#: less the batch overhead, that the target and catch-up rates need. Not the host's load average.
LOAD_NAME = "needed utilization"
#: Its definition, where a page explains the name.
LOAD_DEFINITION = ("the share of the running cores, less the batch overhead, that the target and catch-up rates "
                   "need; above 1 the job cannot keep up (not the host's load average)")


def num(value: float) -> str:
    """A number for messages: up to 3 decimals, ``inf`` for infinity."""
    if math.isinf(value) or math.isnan(value):
        return "inf" if value > 0 else "-inf" if math.isinf(value) else "nan"
    rounded = round(value, 3)
    return str(int(rounded)) if rounded == int(rounded) and abs(rounded) < 1e15 else str(rounded)


def rate(value: float) -> str:
    """A rate for reasons: rounded to 3 decimals as in the JSON output, ``inf`` for infinity."""
    return "inf" if math.isinf(value) else repr(round(value, 3))


def seconds(value: float) -> str:
    """A duration for messages, rounded to units people read: ``"45 s"``, ``"12 min 1 s"``, ``"2 h 5 min"``."""
    if math.isinf(value) or math.isnan(value):
        return "never"
    whole = max(0, round(value))
    if whole < 120:
        return f"{whole} s"
    if whole < 7200:
        return f"{whole // 60} min {whole % 60} s" if whole % 60 else f"{whole // 60} min"
    return f"{whole // 3600} h {whole % 3600 // 60} min"


def cores(n: float) -> str:
    """``n`` cores in words: "1 core", "3 cores"."""
    return f"{num(n)} core" if n == 1 else f"{num(n)} cores"


def align_note(before: int, after: int, n: int, unit: str) -> str:
    """Words for an alignment of ``before`` to ``after`` tasks on ``n`` partitions or key groups."""
    if n % after == 0:
        how = f"to spread {n} partitions evenly" if unit == "partitions" else f"to the {n} key groups"
    else:
        how = f"so no task holds more than {-(-n // after)} of {n} {unit}"
    return f"aligned {before} -> {after} {how}"


def activation_text(wait: AwaitingActivation) -> str:
    """The sentence of a plan held by DS2's activation time."""
    return (f"activation time: scale-{wait.direction} recommended by {wait.count} of {wait.required} consecutive "
            f"evaluations; it applies when {wait.required} agree (DS2)")


def excluded_period_text(period: str) -> str:
    """The sentence of a plan computed inside the excluded period ``period`` (``JobPlan.executable`` False)."""
    return f"excluded period {period!r}: the plan is computed but not executable"


def memory_pressure_text(d: Data) -> str:
    """The sentence of ``memory-pressure`` (``scaling.planner.memory``): the figures and what the gate does."""
    parts = []
    if d.get("gc_share") is not None:
        parts.append(f"GC {d['gc_share']:.0%} of task time (threshold {d['gc_threshold']:.0%})")
    if d.get("heap_usage") is not None:
        peak = (f": {num(round(d['heap_peak_mb']))} of {num(round(d['heap_max_mb']))} MB at peak"
                if d.get("heap_peak_mb") is not None and d.get("heap_max_mb") is not None else "")
        parts.append(f"heap {d['heap_usage']:.0%} of its maximum{peak} (threshold {d['heap_threshold']:.0%})")
    return (f"memory pressure ({', '.join(parts) or d.get('signal')}): no scale-down while it lasts, a scale-up "
            "only with the pressure named (Flink MemoryPressure)")


_MEMORY_STEP = {
    "alone": "on its own, as the job is under memory pressure (memory_apply)",
    "along": "with this rescale (memory_apply)",
    "requested": "asked for by a person",
}


#: What each memory kind is, and what its peak is of (``memory-resize``'s ``kind``; absent: the heap).
MEMORY_KIND_TEXT = {
    "heap": ("heap of each JVM that runs tasks", "a peak"),
    "overhead": ("non-heap memory of each executor", "a non-heap peak (with the state memory)"),
    "state": ("RocksDB state memory of each JVM", "a state-store peak"),
}


def memory_resize_text(d: Data) -> str:
    """The sentence of ``memory-resize`` (``scaling.planner.memory.MemoryDecision``): the memory (its
    ``kind``) before and after, what it saves or relieves, and why the plan carries it."""
    saves = d.get("saves_mb") or 0
    effect = f"saves {num(saves)} MB" if saves > 0 else "to relieve the memory pressure" if d.get(
        "under_pressure") and d.get("kind", "heap") == "heap" else f"{num(-saves)} MB more"
    what, peak = MEMORY_KIND_TEXT[str(d.get("kind", "heap"))]
    return (f"{what} ({d['knob']}) {num(d['current_mb'])} → {num(d['recommended_mb'])} MB, from {peak} "
            f"of {num(round(d['peak_mb']))} MB: {effect}; {_MEMORY_STEP.get(str(d.get('step')), str(d.get('step')))}"
            "; a new JVM starts for it (the warm handover)")


def memory_withheld_text(d: Data) -> str:
    """The sentence of ``memory-withheld`` (``scaling.planner.memory.sizing_withheld``): why the window's
    memory is not right-sized, from its ``cause`` (a ``scaling.values.memory.Withheld``) and figures."""
    cause = d.get("cause")
    if cause == "no-batch":
        why = "no micro-batch of this run completed in the window yet"
    elif cause == "not-ready":
        why = f"metrics not ready in {num(d['samples'])} sample(s): {not_ready_text(str(d['code']), d)}"
    else:
        why = (f"the job is not keeping up: its backlog grows {num(round(d['backlog_growth_per_s']))} records/s, above "
               f"the noise of {num(round(d['noise_per_s']))} records/s")
    return (f"memory not right-sized: {why}; it is sized on completed batches of a job keeping up with its "
            "load (a heap under memory pressure still grows)")


def limit_text(item: PlanLimit | Reason) -> str:
    """Words for a limit of a micro-batch plan, rendered from its code and numbers (the plan's
    reasons, the job page's "Why no proposal?"). Raises ``KeyError`` when ``item.data`` lacks a
    number its code needs."""
    d = item.data
    if item.code == Limit.MAX_EXECUTORS:
        return (f"max-executors: {num(d['cores_needed'])} cores needed, {num(d['cores_max'])} allowed; at the "
                f"maximum the predicted utilization is {d['predicted_utilization']:.2f} at the target rate, "
                f"{d['utilization_with_catch_up']:.2f} with the catch-up")
    if item.code == Limit.CATCH_UP_UNREACHABLE:
        if not math.isfinite(d["catch_up_s"]):
            return (f"catch-up-unreachable: the backlog never drains, even at {num(d['cores_max'])} cores: they "
                    f"cannot process faster than the records arrive (the policy's catch-up target is "
                    f"{seconds(d['catch_up_duration_s'])})")
        return (f"catch-up-unreachable: draining the backlog takes {seconds(d['catch_up_s'])} even at "
                f"{num(d['cores_max'])} cores, above the policy's catch-up target of "
                f"{seconds(d['catch_up_duration_s'])}")
    if item.code == Limit.CORES_NOT_ADJUSTABLE:
        return (f"cores-not-adjustable: cannot keep up without more cores: declare a cores knob; the pipeline runs "
                f"on {cores(d['cores'])} (it declares no executors knob), {num(d['cores_needed'])} needed; there the "
                f"predicted utilization is {d['predicted_utilization']:.2f} at the target rate, "
                f"{d['utilization_with_catch_up']:.2f} with the catch-up")
    if item.code == Limit.DIMINISHING_RETURNS:
        return (f"diminishing-returns: cores stop at {num(d['cores'])}: the predicted utilization at the target "
                f"rate is {d['utilization']:.2f} there and {d['next_utilization']:.2f} on {cores(d['next_cores'])}, "
                f"{d['efficiency']:.0%} of the gain linear scaling would bring (at least "
                f"{d['min_efficiency']:.0%} needed: scale_up_min_efficiency)")
    if item.code == Limit.CORES_CANNOT_HELP:
        return (f"cores-cannot-help: the pinned stages that run no more tasks than the cores ({item.vertex_id} "
                f"the largest) alone fill {d['fill']:.0%} of each trigger interval, above the band's "
                f"{d['high']:.0%} whatever the cores: no cores are added, the job stays on {cores(d['cores'])}; "
                f"what can help is in the findings")
    if item.code == Limit.RETENTION_RISK:
        return (f"retention-risk: {item.vertex_id}'s backlog is {seconds(d['lag_s'])} old, retention "
                f"{seconds(d['retention_s'])}")
    skew = f"its slowest task, busy ×{d['skew']:.2f} its mean task, sets the pace" if "skew" in d else \
        "its slowest task sets the pace"
    what = {Limit.PINNED_STAGE: "pinned", Limit.PARTITIONS: "bounded by its partitions",
            Limit.BOTTLENECK: f"skewed ({skew})"}[item.code]
    return (f"{item.code}: {item.vertex_id} is {what} at {num(d['tasks'])} tasks and alone fills "
            f"{d['fill']:.0%} of each trigger interval; more cores cannot help it")


_PIN_CAUSE = {"state-store": "its checkpoint's state store cannot be repartitioned offline (RocksDB only)",
              "sink-log": "its sink keeps a batch log the offline repartition would break"}


def finding_text(finding: Finding) -> str:
    """Words for a finding of a micro-batch plan (``scaling.values.findings``): the pinned stage, its
    evidence and its action. Raises ``KeyError`` when ``finding.data`` lacks a number it needs."""
    d = finding.data
    if finding.action == PinnedAction.DEFAULT_SHUFFLE_PARTITIONS:
        return (f"default-shuffle-partitions: {finding.vertex_id} runs {num(d['tasks'])} tasks, "
                f"spark.sql.shuffle.partitions as the session has it (Spark's default is 200), on "
                f"{cores(d['cores'])}, and no knob sets them: they fill {d['fill']:.0%} of each trigger interval, "
                f"{d['share']:.0%} of the job's; action: declare a state-partitions knob (STATE_PARTITIONS; "
                f"SHUFFLE_PARTITIONS for a query without state), or set spark.sql.shuffle.partitions to "
                f"{num(d['partitions'])} for a new checkpoint")
    busy = "" if d.get("busy_s_per_task") is None else f", each busy {num(d['busy_s_per_task'])} s per trigger"
    evidence = (f"pinned-bottleneck: {finding.vertex_id} runs {num(d['tasks'])} tasks{busy}, and alone needs "
                f"{d['fill']:.0%} of each trigger interval on {cores(d['cores'])}: more cores cannot help it")
    want = f"{num(d['partitions'])} partitions"
    if finding.action == PinnedAction.DECLARE_STATE_PARTITIONS_KNOB:
        action = (f"declare a knob that sets its partitions (STATE_PARTITIONS for a stateful stage; the job "
                  f"declares none) and raise it to {want}; with the RocksDB state store the runner repartitions "
                  f"the state offline")
    elif finding.action == PinnedAction.NEW_CHECKPOINT_PARTITIONS:
        way = "lower" if d["partitions"] < d["tasks"] else "raise"
        action = (f"{_PIN_CAUSE.get(str(d.get('cause')), 'its checkpoint fixes its partitions')}, so its "
                  f"STATE_PARTITIONS knob cannot change it: {way} spark.sql.shuffle.partitions to "
                  f"{num(d['partitions'])} for a new checkpoint")
    else:
        action = (f"repartition its state offline to {want} (RocksDB state store only, through a STATE_PARTITIONS "
                  f"knob), or start a new checkpoint with spark.sql.shuffle.partitions {num(d['partitions'])}")
    return f"{evidence}; action: {action}"


def _cause(reason: Reason) -> str:
    cause = reason.cause
    return reason_text(cause) if cause is not None else ""


def _threshold(r: Reason) -> str:
    d = r.data
    tpr, up = d["true_processing_rate"], d["scale_up_threshold"]
    if tpr < up:
        return f"{r.vertex_id}: true processing rate {rate(tpr)} below scale-up threshold {rate(up)}"
    down = d["scale_down_threshold"]
    return f"{r.vertex_id}: true processing rate {rate(tpr)} above scale-down threshold {rate(down)}"


def _gain(d: Data) -> str:
    return (f"last scale-up {d['old']} -> {d['new']} was ineffective: true processing rate {num(d['tpr_before'])} "
            f"-> {num(d['tpr_now'])}, expected {num(d['expected'])}")


def band_text(low: float, high: float) -> str:
    """The utilization band as every page and the API write it: ``"[0.40, 1.00]"``."""
    return f"[{low:.2f}, {high:.2f}]"


def _band(d: Data) -> str:
    return band_text(float(d["low"]), float(d["high"]))


def _backlog(d: Data) -> str:
    then = "scale-downs do not trigger a scaling" if d.get("mode") == Mode.CONTINUOUS else "no scale-downs"
    return f"backlog mode: a source's lag is above {num(d['lag_threshold_s'])} s, {then}"


def _backpressure(r: Reason) -> str:
    d = r.data
    if r.vertex_id is None:
        return (f"backpressure {d['fraction']:.0%}: executors {d['current']} -> {d['new']}, partitions of the "
                f"busiest stage {d['busiest']}")
    return (f"backpressure {d['fraction']:.0%}: scale {r.vertex_id} (first saturated vertex) "
            f"{d['current']} -> {d['new']}")


def _over_provisioned(r: Reason) -> str:
    d = r.data
    if r.vertex_id is None:
        return (f"no backpressure, utilization {d['busy']:.0%} (addition to Dhalion): executors "
                f"{d['current']} -> {d['new']}")
    return (f"no backpressure; {r.vertex_id} over-provisioned at {d['busy']:.0%} busy (addition to Dhalion): "
            f"{d['current']} -> {d['new']}")


def _utilization(d: Data) -> str:
    return f"job utilization {d['utilization']:.0%}, target {d['target']:.0%}"


def _utilization_scale(d: Data) -> str:
    if "current" in d:
        return f"{_utilization(d)}: executors {d['current']} -> {d['new']}"
    return f"{_utilization(d)}: every vertex scaled by {d['ratio']:.2f}"


def _vetoed(r: Reason) -> str:
    d = r.data
    if d["signal"] == VetoSignal.BATCH_RATIO:
        return (f"scale-down vetoed: batch ratio R {d['value']:.2f} >= {num(d['threshold'])}, the batches fill "
                f"the trigger interval (SPARK-12133)")
    if d["signal"] == VetoSignal.NOT_READY:
        return (f"scale-down vetoed: {num(d['value'])} sample(s) of the window not ready ({d.get('code', '?')}); "
                "incomplete metrics never take capacity away")
    return (f"scale-down vetoed: the backlog grows {num(d['value'])} records/s, above the noise of "
            f"{num(d['threshold'])} records/s")


_NOT_READY: dict[str, Callable[[Data], str]] = {
    "missing-stages": lambda d: (f"{d['batches']} of {d['of']} batch(es) left out: their stages are missing "
                                 "from Spark's /stages"),
    "sql-plan-unusable": lambda d: (f"the SQL plan is unusable: {d['sources']} sources in the progress, "
                                    f"{d['source_stages']} source stage(s) found"),
    "first-batch": lambda d: f"batch {d['batch_id']} is the first batch after a start",
    "restart-in-window": lambda d: f"the query restarted inside the window ({d['batches']} batch(es) of another run)",
    "binding-mismatch": lambda d: (f"knob {d['knob']!r} is {d['knob_value']} but Spark ran {d['tasks_ran']} tasks "
                                   f"in stage {d['position']}"),
    "implausible-cores": lambda d: (f"Spark reports {cores(d['cores'])}, more than the {num(d['limit'])} the "
                                    "cluster or host has"),
    "implausible-rate": lambda d: (f"source {d['source']} claims {num(d['rate_per_s'])} records/s, above its own "
                                   f"limit of {num(d['limit_per_s'])} records/s"),
}


def not_ready_text(code: str, data: Data) -> str:
    """The words for a ``scaling.values.readiness.NotReady`` code and its data."""
    return _NOT_READY[code](data)


def _not_ready(r: Reason) -> str:
    d = r.data
    return (f"metrics not ready in {d['samples']} sample(s): {not_ready_text(str(d['code']), d)}; "
            "no scale-down on them")


_PINNED = {
    VertexReason.EXCLUDED: "excluded: listed in excluded_vertices",
    VertexReason.PINNED: "pinned: not adjustable (no confirmed knob sets its partitions, or the checkpoint fixes them)",
    VertexReason.SOURCE_SCALING_DISABLED: "source scaling disabled (scaling_sources_enabled is false)",
}

_TEXT: dict[object, Callable[[Reason], str]] = {
    # vertex reasons (``VertexPlan.reason``)
    VertexReason.WITHIN_BOUNDS: lambda r: "within bounds",
    VertexReason.EQUALS_CURRENT: lambda r: "computed parallelism equals current",
    VertexReason.SCALE_UP: lambda r: f"scale up {r.data['current']} -> {r.data['to']}",
    VertexReason.SCALE_DOWN: lambda r: f"scale down {r.data['current']} -> {r.data['to']}",
    VertexReason.BOUNDED: lambda r: (
        f"bounded {r.data['wanted']} -> {r.data['to']} by [{r.data['lower']}, {r.data['upper']}]"),
    VertexReason.ALIGNED: lambda r: align_note(r.data["from"], r.data["to"], r.data["n"], r.data["unit"]),
    VertexReason.ALIGNMENT_BLOCKED: lambda r: (
        f"alignment of {r.data['from']} to {r.data['n']} {r.data['unit']} blocked (legacy adjust mode): "
        f"keeps {r.data['current']}"),
    VertexReason.IDLE: lambda r: "idle: no input (infinite true processing rate), scale-down capped by "
                                 "scale_down_max_factor",
    **{code: (lambda r: _PINNED[r.code]) for code in _PINNED},
    VertexReason.INEFFECTIVE_BLOCKED: lambda r: (
        f"blocked: {_gain(r.data)}; not scaling {r.data['current']} -> {r.data['to']}"),
    VertexReason.INEFFECTIVE_WARNING: lambda r: f"{_cause(r)}; warning: {_gain(r.data)}",
    VertexReason.HELD_SCALE_DOWN: lambda r: (f"delayed scale-down {r.data['current']} -> {r.data['target']} held until "
                                             f"t={num(r.data['due_s'])} s (first recommended at "
                                             f"t={num(r.data['first_at_s'])} s)"),
    VertexReason.DELAYED_SCALE_DOWN_DUE: lambda r: (
        f"delayed scale-down {r.data['current']} -> {r.data['target']}: the largest recommendation since "
        f"t={num(r.data['window_start_s'])} s"),
    VertexReason.SCALE_DOWN_WINDOW_NOT_BELOW: lambda r: (
        f"the largest recommendation of the last {num(r.data['interval_s'])} s, {r.data['target']}, is not "
        f"below the current {r.data['current']}"),
    VertexReason.CAPPED: lambda r: f"bounded at {r.data['tasks']} (source partitions / max parallelism)",
    VertexReason.NOT_EXECUTABLE: lambda r: (f"not executable in excluded period {r.data['period']!r}: computed "
                                            f"{r.data['current']} -> {r.data['computed']}; {_cause(r)}"),
    VertexReason.AWAITING_ACTIVATION: lambda r: (f"awaiting activation: computed {r.data['current']} -> "
                                                 f"{r.data['computed']}; {_cause(r)}"),
    VertexReason.NOT_NEEDED: lambda r: f"within bounds: {_cause(r)} not needed",
    # job reasons (``JobPlan.reasons``)
    PlanReason.THRESHOLD_EXCEEDED: _threshold,
    PlanReason.CHANGE_HELD: lambda r: f"{_threshold(r)}; {_cause(r)}",
    PlanReason.NO_VERTEX_TO_CHANGE: lambda r: "no vertex outside its bounds has a parallelism to change",
    PlanReason.EVERY_VERTEX_WITHIN_BOUNDS: lambda r: "every vertex is within its bounds",
    PlanReason.LOAD_ABOVE_BAND: lambda r: (f"{LOAD_NAME} {r.data['load']:.2f} above the utilization band "
                                           f"{_band(r.data)}: the target and catch-up rate take "
                                           f"{r.data['need']:.2f} busy core-seconds per second of work on "
                                           f"{cores(r.data['cores'])}, {r.data['overhead']:.0%} of each trigger "
                                           f"interval being batch overhead"),
    PlanReason.LOAD_BELOW_BAND: lambda r: (f"{LOAD_NAME} {r.data['load']:.2f} below the utilization band "
                                           f"{_band(r.data)}: the target rate and a restart's catch-up take "
                                           f"{r.data['need']:.2f} busy core-seconds per second of work on "
                                           f"{cores(r.data['cores'])}"),
    PlanReason.WITHIN_BAND: lambda r: (f"{LOAD_NAME} {r.data['load']:.2f} within the utilization band "
                                       f"{_band(r.data)}"),
    PlanReason.PLAN_EQUALS_RUNNING: lambda r: "the plan equals the running configuration",
    PlanReason.HELD_EXECUTOR_SCALE_DOWN: lambda r: (f"delayed scale-down of executors {r.data['current']} -> "
                                                    f"{r.data['target']} held until t={num(r.data['due_s'])} s (first "
                                                    f"recommended at t={num(r.data['first_at_s'])} s)"),
    PlanReason.BATCH_OVERRUN: lambda r: (f"batch overrun: every one of {r.data['batches']} batches ran longer than "
                                         f"the trigger (R {r.data['ratio']:.2f}, at least {r.data['min_ratio']:.2f}: "
                                         f"{num(r.data['batch_duration_s'])} s per "
                                         f"{num(r.data['trigger_interval_s'])} s trigger): scale up (SPARK-12133)"),
    PlanReason.SCALE_DOWN_VETOED: _vetoed,
    PlanReason.SAMPLES_NOT_READY: _not_ready,
    PlanReason.MEMORY_PRESSURE: lambda r: memory_pressure_text(r.data),
    PlanReason.MEMORY_RESIZE: lambda r: memory_resize_text(r.data),
    PlanReason.MEMORY_WITHHELD: lambda r: memory_withheld_text(r.data),
    PlanReason.ACTIVATION_PENDING: lambda r: activation_text(AwaitingActivation(
        r.data["direction"], r.data["count"], r.data["required"])),
    PlanReason.EXCLUDED_PERIOD: lambda r: excluded_period_text(str(r.data["period"])),
    PlanReason.BACKLOG_MODE: lambda r: _backlog(r.data),
    PlanReason.BATCH_RATIO_NO_BATCH: lambda r: "no batch completed in the scaling interval",
    PlanReason.BATCH_RATIO_UP: lambda r: (f"batch ratio R {r.data['ratio']:.3f} >= {r.data['scale_up_ratio']}: request "
                                          f"{r.data['added']} more executor(s) (SPARK-12133)"),
    PlanReason.BATCH_RATIO_DOWN: lambda r: (f"batch ratio R {r.data['ratio']:.3f} <= {r.data['scale_down_ratio']}: "
                                            f"remove one executor (SPARK-12133)"),
    PlanReason.BATCH_RATIO_WITHIN: lambda r: (
        f"batch ratio R {r.data['ratio']:.3f} within ({r.data['scale_down_ratio']}, {r.data['scale_up_ratio']})"),
    PlanReason.BATCH_RATIO_AT_MIN: lambda r: (
        f"batch ratio R {r.data['ratio']:.3f} <= {r.data['scale_down_ratio']} but already at min_executors "
        f"{r.data['min_executors']}"),
    PlanReason.REACTIVE_EXECUTORS: lambda r: (f"{r.data['added']} new executor(s) available: use all {r.data['cores']} "
                                              f"cores (FLIP-160 reactive mode)"),
    PlanReason.MIN_INCREASE_NOT_MET: lambda r: (
        f"cumulative parallelism would grow {r.data['current']} -> {r.data['new']}, less than "
        f"min_parallelism_increase {r.data['min_increase']} (FLIP-160)"),
    PlanReason.WAITING_AFTER_ACTION: lambda r: (f"waiting {r.data['wait_s']:g} s after the last action at "
                                                f"t={r.data['last_at_s']:g} s"),
    PlanReason.BACKPRESSURE: _backpressure,
    PlanReason.OVER_PROVISIONED: _over_provisioned,
    PlanReason.NO_BACKPRESSURE: lambda r: "no backpressure",
    PlanReason.METRICS_MISSING: lambda r: "no batch completed in the window: CPU metrics missing",
    PlanReason.UTILIZATION_WITHIN_TOLERANCE: lambda r: f"{_utilization(r.data)}: within tolerance",
    PlanReason.UTILIZATION_STABILIZING: lambda r: (
        f"{_utilization(r.data)}: scale-down stabilizing (highest recommendation of the last "
        f"{r.data['window_s']:g} s is no change)"),
    PlanReason.UTILIZATION_SCALE: lambda r: _utilization_scale(r.data),
    PlanReason.LEGACY_TEXT: lambda r: str(r.data["text"]),
    **{code: limit_text for code in Limit},
}


def reason_text(reason: Reason) -> str:
    """The sentence of one reason, for people. Never raises: a reason whose data lacks what its
    code's words need (a stored plan read back, say) reads as its code and data."""
    try:
        return _TEXT[reason.code](reason)
    except (KeyError, TypeError, ValueError):
        data = json.dumps(reason.to_json()["data"], sort_keys=True, default=str)
        return f"{reason.code}{f' ({reason.vertex_id})' if reason.vertex_id else ''}: {data}"
