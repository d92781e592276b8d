"""The policy registry (an explicit table): batch-ratio (SPARK-12133), min-increase (FLIP-160)."""

import json

import pytest

from scaling.planner.algorithms import algorithm_names, batch_ratio_executors, can_scale_up, resolve
from scaling.planner.door import decide
from scaling.policy.option_types import PolicyError
from scaling.policy.policy import Policy
from scaling.scenario.format import evaluate_text
from scaling.scenario.values import ScenarioError
from scaling.values.metrics import ClusterState, VertexMetrics
from scaling.values.reasons import PlanReason, Reason
from scaling.values.request import PlanRequest
from scaling.values.topology import Topology, Vertex


@pytest.mark.parametrize(("processing_ms", "expected"), [(1000, 3), (2000, 4), (901, 3), (899, 2), (299, 1)])
def test_batch_ratio_numbers(processing_ms, expected):
    """SPARK-12133, batch interval 1 s, 2 executors: R = processing / interval. R >= 0.9 adds
    max(round(R), 1); R <= 0.3 removes one; 899 ms (R 0.899) is no change."""
    cluster = ClusterState(executors=2, min_executors=1, max_executors=16, trigger_interval_s=1.0)
    executors, ratio, _ = batch_ratio_executors([processing_ms / 1000], cluster)
    assert executors == expected
    assert ratio == pytest.approx(processing_ms / 1000)


def test_batch_ratio_averages_over_the_interval_and_respects_bounds():
    cluster = ClusterState(executors=2, min_executors=2, max_executors=3, trigger_interval_s=1.0)
    assert batch_ratio_executors([0.5, 1.5, 2.5], cluster)[0] == 3          # R 1.5 -> +2, capped at 3
    assert batch_ratio_executors([0.1], cluster)[0] == 2                     # already at min
    half = ClusterState(executors=4, trigger_interval_s=1.0)
    assert batch_ratio_executors([0.45], half, scale_down_ratio=0.5)[0] == 3  # the design note's 0.5


def micro_batch_doc(algorithm: str, durations: list[float], **cluster) -> dict:
    return {"format": 1, "mode": "micro-batch", "policy": {"algorithm": algorithm, "restart_time_s": 0},
            "cluster": {"executors": 2, "cores_per_executor": 1, "min_executors": 1, "max_executors": 16, **cluster},
            "trigger_interval_s": 1.0,
            "vertices": [{"id": "scan", "parallelism": 2, "source": True}],
            "steps": [{"at_s": 0, "batch_durations_s": durations, "metrics": {
                "scan": {"records_in_per_s": 1000, "records_out_per_s": 1000, "busy_time_ms_per_s": 500}}}]}


@pytest.mark.parametrize(("processing_s", "decision", "proposed"), [
    (1.0, "scale", 3), (2.0, "scale", 4), (0.901, "scale", 3), (0.899, "no-change", 2), (0.299, "scale", 1)])
def test_batch_ratio_policy_through_the_scenario(processing_s, decision, proposed):
    step = evaluate_text(json.dumps(micro_batch_doc("batch-ratio", [processing_s])))["steps"][0]
    assert step["decision"] == decision
    assert step["executors"]["current"] == 2 and step["executors"]["proposed"] == proposed
    assert step["vertices"]["scan"]["proposed"] == 2  # SPARK-12133 only changes executors


def test_can_scale_up_is_flip_160():
    assert can_scale_up(10, 11) and not can_scale_up(10, 10)
    assert not can_scale_up(10, 12, min_parallelism_increase=3) and can_scale_up(10, 13, 3)


def test_min_increase_takes_new_executors_only_above_the_threshold():
    """One stage at 2 tasks on 2 executors; 4 executors become available. Reactive mode: take them all
    and 4 tasks, cumulative parallelism 2 -> 4 (+2). With a threshold of 3 that is not enough."""
    topology = Topology((Vertex("scan", parallelism=2, source=True),))
    metrics = {"scan": VertexMetrics(1000, 1000, 500)}
    cluster = ClusterState(executors=2, available_executors=4)
    plan = decide(PlanRequest(topology, metrics, Policy(algorithm="min-increase", restart_time_s=0),
                                mode="micro-batch", cluster=cluster))
    assert (plan.decision, plan.executors_proposed, plan.vertex("scan").proposed) == ("scale", 4, 4)
    plan = decide(PlanRequest(topology, metrics, Policy(algorithm="min-increase", restart_time_s=0,
                                                          min_parallelism_increase=3),
                                mode="micro-batch", cluster=cluster))
    assert (plan.decision, plan.executors_proposed, plan.vertex("scan").proposed) == ("no-change", 2, 2)
    assert plan.reasons[-1] == Reason(PlanReason.MIN_INCREASE_NOT_MET, None,
                                      {"current": 2, "new": 4, "min_increase": 3})


def test_registry_is_an_explicit_table_and_never_imports_input(monkeypatch):
    """No arbitrary imports: an algorithm is a name in ``ALGORITHMS``; a dotted path is an
    unknown name, the error names the known ones, and no module named by input is imported."""
    import importlib
    import sys

    assert algorithm_names() == ("batch-ratio", "ds2", "min-increase")
    assert resolve("ds2").name == "ds2" and resolve("batch-ratio").name == "batch-ratio"
    imported = []
    real_import = importlib.import_module
    monkeypatch.setattr(importlib, "import_module", lambda name, *a: imported.append(name) or real_import(name, *a))
    sys.modules.pop("this", None)
    for name in ("this:x", "this", "os.path:join", "tests.scaling.planner.test_algorithms:AlwaysNoChange", "", "DS2"):
        with pytest.raises(PolicyError, match="^algorithm: unknown policy .*; known: batch-ratio, ds2, min-increase$"):
            resolve(name)
    assert "this" not in sys.modules and imported == []
    with pytest.raises(ScenarioError, match="^policy.algorithm: unknown policy 'this:x'"):
        evaluate_text(json.dumps({"format": 1, "policy": {"algorithm": "this:x"},
                                  "vertices": [{"id": "a", "source": True}],
                                  "steps": [{"metrics": {"a": {"records_in_per_s": 1, "busy_time_ms_per_s": 1}}}]}))
    assert "this" not in sys.modules
