"""The scenario format of ``python -m scaling evaluate`` (SCENARIO.md, ``"format": 1``).

``load_scenario`` validates a JSON document into frozen values and raises ``ScenarioError`` with a
one-line message naming the bad field; ``run_scenario`` evaluates its steps in order, carrying the
autoscaler state (history, delayed scale-downs, effectiveness, restart times) from step to step;
``render`` turns the plans into the output document.

The ``policy`` keys are the options of ``scaling.policy.options.policy_options()`` (docs/POLICY.md), each
checked against its row of the table. Extensions beyond SCENARIO.md, all optional: vertex keys
``retention_s`` and ``pin_cause`` (``scaling.values.topology.PinCause``); metric key
``busy_time_max_ms_per_s``; cluster key ``executors_adjustable`` (false: the pipeline declares no
executors knob, the executor count is fixed); step keys ``executors`` (what ran, as ``parallelism``),
``available_executors``, ``batch_durations_s`` (list, seconds), ``measured_restart_time_s`` (the
downtime of the last rescale) and, in micro-batch mode, ``memory`` (``scaling.scenario.memory``: per
executor heap maximum, heap at peak, GC share and state, MB; under memory pressure the plan goes
through the gate ``scaling.planner.memory.hold_under_pressure``, as the live loop's). ``at_s`` is seconds since the Unix epoch (UTC), which places steps in
excluded periods.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from scaling.planner.algorithms import evaluate, resolve
from scaling.planner.memory import hold_under_pressure, plan_scales_up
from scaling.policy.option_types import Kind, PolicyError
from scaling.policy.options import policy_options
from scaling.policy.policy import Policy
from scaling.scenario.memory import StepMemory, parse_memory, step_pressure
from scaling.scenario.output import render_steps
from scaling.scenario.values import MAX_NUMBER, MAX_PARALLELISM, ScenarioError  # noqa: F401 - re-exported
from scaling.scenario.values import as_object as _object
from scaling.scenario.values import boolean as _bool
from scaling.scenario.values import check_keys as _keys
from scaling.scenario.values import fail as _fail
from scaling.scenario.values import integer as _integer
from scaling.scenario.values import number as _number
from scaling.scenario.values import string as _string
from scaling.values.metrics import ClusterState, MetricsError, VertexMetrics
from scaling.values.plan import JobPlan
from scaling.values.request import PlanRequest
from scaling.values.state import ScalerState
from scaling.values.topology import Edge, PinCause, Topology, TopologyError, Vertex

FORMAT = 1
MODES = ("continuous", "micro-batch")
METRIC_KEYS = ("records_in_per_s", "records_out_per_s", "busy_time_ms_per_s", "backlog", "backlog_growth_per_s",
               "batch_overhead_s", "true_processing_rate", "true_output_rate", "busy_time_max_ms_per_s")
VERTEX_KEYS = ("id", "name", "parallelism", "max_parallelism", "partitions", "source", "adjustable", "retention_s",
               "pin_cause")
STEP_KEYS = ("at_s", "metrics", "parallelism", "executors", "available_executors", "batch_durations_s",
             "measured_restart_time_s", "memory")
CLUSTER_KEYS = ("executors", "cores_per_executor", "min_executors", "max_executors", "trigger_interval_s",
                "available_executors", "executors_adjustable")
TOP_KEYS = ("format", "mode", "policy", "vertices", "edges", "steps", "cluster", "trigger_interval_s")


@dataclass(frozen=True)
class Step:
    """One evaluation: its time, metrics per vertex, and what was running if the step says so."""

    at_s: float
    metrics: Mapping[str, VertexMetrics]
    parallelism: Mapping[str, int]
    executors: int | None = None
    available_executors: int | None = None
    batch_durations_s: tuple[float, ...] = ()
    measured_restart_time_s: float | None = None
    memory: StepMemory | None = None


@dataclass(frozen=True)
class Scenario:
    mode: str
    policy: Policy
    topology: Topology
    steps: tuple[Step, ...]
    cluster: ClusterState | None = None


def _policy(raw: Any) -> Policy:
    obj = _object(raw if raw is not None else {}, "policy")
    known = {o.name: o for o in policy_options()}
    kwargs = {}
    for key, value in obj.items():
        if key not in known:
            raise _fail(f"policy.{key}", "unknown option")
        if known[key].kind == Kind.STRINGS:
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise _fail(f"policy.{key}", "must be a list of strings")
            value = tuple(value)
        elif isinstance(value, (list, dict)):
            raise _fail(f"policy.{key}", f"must be a single value, got {type(value).__name__}")
        kwargs[key] = value
    try:
        return Policy(**kwargs)
    except PolicyError as exc:
        raise ScenarioError(f"policy.{exc}") from None
    except (TypeError, ValueError, OverflowError) as exc:  # a value of the wrong kind for an option
        raise ScenarioError(f"policy: {exc}") from None


def _vertices(raw: Any) -> tuple[Vertex, ...]:
    if not isinstance(raw, list) or not raw:
        raise _fail("vertices", "must be a non-empty list")
    result = []
    for i, item in enumerate(raw):
        field = f"vertices[{i}]"
        obj = _object(item, field)
        _keys(obj, VERTEX_KEYS, field)
        if "id" not in obj:
            raise _fail(f"{field}.id", "required")
        vid = _string(obj["id"], f"{field}.id")
        field = f"vertices[{vid}]"
        kwargs: dict[str, Any] = {"id": vid}
        if "name" in obj:
            kwargs["name"] = str(obj["name"])
        for key in ("parallelism", "max_parallelism"):
            if key in obj:
                kwargs[key] = _integer(obj[key], f"{field}.{key}")
        if obj.get("partitions") is not None:
            kwargs["partitions"] = _integer(obj["partitions"], f"{field}.partitions")
        for key in ("source", "adjustable"):
            if key in obj:
                kwargs[key] = _bool(obj[key], f"{field}.{key}")
        if obj.get("retention_s") is not None:
            kwargs["retention_s"] = _number(obj["retention_s"], f"{field}.retention_s")
            if kwargs["retention_s"] <= 0:
                raise _fail(f"{field}.retention_s", f"must be > 0, got {kwargs['retention_s']}")
        if obj.get("pin_cause") is not None:
            if (cause := _string(obj["pin_cause"], f"{field}.pin_cause")) not in set(PinCause):
                raise _fail(f"{field}.pin_cause", f"must be one of {', '.join(PinCause)}, got {json.dumps(cause)}")
            kwargs["pin_cause"] = PinCause(cause)
        vertex = Vertex(**kwargs)
        if vertex.parallelism > vertex.max_parallelism:
            raise _fail(f"{field}.parallelism", f"{vertex.parallelism} is above max_parallelism {vertex.max_parallelism}")
        result.append(vertex)
    return tuple(result)


def _edges(raw: Any) -> tuple[Edge, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise _fail("edges", "must be a list")
    result = []
    for i, item in enumerate(raw):
        field = f"edges[{i}]"
        obj = _object(item, field)
        _keys(obj, ("from", "to", "ship"), field)
        for key in ("from", "to"):
            if key not in obj:
                raise _fail(f"{field}.{key}", "required")
        ship = obj.get("ship", "hash")
        try:
            result.append(Edge(_string(obj["from"], f"{field}.from"), _string(obj["to"], f"{field}.to"),
                               _string(ship, f"{field}.ship")))
        except TopologyError as exc:
            raise ScenarioError(str(exc)) from None
    return tuple(result)


def _metrics(raw: Any, field: str) -> VertexMetrics:
    obj = _object(raw, field)
    _keys(obj, METRIC_KEYS, field)
    kwargs = {}
    for key, value in obj.items():
        if value is None:
            continue
        if key in ("busy_time_ms_per_s", "busy_time_max_ms_per_s"):
            value = _number(value, f"{field}.{key}")
            if value > 1000:
                raise _fail(f"{field}.{key}", f"must be within 0..1000, got {value}")
        elif key == "backlog_growth_per_s":
            value = _number(value, f"{field}.{key}", minimum=None)
        elif key in ("true_processing_rate", "true_output_rate"):
            if value == "inf":
                value = math.inf
            else:
                value = _number(value, f"{field}.{key}")
        else:
            value = _number(value, f"{field}.{key}")
        kwargs[key] = value
    try:
        return VertexMetrics(**kwargs)
    except MetricsError as exc:
        raise ScenarioError(f"{field}.{exc}") from None


def _steps(raw: Any, topology: Topology, mode: str, cluster: ClusterState | None = None) -> tuple[Step, ...]:
    if not isinstance(raw, list) or not raw:
        raise _fail("steps", "must be a non-empty list")
    ids = [v.id for v in topology.vertices]
    known = set(ids)
    result: list[Step] = []
    previous_at = -math.inf
    for i, item in enumerate(raw):
        field = f"steps[{i}]"
        obj = _object(item, field)
        _keys(obj, STEP_KEYS, field)
        at_s = _number(obj.get("at_s", 0), f"{field}.at_s", minimum=None)
        if at_s < previous_at:
            raise _fail(f"{field}.at_s", f"steps must be in time order, {at_s} comes after {previous_at}")
        previous_at = at_s
        metrics_obj = _object(obj.get("metrics"), f"{field}.metrics")
        for key in metrics_obj:
            if key not in known:
                raise _fail(f"{field}.metrics.{key}", "unknown vertex")
        metrics = {}
        for vid in ids:
            if vid not in metrics_obj:
                raise _fail(f"{field}.metrics.{vid}", "missing: every vertex needs metrics")
            metrics[vid] = _metrics(metrics_obj[vid], f"{field}.metrics.{vid}")
        parallelism = {}
        for vid, value in _object(obj.get("parallelism", {}), f"{field}.parallelism").items():
            if vid not in known:
                raise _fail(f"{field}.parallelism.{vid}", "unknown vertex")
            parallelism[vid] = _integer(value, f"{field}.parallelism.{vid}")
            if parallelism[vid] > topology.vertex(vid).max_parallelism:
                raise _fail(f"{field}.parallelism.{vid}", f"{parallelism[vid]} is above max_parallelism "
                                                          f"{topology.vertex(vid).max_parallelism}")
        extra: dict[str, Any] = {}
        for key in ("executors", "available_executors"):
            if key in obj:
                if mode != "micro-batch":
                    raise _fail(f"{field}.{key}", "only in micro-batch mode")
                extra[key] = _integer(obj[key], f"{field}.{key}", minimum=1 if key == "executors" else 0)
                if cluster is not None and key == "executors" and not (
                        cluster.min_executors <= extra[key] <= cluster.max_executors):
                    raise _fail(f"{field}.executors", f"{extra[key]} is outside [min_executors "
                                                      f"{cluster.min_executors}, max_executors {cluster.max_executors}]")
        if "batch_durations_s" in obj:
            durations = obj["batch_durations_s"]
            if not isinstance(durations, list):
                raise _fail(f"{field}.batch_durations_s", "must be a list of seconds")
            extra["batch_durations_s"] = tuple(_number(d, f"{field}.batch_durations_s[{j}]")
                                               for j, d in enumerate(durations))
        if obj.get("measured_restart_time_s") is not None:
            extra["measured_restart_time_s"] = _number(obj["measured_restart_time_s"],
                                                       f"{field}.measured_restart_time_s")
        if obj.get("memory") is not None:
            if mode != "micro-batch":
                raise _fail(f"{field}.memory", "only in micro-batch mode")
            extra["memory"] = parse_memory(obj["memory"], f"{field}.memory")
        result.append(Step(at_s=at_s, metrics=metrics, parallelism=parallelism, **extra))
    return tuple(result)


def _cluster(doc: dict) -> ClusterState:
    obj = _object(doc.get("cluster"), "cluster")
    _keys(obj, CLUSTER_KEYS, "cluster")
    kwargs: dict[str, Any] = {}
    for key in ("executors", "cores_per_executor", "min_executors", "max_executors"):
        if key in obj:
            kwargs[key] = _integer(obj[key], f"cluster.{key}")
    if "executors_adjustable" in obj:
        kwargs["executors_adjustable"] = _bool(obj["executors_adjustable"], "cluster.executors_adjustable")
    if obj.get("available_executors") is not None:
        kwargs["available_executors"] = _integer(obj["available_executors"], "cluster.available_executors", minimum=0)
    if "executors" not in kwargs:
        raise _fail("cluster.executors", "required in micro-batch mode")
    low, high = kwargs.get("min_executors", 1), kwargs.get("max_executors", 16)
    if not low <= kwargs["executors"] <= max(low, high):
        raise _fail("cluster.executors", f"{kwargs['executors']} is outside [min_executors {low}, "
                                         f"max_executors {high}]")
    trigger = doc.get("trigger_interval_s", obj.get("trigger_interval_s", 1.0))
    field = "trigger_interval_s" if "trigger_interval_s" in doc else "cluster.trigger_interval_s"
    kwargs["trigger_interval_s"] = _number(trigger, field)
    try:
        return ClusterState(**kwargs)
    except MetricsError as exc:
        raise ScenarioError(str(exc)) from None


def load_scenario(doc: Any) -> Scenario:
    """Validate a parsed JSON document. Raises ScenarioError naming the bad field."""
    doc = _object(doc, "scenario")
    _keys(doc, TOP_KEYS, "")
    if doc.get("format", FORMAT) != FORMAT:
        raise _fail("format", f"unsupported format {json.dumps(doc.get('format'))}, expected {FORMAT}")
    mode = doc.get("mode", "continuous")
    if mode not in MODES:
        raise _fail("mode", f"must be one of {', '.join(MODES)}, got {json.dumps(mode)}")
    policy = _policy(doc.get("policy"))
    vertices = _vertices(doc.get("vertices"))
    edges = _edges(doc.get("edges"))
    ids = {v.id for v in vertices}
    for i, edge in enumerate(edges):
        for key, end in (("from", edge.source), ("to", edge.target)):
            if end not in ids:
                raise _fail(f"edges[{i}].{key}", f"unknown vertex {json.dumps(end)}")
    try:
        topology = Topology(vertices, edges)
    except TopologyError as exc:
        raise ScenarioError(str(exc)) from None
    cluster = _cluster(doc) if mode == "micro-batch" else None
    if mode != "micro-batch" and ("cluster" in doc or "trigger_interval_s" in doc):
        raise _fail("cluster" if "cluster" in doc else "trigger_interval_s", "only in micro-batch mode")

    try:
        implementation = resolve(policy.algorithm)
    except PolicyError as exc:
        raise ScenarioError(f"policy.{exc}") from None
    if mode not in getattr(implementation, "modes", MODES):
        raise _fail("policy.algorithm", f"{policy.algorithm} needs mode micro-batch, got {mode}")
    return Scenario(mode, policy, topology, _steps(doc.get("steps"), topology, mode, cluster), cluster)


def parse(text: str) -> Scenario:
    """Parse and validate scenario JSON text. Raises ScenarioError (one line) on any problem."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ScenarioError(f"json: malformed at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    return load_scenario(doc)


