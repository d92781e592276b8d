"""Flink's ``JobVertexScalerTest`` (apache/flink-kubernetes-operator, module flink-autoscaler, main),
ported to scenario documents evaluated by ``scaling.scenario.format.evaluate_text``, the path of
``python -m scaling evaluate``. One test function per Flink test, named after it.

How a Flink call maps to a scenario:

- ``JobVertexScalerTest.setup()`` is ``FLINK_SETUP``: ``scale-down.max-factor`` 1,
  ``scale-up.max-factor`` ``Integer.MAX_VALUE``, ``catch-up.duration`` 0 and the deprecated
  ``scaling.key-group.partitions.adjust.mode`` ``EVENLY_SPREAD`` (the tests pin the legacy mode).
- ``evaluated(parallelism, targetDataRate, trueProcessingRate)`` is vertex ``b`` with
  ``records_in_per_s = targetDataRate`` and ``true_processing_rate`` given directly (max parallelism
  720, no catch-up). Its input ship strategies are an edge from a quiet source ``a`` (infinite TPR,
  parallelism 1, never changes): ``rebalance`` for ``NOT_ADJUST_INPUTS``; for the two
  ``adjustmentInputsProvider`` lists a ``hash`` edge, and a ``rebalance`` edge from ``a`` plus a
  ``hash`` edge from ``a2`` (``MIXED``). ``List.of()`` inputs with source
  partitions make ``b`` itself a source with ``partitions``.
- ``ParallelismChange.build(new, current, outsideUtilizationBound)``: ``b.outside_bounds`` is the flag;
  on its own, ``b`` scales to ``new`` only when the flag is set (Flink ``ScalingExecutor.
  computeScalingSummary`` acts only when some vertex is outside its bounds); when another vertex
  (the independent source ``t``, "trigger", below its scale-up threshold) is outside, every computed
  change applies, so ``b.proposed`` shows ``new`` either way. ``noChange(current)``: ``b`` keeps
  ``current`` in both runs.
- ``vertexScaler.scale(...)`` (no utilization gate): the same, with the trigger; its factor is
  ``round(target) / TPR`` at utilization target 1; ``parallelismLowerLimit`` / ``UpperLimit`` are
  ``min(current, vertex_min_parallelism)`` / ``max(current, vertex_max_parallelism)``, as
  ``computeScaleTargetParallelism`` passes them.
- The clock (``setClock``) is the step's ``at_s``; the ``DelayedScaleDown`` and the scaling history
  are the state the scenario carries from step to step.
"""

from __future__ import annotations

import json
import math

import pytest

from scaling.planner.vertex_scaler import observed_scaling_coefficient
from scaling.policy.options import flink_defaults
from scaling.policy.policy import Policy
from scaling.scenario.format import evaluate_text
from scaling.scenario.values import ScenarioError
from scaling.values.state import ScalingRecord

MAX_INT = 2**31 - 1
MIXED = "rebalance+hash"
"""Flink's second ``adjustmentInputsProvider`` list (REBALANCE, HASH, RESCALE): ``b`` has a
rebalance input from ``a`` and a hash input from ``a2``, each carrying half the target rate."""
ADJUSTMENT_INPUTS = pytest.mark.parametrize("ship", ["hash", MIXED])
"""Flink ``JobVertexScalerTest.adjustmentInputsProvider``: inputs that contain HASH."""
FLINK_SETUP = {**flink_defaults(), "scale_down_max_factor": 1.0, "scale_up_max_factor": float(MAX_INT),
               "catch_up_duration_s": 0, "key_group_partitions_adjust_mode": "evenly_spread"}


def build(new: int, current: int, outside: bool) -> tuple:
    """Flink ``ParallelismChange.build(newParallelism, currentParallelism, outsideUtilizationBound)``."""
    return ("build", new, current, outside)


def no_change(current: int) -> tuple:
    """Flink ``ParallelismChange.noChange(currentParallelism)``."""
    return ("noChange", current, current, False)


