"""The scenario format of ``python -m scaling evaluate`` (docs/SCENARIO.md, ``"format": 1``): ``load_scenario``
validates a document into frozen values or raises ``ScenarioError`` (one line naming the field);
``run_scenario`` evaluates its steps in order through the one door, carrying the autoscaler state;
``render`` turns the plans into the output document. ``at_s`` is seconds since the Unix epoch (UTC)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from scaling.planner.algorithms import resolve
from scaling.planner.door import decide
from scaling.policy.option_types import Kind, PolicyError
from scaling.policy.options import policy_options
from scaling.policy.policy import Policy
from scaling.scenario.memory import ScenarioMemory, parse_readings, parse_scenario_memory
from scaling.scenario.output import render_steps
from scaling.scenario.values import ScenarioError
from scaling.scenario.values import as_object as _object
from scaling.scenario.values import boolean as _bool
from scaling.scenario.values import check_keys as _keys
from scaling.scenario.values import fail as _fail
from scaling.scenario.values import integer as _integer
from scaling.scenario.values import number as _number
from scaling.scenario.values import string as _string
from scaling.values.memory import MemoryInputs, MemoryKnob, MemoryReading
from scaling.values.metrics import ClusterState, MetricsError, VertexMetrics
from scaling.values.mode import Mode
from scaling.values.plan import JobPlan
from scaling.values.readiness import SampleIssue, issues_from_json
from scaling.values.reasons import MemoryKind, PlanFormatError
from scaling.values.request import PlanRequest
from scaling.values.state import ScalerState
from scaling.values.topology import Edge, PinCause, Topology, TopologyError, Vertex

FORMAT = 1
MODES = (Mode.CONTINUOUS, Mode.MICRO_BATCH)
METRIC_KEYS = ("records_in_per_s", "records_out_per_s", "busy_time_ms_per_s", "backlog", "backlog_growth_per_s",
               "batch_overhead_s", "true_processing_rate", "true_output_rate", "busy_time_max_ms_per_s")
VERTEX_KEYS = ("id", "name", "parallelism", "max_parallelism", "partitions", "source", "adjustable", "retention_s",
               "pin_cause")
STEP_KEYS = ("at_s", "metrics", "parallelism", "executors", "available_executors", "batch_durations_s",
             "measured_restart_time_s", "memory", "not_ready")
CLUSTER_KEYS = ("executors", "cores_per_executor", "min_executors", "max_executors", "trigger_interval_s",
                "available_executors", "executors_adjustable")
TOP_KEYS = ("format", "mode", "policy", "vertices", "edges", "steps", "cluster", "trigger_interval_s", "memory")


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
    memory: tuple[MemoryReading, ...] = ()
    not_ready: tuple[SampleIssue, ...] = ()


@dataclass(frozen=True)
class Scenario:
    mode: Mode
    policy: Policy
    topology: Topology
    steps: tuple[Step, ...]
    cluster: ClusterState | None = None
    memory: ScenarioMemory = ScenarioMemory()


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
            raise _fail(f"{field}.parallelism",
                        f"{vertex.parallelism} is above max_parallelism {vertex.max_parallelism}")
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


def _steps(raw: Any, topology: Topology, mode: Mode, cluster: ClusterState | None = None) -> tuple[Step, ...]:
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
                if mode != Mode.MICRO_BATCH:
                    raise _fail(f"{field}.{key}", "only in micro-batch mode")
                extra[key] = _integer(obj[key], f"{field}.{key}", minimum=1 if key == "executors" else 0)
                if cluster is not None and key == "executors" and not (
                        cluster.min_executors <= extra[key] <= cluster.max_executors):
                    raise _fail(f"{field}.executors",
                                f"{extra[key]} is outside [min_executors {cluster.min_executors}, "
                                f"max_executors {cluster.max_executors}]")
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
            if mode != Mode.MICRO_BATCH:
                raise _fail(f"{field}.memory", "only in micro-batch mode")
            running = extra.get("executors") or (cluster.executors if cluster is not None else 1)
            extra["memory"] = parse_readings(obj["memory"], f"{field}.memory", running)
        if obj.get("not_ready") is not None:
            try:
                extra["not_ready"] = issues_from_json(obj["not_ready"])
            except PlanFormatError as exc:
                raise _fail(f"{field}.not_ready", str(exc)) from None
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
    raw_mode = doc.get("mode", Mode.CONTINUOUS)
    if raw_mode not in MODES:
        raise _fail("mode", f"must be one of {', '.join(MODES)}, got {json.dumps(raw_mode)}")
    mode = Mode(raw_mode)
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
    cluster = _cluster(doc) if mode == Mode.MICRO_BATCH else None
    if mode != Mode.MICRO_BATCH and ("cluster" in doc or "trigger_interval_s" in doc or "memory" in doc):
        given = next(k for k in ("cluster", "trigger_interval_s", "memory") if k in doc)
        raise _fail(given, "only in micro-batch mode")

    try:
        implementation = resolve(policy.algorithm)
    except PolicyError as exc:
        raise ScenarioError(f"policy.{exc}") from None
    if mode not in getattr(implementation, "modes", MODES):
        raise _fail("policy.algorithm", f"{policy.algorithm} needs mode micro-batch, got {mode}")
    return Scenario(mode, policy, topology, _steps(doc.get("steps"), topology, mode, cluster), cluster,
                    parse_scenario_memory(doc.get("memory")))


def parse(text: str) -> Scenario:
    """Parse and validate scenario JSON text. Raises ScenarioError (one line) on any problem."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ScenarioError(f"json: malformed at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    return load_scenario(doc)