def run_scenario(scenario: Scenario) -> list[tuple[Step, JobPlan]]:
    """Evaluate the steps in order. Between steps the parallelism (and executors) of a ``scale``
    decision is taken as applied, unless the next step says what was actually running."""
    state = ScalerState()
    topology = scenario.topology
    cluster = scenario.cluster
    results = []
    for number, step in enumerate(scenario.steps, start=1):
        topology = topology.with_parallelism(step.parallelism)
        if cluster is not None:
            if step.executors is not None or step.available_executors is not None:
                cluster = replace(cluster, executors=step.executors or cluster.executors,
                                  available_executors=step.available_executors)
            try:
                cluster = ClusterState(**{f.name: getattr(cluster, f.name) for f in fields(ClusterState)})
            except MetricsError as exc:
                raise ScenarioError(str(exc)) from None
        if step.measured_restart_time_s is not None:
            state = state.with_restart_time(step.measured_restart_time_s)
        plan = evaluate(PlanRequest(topology=topology, metrics=step.metrics, policy=scenario.policy,
                                    mode=scenario.mode, cluster=cluster, state=state, now_s=step.at_s,
                                    batch_durations_s=step.batch_durations_s))
        plan = hold_under_pressure(plan, step_pressure(step.memory), scales_up=plan_scales_up(plan))
        results.append((step, plan))
        if plan.next_state is not None:
            state = plan.next_state
        if plan.decision == "scale" and number < len(scenario.steps):
            topology = topology.with_parallelism({v.vertex_id: v.proposed for v in plan.vertices})
            if cluster is not None and plan.executors_proposed is not None:
                cluster = replace(cluster, executors=plan.executors_proposed, available_executors=None)
    return results


def render(scenario: Scenario, results: list[tuple[Step, JobPlan]]) -> dict:
    """The output document of SCENARIO.md (``scaling.scenario.output.render``)."""
    return {"format": FORMAT, "steps": render_steps(scenario.mode, results)}


def evaluate_text(text: str) -> dict:
    """Parse, run and render: the whole of ``python -m scaling evaluate``."""
    scenario = parse(text)
    return render(scenario, run_scenario(scenario))