class FlinkVertex:
    """A scenario with the vertex under test ``b`` (see the module docstring)."""

    def __init__(self, policy: dict | None = None, *, ship: str | None = "rebalance", max_parallelism: int = 720,
                 partitions: int | None = None):
        self.policy = {**FLINK_SETUP, **(policy or {})}
        self.ship = ship
        self.max_parallelism = max_parallelism
        self.partitions = partitions

    def step(self, at_s: float, parallelism: int, target: float, tpr: float | str, *, trigger: bool = False) -> dict:
        metrics = {"b": {"records_in_per_s": target, "records_out_per_s": target, "true_processing_rate": tpr},
                   "t": {"records_in_per_s": 1000, "records_out_per_s": 1000,
                         "true_processing_rate": 100 if trigger else "inf"}}
        running = {"b": parallelism, "t": 1}
        for source in self.sources:
            share = target / len(self.sources)
            metrics[source] = {"records_in_per_s": share, "records_out_per_s": share, "true_processing_rate": "inf"}
            running[source] = 1
        return {"at_s": at_s, "parallelism": running, "metrics": metrics}

    @property
    def sources(self) -> tuple[str, ...]:
        """The quiet sources feeding ``b``: ``a`` (and ``a2`` for mixed inputs)."""
        return () if self.ship is None else ("a", "a2") if self.ship == MIXED else ("a",)

    def document(self, steps: list[dict], parallelism: int) -> dict:
        b = {"id": "b", "parallelism": parallelism, "max_parallelism": self.max_parallelism}
        if self.partitions is not None:
            b.update(partitions=self.partitions, source=True)
        vertices = [b, {"id": "t", "parallelism": 1, "source": True}]
        edges = []
        ships = ("rebalance", "hash") if self.ship == MIXED else (self.ship,)
        for source, ship in zip(self.sources, ships):
            vertices.insert(0, {"id": source, "parallelism": 1, "source": True})
            edges.append({"from": source, "to": "b", "ship": ship})
        return {"format": 1, "mode": "continuous", "policy": self.policy, "vertices": vertices, "edges": edges,
                "steps": steps}

    def run(self, steps: list[dict]) -> list[dict]:
        """Evaluate the steps; returns the output steps."""
        return evaluate_text(json.dumps(self.document(steps, steps[0]["parallelism"]["b"])))["steps"]

    def change(self, parallelism: int, target: float, tpr: float) -> tuple:
        """Flink ``computeScaleTargetParallelism(evaluated(parallelism, target, tpr))`` on a fresh
        state, returned as ``build``/``no_change`` would write it."""
        alone = self.run([self.step(0, parallelism, target, tpr)])[0]
        joined = self.run([self.step(0, parallelism, target, tpr, trigger=True)])[0]
        return change_of(alone, joined)

    def scale(self, current: int, factor_target: float, factor_tpr: float) -> int:
        """Flink ``vertexScaler.scale(...)`` with ``scaleFactor = round(factor_target) / factor_tpr``
        (utilization target 1): the parallelism ``b`` gets when the job scales."""
        out = self.run([self.step(0, current, factor_target, factor_tpr, trigger=True)])[0]
        assert out["decision"] == "scale"
        return out["vertices"]["b"]["proposed"]


def change_of(alone: dict, joined: dict | None = None) -> tuple:
    """The ``ParallelismChange`` shown by two runs of the same step: ``b`` alone, and with another
    vertex outside its bounds (``joined``, optional: then only ``b`` alone is read)."""
    b = alone["vertices"]["b"]
    current = b["current"]
    new = joined["vertices"]["b"]["proposed"] if joined is not None else b["proposed"]
    if new == current:
        assert b["proposed"] == current
        return no_change(current)
    outside = b["outside_bounds"]
    # On its own, the vertex scales only when it is outside its bounds (ScalingExecutor).
    assert b["proposed"] == (new if outside else current)
    assert alone["decision"] == ("scale" if outside else "no-change")
    return build(new, current, outside)


# ---------------------------------------------------------------------------------------------
# testParallelismScaling


@ADJUSTMENT_INPUTS
def test_parallelism_scaling(ship):
    """Flink ``JobVertexScalerTest.testParallelismScaling`` (hash inputs, 720 key groups, legacy
    EVENLY_SPREAD, scale-down interval 0). E.g. utilization 0.8, target 50, TPR 100: round(62.5) = 63,
    ceil(0.63 × 10) = 7, aligned to 8 (a divisor of 720 in [7, 10]); TPR 100 is inside
    [round(50 / 1.0), round(50 / 0.5)] = [50, 100], so the change is not outside the bounds."""
    def at(policy):
        return FlinkVertex({"scale_down_interval_s": 0, **policy}, ship=ship)

    assert at({"utilization_target": 1.0}).change(10, 50, 100) == build(5, 10, True)
    assert at({"utilization_target": 0.8}).change(10, 50, 100) == build(8, 10, False)
    assert at({"utilization_target": 0.8}).change(10, 80, 100) == no_change(10)
    assert at({"utilization_target": 0.8}).change(10, 60, 100) == build(8, 10, False)
    assert at({"utilization_target": 0.8}).change(10, 59, 100) == build(8, 10, False)
    assert at({"utilization_target": 0.5}).change(2, 100, 40) == build(10, 2, True)
    assert at({"utilization_target": 0.6}).change(2, 100, 100) == build(4, 2, True)
    assert at({"utilization_target": 1.0, "scale_down_max_factor": 0.5}).change(10, 10, 100) == build(5, 10, True)
    assert at({"utilization_target": 1.0, "scale_down_max_factor": 0.6}).change(10, 10, 100) == build(4, 10, True)
    assert at({"utilization_target": 1.0, "scale_up_max_factor": 0.5}).change(10, 200, 10) == build(15, 10, True)
    assert at({"utilization_target": 1.0, "scale_up_max_factor": 0.6}).change(10, 200, 10) == build(16, 10, True)


# ---------------------------------------------------------------------------------------------
# scale(): testParallelismComputation, ...WithAdjustment, ...WithLimit, testNumPartitionsAdjustment


def _scale(policy=None, **shape) -> FlinkVertex:
    return FlinkVertex({"utilization_target": 1.0, "scale_down_interval_s": 0, "vertex_max_parallelism": MAX_INT,
                        **(policy or {})}, **shape)