def run_scenario(scenario: Scenario) -> list[tuple[Step, JobPlan]]:
    """Evaluate the steps in order through the one door (``scaling.planner.door.decide``). Between
    steps the parallelism, executors and memory knobs of a ``scale`` decision are taken as applied,
    unless the next step says what was actually running."""
    state = ScalerState()
    topology = scenario.topology
    cluster = scenario.cluster
    knobs = scenario.memory.knobs
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
        memory = None
        if step.memory:
            memory = MemoryInputs(step.memory, scenario.memory.policy, knobs, scenario.memory.local_mode,
                                  scenario.memory.state_in_rocksdb)
        plan = decide(PlanRequest(topology=topology, metrics=step.metrics, policy=scenario.policy,
                                  mode=scenario.mode, cluster=cluster, state=state, now_s=step.at_s,
                                  batch_durations_s=step.batch_durations_s, not_ready=step.not_ready,
                                  memory=memory))
        results.append((step, plan))
        if plan.next_state is not None:
            state = plan.next_state
        if plan.decision == "scale" and number < len(scenario.steps):
            topology = topology.with_parallelism({v.vertex_id: v.proposed for v in plan.vertices})
            if cluster is not None and plan.executors_proposed is not None:
                cluster = replace(cluster, executors=plan.executors_proposed, available_executors=None)
            knobs = _applied_knobs(knobs, plan)
    return results


def _applied_knobs(knobs: tuple[MemoryKnob, ...], plan: JobPlan) -> tuple[MemoryKnob, ...]:
    """The memory knobs after ``plan`` ran: each at the size the plan proposes for its kind."""
    proposed = {size.kind: size.proposed_mb for size in plan.memory_sizes}
    if plan.memory_proposed_mb is not None:
        proposed[MemoryKind.HEAP] = plan.memory_proposed_mb
    return tuple(replace(k, running_mb=proposed.get(k.kind, k.running_mb)) for k in knobs)


def render(scenario: Scenario, results: list[tuple[Step, JobPlan]]) -> dict:
    """The output document of SCENARIO.md (``scaling.scenario.output.render``)."""
    m = scenario.memory
    memory = MemoryInputs((), m.policy, m.knobs, m.local_mode, m.state_in_rocksdb)
    return {"format": FORMAT, "steps": render_steps(scenario.mode, results, memory)}


def evaluate_text(text: str) -> dict:
    """Parse, run and render: the whole of ``python -m scaling evaluate``."""
    scenario = parse(text)
    return render(scenario, run_scenario(scenario))