def test_parallelism_computation():
    """Flink ``JobVertexScalerTest.testParallelismComputation``: ``scale()`` with
    ``NOT_ADJUST_INPUTS`` (no alignment), limits [1, Integer.MAX_VALUE]: ``ceil(factor × current)``
    capped by the max parallelism (key groups)."""
    v = _scale()
    assert v.scale(1, 1, 10_000) == 1            # factor 0.0001
    assert v.scale(2, 10, 100) == 1              # 0.1
    assert v.scale(6, 80, 100) == 5              # 0.8: ceil(4.8)
    assert _scale(max_parallelism=128).scale(16, 150, 100) == 24   # 1.5
    assert v.scale(200, 200, 100) == 400         # 2
    assert v.scale(200, MAX_INT, 1) == 720       # Integer.MAX_VALUE, capped at 720 key groups


@ADJUSTMENT_INPUTS
def test_parallelism_computation_with_adjustment(ship):
    """Flink ``JobVertexScalerTest.testParallelismComputationWithAdjustment`` (hash inputs): the
    target is aligned to a divisor of the key groups; ``MAXIMIZE_UTILISATION`` also takes the first
    parallelism whose per-task share of key groups drops (128 // 26 = 4 < 128 // 25 = 5)."""
    assert _scale(ship=ship, max_parallelism=36).scale(6, 80, 100) == 6       # 5 -> 6 (= current)
    assert _scale(ship=ship, max_parallelism=128).scale(16, 150, 100) == 32   # 24 -> 32
    assert _scale(ship=ship).scale(200, 130, 100) == 360                      # 260 -> 360
    assert _scale(ship=ship).scale(200, MAX_INT, 1) == 720
    assert _scale(ship=ship, max_parallelism=128).scale(10, 250, 100) == 32   # 25 -> 32 (evenly spread)
    maximize = _scale({"key_group_partitions_adjust_mode": "maximize_utilisation", "vertex_max_parallelism": 128},
                      ship=ship, max_parallelism=128)
    assert maximize.scale(10, 250, 100) == 26


@ADJUSTMENT_INPUTS
def test_parallelism_computation_with_limit(ship):
    """Flink ``JobVertexScalerTest.testParallelismComputationWithLimit`` (hash inputs, legacy
    EVENLY_SPREAD): ``vertex.min/max-parallelism`` bound the target before alignment; when no
    divisor lies in [target, upper] the legacy mode falls back below the target (300 -> 240,
    600 -> 360: the boundary where 720 // p grows, snapped to a divisor).

    Flink's fourth assertion calls ``scale()`` with lower limit 60 above the current 16 (-> 64). From
    ``computeScaleTargetParallelism`` that is unreachable: the lower limit is ``min(current,
    vertex.min-parallelism)`` = 16, so ``vertex_min_parallelism`` 60 at p16 gives 32 (24 aligned),
    which is what Flink does; the same limit does apply when the vertex runs above it (p100,
    factor 0.24: 24 -> 60 -> 64)."""
    hashed = {"ship": ship}
    assert _scale({"vertex_max_parallelism": 700}, **hashed).scale(6, 80, 100) == 5
    assert _scale({"vertex_min_parallelism": 8, "vertex_max_parallelism": 700}, **hashed).scale(8, 80, 100) == 8
    assert _scale(max_parallelism=128, **hashed).scale(16, 150, 100) == 32
    assert _scale({"vertex_min_parallelism": 60}, max_parallelism=128, **hashed).scale(16, 150, 100) == 32
    assert _scale({"vertex_min_parallelism": 60}, max_parallelism=128, **hashed).scale(100, 24, 100) == 64
    assert _scale({"vertex_max_parallelism": 300}, **hashed).scale(200, 200, 100) == 240
    assert _scale({"vertex_max_parallelism": 600}, **hashed).scale(200, MAX_INT, 1) == 360


def test_ensure_min_parallelism_does_not_exceed_max():
    """Flink ``JobVertexScalerTest.ensureMinParallelismDoesNotExceedMax``: ``scale()`` refuses a
    lower limit above the upper one (``IllegalArgumentException``). Here such a policy is bad input:
    exit 2 with the field named, before any evaluation."""
    v = _scale({"vertex_min_parallelism": 500, "vertex_max_parallelism": 499})
    with pytest.raises(ScenarioError,
                       match=r"^policy\.vertex_min_parallelism: 500 is above vertex_max_parallelism 499"):
        v.scale(200, MAX_INT, 1)


def test_num_partitions_adjustment():
    """Flink ``JobVertexScalerTest.testNumPartitionsAdjustment``: a source with N partitions
    (``List.of()`` inputs) aligns to them; the legacy mode falls back below the target when no
    divisor of N lies in [target, upper], and keeps the current parallelism when the fallback would
    reverse the direction (p22, min 20, factor 1.1: 25 has no divisor of 35 in [25, 30]; the
    fallback 18 -> 20 is not a scale-up)."""
    def source(partitions, max_parallelism, policy=None):
        return _scale(policy, ship=None, partitions=partitions, max_parallelism=max_parallelism)

    assert source(15, 128).scale(6, 40, 100) == 3
    assert source(15, 128).scale(7, 120, 100) == 15
    assert source(35, 30).scale(20, 90, 100) == 18
    assert source(35, 30, {"vertex_min_parallelism": 20}).scale(22, 110, 100) == 22
    assert source(200, 128).scale(80, 140, 100) == 100
    # 199 partitions, factor 4 from p24: evenly spread goes to 199; maximize utilisation to 100 (99
    # subtasks read two partitions, one reads one).
    assert source(199, 32768).scale(24, 400, 100) == 199
    assert source(199, 32768, {"key_group_partitions_adjust_mode": "maximize_utilisation"}).scale(24, 400, 100) == 100


# ---------------------------------------------------------------------------------------------
# vertex.min/max-parallelism through computeScaleTargetParallelism


def test_min_parallelism_limit_is_used():
    """Flink ``JobVertexScalerTest.testMinParallelismLimitIsUsed`` (utilization 0.7, min 5): p10
    wants ceil(round(100 / 0.7) / 500 × 10) = 3 and gets 5; p4 (below the minimum) is not scaled
    up to it."""
    v = FlinkVertex({"vertex_min_parallelism": 5, "scale_down_interval_s": 0})
    assert v.change(10, 100, 500) == build(5, 10, True)
    assert v.change(4, 100, 500) == no_change(4)


def test_max_parallelism_limit_is_used():
    """Flink ``JobVertexScalerTest.testMaxParallelismLimitIsUsed`` (utilization 1, max 10): p10 wants
    50 and stays at 10; p12 (above the maximum) is not scaled down to it."""
    v = FlinkVertex({"vertex_max_parallelism": 10, "utilization_target": 1.0})
    assert v.change(10, 500, 100) == no_change(10)
    assert v.change(12, 500, 100) == no_change(12)


# ---------------------------------------------------------------------------------------------
# Delayed scale-down (FLINK-36018, FLINK-36863)

DELAYED = {"utilization_target": 1.0, "scale_down_interval_s": 60}


def test_disable_scale_down_interval():
    """Flink ``JobVertexScalerTest.testDisableScaleDownInterval``: interval 0 scales down at once."""
    v = FlinkVertex({"utilization_target": 1.0, "scale_down_interval_s": 0})
    assert v.change(10, 50, 100) == build(5, 10, True)


def test_scale_down_after_interval():
    """Flink ``JobVertexScalerTest.testScaleDownAfterInterval``: p100, TPR 1000, interval 1 min;
    targets 800, 900, 720, 640 at t = 0, 10, 40, 59 are held; at t = 60 (target 700) the largest
    recommendation of the window, 90 (t = 10), with its flag: inside the bounds (TPR 1000 <=
    round(900 / 0.7)), so ``build(90, 100, false)``: it applies only with another vertex's scaling."""
    v = FlinkVertex(DELAYED)
    held = [v.step(at, 100, target, 1000) for at, target in ((0, 800), (10, 900), (40, 720), (59, 640))]
    alone = v.run([*held, v.step(60, 100, 700, 1000)])
    joined = v.run([*held, v.step(60, 100, 700, 1000, trigger=True)])
    for out in alone[:4]:
        assert change_of(out) == no_change(100)
    assert [s["held"][0]["target"] for s in alone[:4]] == [80, 90, 90, 90]
    assert {s["held"][0]["due_s"] for s in alone[:4]} == {60}
    assert change_of(alone[4], joined[4]) == build(90, 100, False)


def test_immediate_scale_up_within_scale_down_interval():
    """Flink ``JobVertexScalerTest.testImmediateScaleUpWithinScaleDownInterval``: two held
    scale-downs, then at t = 12 a scale-up (target 1700) applies at once and clears the delayed
    scale-down (``getDelayedVertices()`` empty: no ``held`` afterwards)."""
    v = FlinkVertex(DELAYED)
    out = v.run([v.step(0, 100, 800, 1000), v.step(10, 100, 900, 1000), v.step(12, 100, 1700, 1000)])
    assert [change_of(s) for s in out] == [no_change(100), no_change(100), build(170, 100, True)]
    assert out[0]["held"] and out[1]["held"] and "held" not in out[2]


def test_cancel_delayed_scale_down_after_new_parallelism_is_same():
    """Flink ``JobVertexScalerTest.testCancelDelayedScaleDownAfterNewParallelismIsSame``: at t = 12
    the recommendation equals the current parallelism, which clears the delayed scale-down. Seen
    from outside: nothing is held after t = 12, and a scale-down recommended again at t = 61 starts
    a new interval (first at 61, due at 121) instead of being due from t = 0."""
    v = FlinkVertex(DELAYED)
    out = v.run([v.step(0, 100, 800, 1000), v.step(10, 100, 900, 1000), v.step(12, 100, 1000, 1000),
                 v.step(61, 100, 800, 1000)])
    assert [change_of(s) for s in out] == [no_change(100)] * 4
    assert out[1]["held"][0]["first_at_s"] == 0 and "held" not in out[2]
    assert (out[3]["held"][0]["first_at_s"], out[3]["held"][0]["due_s"]) == (61, 121)


def test_max_recommended_parallelism_used_after_scale_down_interval():
    """Flink ``JobVertexScalerTest.testMaxRecommendedParallelismUsedAfterScaleDownInterval``: t = 0
    recommends 50 (held), t = 30 recommends 60, which replaces 50 (the window keeps decreasing
    values); at t = 65 (window start 5 s) ``build(60, 100, true)``."""
    v = FlinkVertex(DELAYED)
    out = v.run([v.step(0, 100, 500, 1000), v.step(30, 100, 600, 1000), v.step(65, 100, 600, 1000)])
    assert [change_of(s) for s in out] == [no_change(100), no_change(100), build(60, 100, True)]
    assert out[0]["held"][0]["target"] == 50 and out[1]["held"][0]["target"] == 60


def test_max_recommended_parallelism_equals_current_parallelism_returns_no_change():
    """Flink ``JobVertexScalerTest.testMaxRecommendedParallelismEqualsCurrentParallelismReturnsNoChange``:
    a recommendation of 100 at t = 5 (Flink injects it; here the vertex ran at p120 then and
    recommended ceil(833 / 1000 × 120) = 100, and runs at p100 from t = 65). At t = 65 it
    recommends 80, but 100 is still in the window [5, 65], so the due scale-down is no change, even
    when another vertex scales."""
    v = FlinkVertex(DELAYED)
    first = v.step(5, 120, 833.3, 1000)
    alone = v.run([first, v.step(65, 100, 800, 1000)])
    joined = v.run([first, v.step(65, 100, 800, 1000, trigger=True)])
    assert alone[0]["held"][0]["target"] == 100
    assert change_of(alone[1], joined[1]) == no_change(100)


# ---------------------------------------------------------------------------------------------
# Ineffective scale-up detection


def _ineffective_steps(v: FlinkVertex) -> list[dict]:
    """The evaluations of Flink's ineffective-scaling tests, one step each (1 s apart)."""
    rows = [(5, 100, 50), (10, 180, 90), (20, 180, 94), (20, 180, 98), (10, 180, 90), (20, 180, 100)]
    return [v.step(i, p, target, tpr) for i, (p, target, tpr) in enumerate(rows)]


def test_ineffective_scaling_detection():
    """Flink ``JobVertexScalerTest.testIneffectiveScalingDetection`` (utilization 1, interval 0,
    detection enabled, threshold 0.1): 5 -> 10 (expected TPR 100), 10 -> 20 (80 % of the expected
    gain: effective; expected 180); at p20 TPR 94 and 98 are 4 / 90 and 8 / 90 of the expected gain:
    blocked; at p10 (a manual rescale: not the last scaling's result) 10 -> 20 again; TPR 100 is
    10 / 90 > 0.1: 20 -> 36. With detection off, TPR 90 still scales 20 -> 40; a scale-down is never
    blocked (20 -> 10)."""
    v = FlinkVertex({"utilization_target": 1.0, "scale_down_interval_s": 0, "effectiveness_detection_enabled": True})
    out = v.run(_ineffective_steps(v) + [v.step(6, 20, 45, 90)])
    assert [change_of(s) for s in out] == [build(10, 5, True), build(20, 10, True), no_change(20), no_change(20),
                                         build(20, 10, True), build(36, 20, True), build(10, 20, True)]
    assert [s["vertices"]["b"]["expected_processing_rate"] for s in out[:2]] == [100, 180]
    assert out[2]["decision"] == out[3]["decision"] == "blocked"
    # Detection off: the same ineffective history does not block.
    off = FlinkVertex({"utilization_target": 1.0, "scale_down_interval_s": 0})
    out = off.run(_ineffective_steps(off)[:2] + [off.step(2, 20, 180, 90)])
    assert change_of(out[2]) == build(40, 20, True)


def test_expected_processing_rate_computation():
    """Flink ``JobVertexScalerTest.testExpectedProcessingRateComputation`` (FLINK-39743): the
    expected rate is ``TPR / current × new`` with the final, capped parallelism: the scale-up factor
    caps 200 to 15 (expected 15); p2 at utilization 0.6 goes to ceil(3.34) = 4 (expected 200); 15
    source partitions cap 20 to 15 (expected 150)."""
    capped = FlinkVertex({"utilization_target": 1.0, "scale_down_interval_s": 0, "scale_up_max_factor": 0.5})
    out = capped.run([capped.step(0, 10, 200, 10)])[0]
    assert change_of(out) == build(15, 10, True) and out["vertices"]["b"]["expected_processing_rate"] == 15
    rounded = FlinkVertex({"utilization_target": 0.6, "scale_down_interval_s": 0})
    out = rounded.run([rounded.step(0, 2, 100, 100)])[0]
    assert change_of(out) == build(4, 2, True) and out["vertices"]["b"]["expected_processing_rate"] == 200
    partitioned = FlinkVertex({"utilization_target": 1.0, "scale_down_interval_s": 0}, ship=None, partitions=15)
    out = partitioned.run([partitioned.step(0, 10, 200, 100)])[0]
    assert change_of(out) == build(15, 10, True) and out["vertices"]["b"]["expected_processing_rate"] == 150


@ADJUSTMENT_INPUTS
def test_sending_ineffective_scaling_events(ship):
    """Flink ``JobVertexScalerTest.testSendingIneffectiveScalingEvents`` (hash inputs): the
    parallelism decisions (5 -> 10, 10 -> 20, then TPR 95 at p20, 5 / 90 of the expected gain:
    blocked, and again with TPR 95.01; with detection off 20 -> 40). The event texts, counts and
    ``scaling.event.interval`` are Flink's event handler, which we do not model."""
    policy = {"utilization_target": 1.0, "scale_down_interval_s": 0}
    v = FlinkVertex({**policy, "effectiveness_detection_enabled": True}, ship=ship)
    rows = [(5, 100, 50), (10, 180, 90), (20, 180, 95), (20, 180, 95.01)]
    out = v.run([v.step(i, p, target, tpr) for i, (p, target, tpr) in enumerate(rows)])
    assert [change_of(s) for s in out] == [build(10, 5, True), build(20, 10, True), no_change(20), no_change(20)]
    assert out[2]["decision"] == "blocked"
    off = FlinkVertex(policy, ship=ship)
    out = off.run([off.step(i, p, target, tpr) for i, (p, target, tpr) in enumerate(rows[:3])])
    assert change_of(out[2]) == build(40, 20, True)


def test_sending_scaling_limited_events():
    """Flink ``JobVertexScalerTest.testSendingScalingLimitedEvents``: a source with 15 partitions,
    p10, factor 2 (and 1.99): limited to 15 (``build(15, 10, true)``). The ``SCALING_LIMITED`` event
    is Flink's event handler (not modelled); the limit shows as the vertex's proposal."""
    v = FlinkVertex({"utilization_target": 1.0, "scale_down_interval_s": 0}, ship=None, partitions=15)
    assert change_of(v.run([v.step(0, 10, 200, 100)])[0]) == build(15, 10, True)
    assert change_of(v.run([v.step(0, 10, 199, 100)])[0]) == build(15, 10, True)


# ---------------------------------------------------------------------------------------------
# Observed scalability (FLINK-30571 follow-up)


def _history_steps(v: FlinkVertex, history: list[tuple[int, float]]) -> list[dict]:
    """Steps whose scalings leave ``history`` as the vertex's scaling history: each runs at
    parallelism P_i with TPR R_i (Flink ``ScalingSummary(P_i, ..., evaluated(P_i, ., R_i))``) and
    scales up (target 4 × R_i), so a ``ScalingRecord`` of (P_i, R_i) is kept."""
    return [v.step(i, p, 4 * tpr, tpr) for i, (p, tpr) in enumerate(history)]


LINEAR = [(4, 200), (2, 100), (8, 400)]
DIMINISHING = [(4, 160), (2, 96), (8, 240)]


def _coefficient(history: list[tuple[int, float]], min_observations: int = 3) -> int:
    """The coefficient Flink's ``calculateObservedScalingCoefficient`` fits to ``history``, read
    from a probe after it: p100 at factor 10000 / 9999 goes to ceil(100.01 / α)."""
    v = FlinkVertex({"utilization_target": 1.0, "scale_down_interval_s": 0, "alignment": "off",
                     "observed_scalability_enabled": True,
                     "observed_scalability_min_observations": min_observations}, max_parallelism=32768)
    out = v.run([*_history_steps(v, history), v.step(len(history), 100, 10_000, 9_999)])
    assert all(s["decision"] == "scale" for s in out)
    return out[-1]["vertices"]["b"]["proposed"]


def _probe(alpha: float) -> int:
    """The probe's parallelism for a coefficient ``alpha``: ceil(100 × 10000 / 9999 / α)."""
    return math.ceil(round(100 * 10_000 / 9_999 / alpha, 9))


def test_calculate_scaling_coefficient():
    """Flink ``JobVertexScalerTest.testCalculateScalingCoefficient``: least squares ``α = Σ P·R /
    (Σ P² · β)``, β the TPR per task at the latest smallest parallelism, clamped to [0.5, 1] and
    rounded up to 2 decimals. Linear: 1.0; slight diminishing returns (4, 196), (2, 99), (8, 390):
    4102 / (84 × 49.5) = 0.987 -> 0.99 (in (0.9, 1)); sharp (4, 160), (2, 96), (8, 240): 0.683 ->
    0.69; with a p1 record (1, 50), (2, 80), (4, 100): β = 50, 610 / 1050 -> 0.59 (both in
    (0.4, 0.9)). ``min-observations`` 1: one record (4, 100) -> 1; (2, 80), (4, 100): 560 / 800 ->
    0.70; (2, 80), (4, 160) -> 1."""
    assert _coefficient(LINEAR) == _probe(1.0) == 101
    assert _coefficient([(4, 196), (2, 99), (8, 390)]) == _probe(0.99)
    assert _coefficient(DIMINISHING) == _probe(0.69)
    assert _coefficient([(1, 50), (2, 80), (4, 100)]) == _probe(0.59)
    assert _coefficient([(4, 100)], min_observations=1) == _probe(1.0)
    assert _coefficient([(2, 80), (4, 100)], min_observations=1) == _probe(0.70)
    assert _coefficient([(2, 80), (4, 160)], min_observations=1) == _probe(1.0)


@ADJUSTMENT_INPUTS
def test_parallelism_scaling_with_observed_scaling_coefficient(ship):
    """Flink ``JobVertexScalerTest.testParallelismScalingWithObservedScalingCoefficient`` (hash
    inputs, utilization 0.5, observed scalability on): p2, target 100, TPR 40: factor 5 -> 10 with
    the linear history; 5 / 0.69 -> ceil(14.49) = 15 with the diminishing one."""
    for history, expected in ((LINEAR, 10), (DIMINISHING, 15)):
        v = FlinkVertex({"utilization_target": 0.5, "observed_scalability_enabled": True}, ship=ship)
        out = v.run([*_history_steps(v, history), v.step(len(history), 2, 100, 40)])
        assert change_of(out[-1]) == build(expected, 2, True)


# ---------------------------------------------------------------------------------------------
# Found while auditing JobVertexScaler (not a JobVertexScalerTest case)


def test_backlog_mode_scale_down_joins_a_scaling_as_in_flink():
    """Flink ``JobVertexScaler`` has no backlog check: processing backlog only sets the band to [0, 1]
    (``ScalingMetricEvaluator.computeProcessingRateThresholds``), so a scale-down cannot trigger a
    scaling but joins one (``ScalingExecutor.computeScalingSummary``), and with a scale-down
    interval it is recorded as a delayed scale-down. Lag 600 s > 300 s; the source (busy 1000 ms/s)
    scales up; the sink (TPR 20,000, target capacity round(333.3 + 1000 / 0.7) = 1762) goes 8 -> 4
    (factor clamped to 1 − 0.6): backlog mode does not keep it at 8."""
    def doc(interval, src_busy):
        return {"format": 1, "mode": "continuous",
                "policy": {**flink_defaults(), "scale_down_interval_s": interval, "restart_time_s": 0,
                           "alignment": "off"},
                "vertices": [{"id": "src", "parallelism": 4, "source": True}, {"id": "sink", "parallelism": 8}],
                "edges": [{"from": "src", "to": "sink", "ship": "rebalance"}],
                "steps": [{"at_s": 0, "metrics": {
                    "src": {"records_in_per_s": 1000, "records_out_per_s": 1000, "busy_time_ms_per_s": src_busy,
                            "backlog": 600_000},
                    "sink": {"records_in_per_s": 1000, "records_out_per_s": 0, "busy_time_ms_per_s": 50}}}]}

    out = evaluate_text(json.dumps(doc(0, 1000)))["steps"][0]
    assert out["decision"] == "scale"
    assert out["vertices"]["sink"]["scale_down_threshold"] == "inf"
    assert (out["vertices"]["src"]["proposed"], out["vertices"]["sink"]["proposed"]) == (8, 4)
    # Alone (the source within its bounds at 250 ms/s: TPR 4000 >= 1334), the scale-down triggers nothing.
    alone = evaluate_text(json.dumps(doc(0, 250)))["steps"][0]
    assert alone["decision"] == "no-change" and alone["vertices"]["sink"]["proposed"] == 8
    # With an interval it is held (recorded), not dropped, and does not join the source's scaling.
    held = evaluate_text(json.dumps(doc(3600, 1000)))["steps"][0]
    assert held["vertices"]["sink"]["proposed"] == 8
    assert held["held"] == [{"vertex_id": "sink", "current": 8, "target": 4, "first_at_s": 0, "due_s": 3600}]


def test_scaling_history_older_than_24_hours_is_not_used():
    """Flink hands ``computeScaleTargetParallelism`` the vertex's history trimmed to
    ``job.autoscaler.history.max.age`` (24 h, ``ScalingHistoryUtils.trimScalingHistory``): the
    ineffective 10 -> 20 of ``testIneffectiveScalingDetection`` (TPR 90 -> 94) blocks a scale-up
    24 h after it, but not once it is older: then 20 -> ceil(180 / 94 × 20) = 39."""
    v = FlinkVertex({"utilization_target": 1.0, "scale_down_interval_s": 0, "effectiveness_detection_enabled": True})
    first = [v.step(0, 5, 100, 50), v.step(1, 10, 180, 90)]
    within = v.run([*first, v.step(1 + 24 * 3600, 20, 180, 94)])
    assert change_of(within[2]) == no_change(20) and within[2]["decision"] == "blocked"
    after = v.run([*first, v.step(2 + 24 * 3600, 20, 180, 94)])
    assert change_of(after[2]) == build(39, 20, True)


def test_true_processing_rate_from_busy_time_is_computed_in_flinks_order():
    """Flink ``ScalingMetricEvaluator.computeTprFromBusyTime``: ``rate / (busyMsPerSecond / 1000)``.
    350.1 records/s at 700.2 ms/s is exactly 500.0 that way (``rate × 1000 / busy`` gives
    499.99999999999994), so it is not below a scale-up threshold of round(350.1 / 0.7002) = 500 and
    the vertex is within its bounds, as in Flink's ``JobVertexScaler.outsideUtilizationBound``."""
    doc = {"format": 1, "mode": "continuous",
           "policy": {"utilization_target": 0.7, "utilization_max": 0.7002, "catch_up_duration_s": 0,
                      "alignment": "off"},
           "vertices": [{"id": "src", "parallelism": 1, "source": True}],
           "steps": [{"at_s": 0, "metrics": {"src": {"records_in_per_s": 350.1, "records_out_per_s": 350.1,
                                                     "busy_time_ms_per_s": 700.2}}}]}
    src = evaluate_text(json.dumps(doc))["steps"][0]["vertices"]["src"]
    assert (src["true_processing_rate"], src["scale_up_threshold"]) == (500.0, 500.0)
    assert src["outside_bounds"] is False


def test_observed_scaling_coefficient_with_an_idle_vertex_in_the_history_is_one():
    """Flink ``calculateObservedScalingCoefficient`` fits every record of the history: an idle
    vertex's past scaling (TPR infinite, p10 -> 1) makes ``Σ P·R`` infinite, α = min(1, ∞) = 1. The
    records (2, 80), (4, 100) alone would give 560 / 800 = 0.70 (the probe: 143 instead of 101)."""
    v = FlinkVertex({"utilization_target": 1.0, "scale_down_interval_s": 0, "alignment": "off",
                     "observed_scalability_enabled": True, "observed_scalability_min_observations": 2},
                    max_parallelism=32768)
    out = v.run([v.step(0, 10, 100, "inf"),
                 v.step(1, 2, 320, 80), v.step(2, 4, 400, 100), v.step(3, 100, 10_000, 9_999)])
    assert [s["decision"] for s in out] == ["scale"] * 4
    assert out[0]["vertices"]["b"]["proposed"] == 1
    assert out[-1]["vertices"]["b"]["proposed"] == _probe(1.0) == 101


def test_balanced_alignment_keeps_a_target_above_the_source_partitions():
    """Flink main (FLIP-586, ``ParallelismAligner.firstAlignedInRegion`` / ``BuiltInAlignmentMode``):
    the number of source partitions bounds only the alignment region, not the parallelism; with the
    default ``balanced`` mode a source with 15 partitions at p10 and factor 2 goes to 20 (the legacy
    ``evenly_spread`` of ``testExpectedProcessingRateComputation`` falls back to 15)."""
    v = FlinkVertex({"utilization_target": 1.0, "scale_down_interval_s": 0, "key_group_partitions_adjust_mode": None},
                    ship=None, partitions=15)
    assert change_of(v.run([v.step(0, 10, 200, 100)])[0]) == build(20, 10, True)


@pytest.mark.xfail(strict=True, reason=(
    "Deliberate: compute_parallelism takes ceil_exact (floating-point noise below 1e-9 ignored), "
    "Flink Math.ceil(scaleFactor * currentParallelism): 1.1 x 100 = 110.00000000000001 -> Flink 111, ours 110. "
    "Java's ceil on 2,000,000 random (rate, TPR, p) draws differed from ceil_exact in 167 (1 in 12,000), "
    "and such a case breaks DS2's one-step convergence (tests/scaling/planner/test_properties.py): utilization 0.6, "
    "424,881 records/s, 2,777 per task, p124 -> 256 with Java's ceil, then 256 -> 255 at the linear rate."))
def test_scale_factor_ceil_keeps_javas_floating_point_noise():
    """Flink ``JobVertexScaler.scale``: ``(int) Math.min(Math.ceil(scaleFactor * currentParallelism),
    Integer.MAX_VALUE)`` in doubles: scale-up max factor 0.1 from p100 is ceil(1.1 × 100) = 111."""
    v = FlinkVertex({"utilization_target": 1.0, "scale_down_interval_s": 0, "scale_up_max_factor": 0.1},
                    max_parallelism=32768)
    assert change_of(v.run([v.step(0, 100, 1000, 10)])[0]) == build(111, 100, True)


@pytest.mark.parametrize("history, alpha", [
    (LINEAR, 1.0),
    ([(2, 100), (4, 300), (8, 900)], 1.0),   # superlinear: 8,600 / (84 × 50) = 2.05, clamped to 1
    (DIMINISHING, 0.69),                     # 2,752 / (84 × 48) = 0.6825, rounded up
    ([(2, 100), (4, 120), (8, 160)], 0.5),   # 1,960 / (84 × 50) = 0.47, clamped to coefficient_min
])
def test_the_observed_scaling_coefficient_is_the_fit_clamped_to_between_its_minimum_and_one(history, alpha):
    """``calculateObservedScalingCoefficient``'s fit ``Σ P·R / (Σ P² · β)``, β the TPR per task at the smallest
    parallelism, clamped to ``[coefficient_min, 1]``: a history that scaled better than linearly is linear."""
    records = tuple(ScalingRecord(float(i), "b", p, 2 * p, rate, 2 * rate) for i, (p, rate) in enumerate(history))
    policy = Policy(observed_scalability_enabled=True, observed_scalability_min_observations=3)
    assert observed_scaling_coefficient(records, policy) == alpha
