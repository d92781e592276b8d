"""The scaling algorithms in one explicit registry (``ALGORITHMS``), chosen by ``Policy.algorithm``:
``ds2`` (FLIP-271 / DS2, the default), ``batch-ratio`` (SPARK-12133, Spark's
``streaming.scheduler.ExecutorAllocationManager``) and ``min-increase`` (FLIP-160 ``canScaleUp``). A
name not in the table is an error naming the known ones: no module is imported because input named it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Protocol

from scaling.planner.continuous import plan_job
from scaling.planner.microbatch import plan_micro_batch
from scaling.planner.signals import cores_fixed
from scaling.planner.vertex_scaler import align_parallelism, alignment_base, parallelism_bounds, pinned_reason
from scaling.policy.option_types import PolicyError
from scaling.policy.periods import active_period
from scaling.values.metrics import ClusterState
from scaling.values.mode import Mode
from scaling.values.plan import JobPlan
from scaling.values.reasons import Decision, PlanReason, Reason
from scaling.values.request import PlanRequest


class ScalingPolicy(Protocol):
    """A pluggable algorithm: pure, deterministic for a given request."""

    name: str

    def plan(self, request: PlanRequest) -> JobPlan: ...


def algorithm_names() -> tuple[str, ...]:
    """The names ``Policy.algorithm`` accepts, sorted (the choices a form offers)."""
    return tuple(sorted(ALGORITHMS))


def resolve(name: str) -> ScalingPolicy:
    """A new instance of the policy registered as ``name``; nothing is imported. Raises ``PolicyError``
    (``algorithm: unknown policy 'x'; known: batch-ratio, ds2, min-increase``) for another name."""
    factory = ALGORITHMS.get(name) if isinstance(name, str) else None
    if factory is None:
        raise PolicyError(f"algorithm: unknown policy {name!r}; known: {', '.join(algorithm_names())}")
    return factory()


def _require_cluster(request: PlanRequest, name: str) -> ClusterState:
    """The request's cluster, its executor count pinned when the pipeline cannot change it
    (``signals.cores_fixed``): no algorithm plans cores the pipeline cannot set."""
    if request.mode != Mode.MICRO_BATCH or request.cluster is None:
        raise PolicyError(f"algorithm: {name} needs mode micro-batch with a cluster")
    return cores_fixed(request.cluster)


class DS2Policy:
    """FLIP-271 / DS2 (the default)."""

    name = "ds2"
    modes = (Mode.CONTINUOUS, Mode.MICRO_BATCH)

    def plan(self, request: PlanRequest) -> JobPlan:
        if request.mode == Mode.MICRO_BATCH:
            return plan_micro_batch(request.topology, request.metrics, _require_cluster(request, self.name),
                                    request.policy, batch_duration_s=request.batch_duration_s,
                                    state=request.state, now_s=request.now_s,
                                    batch_durations_s=request.batch_durations_s, not_ready=request.not_ready)
        return plan_job(request.topology, request.metrics, request.policy, request.state, request.now_s)


def batch_ratio_executors(batch_durations_s: Sequence[float], cluster: ClusterState, *,
                          scale_up_ratio: float = 0.9,
                          scale_down_ratio: float = 0.3) -> tuple[int, float | None, Reason]:
    """SPARK-12133 (``ExecutorAllocationManager.manageAllocation``): the executor count for the next
    interval. Returns (executors, R, reason).

    ``R = mean(batch duration) / batch interval`` over the scaling interval (dimensionless). When
    ``R ≥ scale_up_ratio``: add ``max(round(R), 1)`` executors (``Math.round``, half up); when
    ``R ≤ scale_down_ratio``: remove one. The result stays within [min_executors, max_executors].
    """
    if not batch_durations_s:
        return cluster.executors, None, Reason(PlanReason.BATCH_RATIO_NO_BATCH)
    ratio = sum(batch_durations_s) / len(batch_durations_s) / cluster.trigger_interval_s
    data = {"ratio": ratio, "scale_up_ratio": scale_up_ratio, "scale_down_ratio": scale_down_ratio}
    if ratio >= scale_up_ratio:
        added = max(int(math.floor(ratio + 0.5)), 1)
        executors = max(min(cluster.max_executors, cluster.executors + added), cluster.min_executors)
        return executors, ratio, Reason(PlanReason.BATCH_RATIO_UP, None, {**data, "added": added})
    if ratio <= scale_down_ratio and cluster.executors > cluster.min_executors:
        return cluster.executors - 1, ratio, Reason(PlanReason.BATCH_RATIO_DOWN, None, data)
    if ratio > scale_down_ratio:
        return cluster.executors, ratio, Reason(PlanReason.BATCH_RATIO_WITHIN, None, data)
    return cluster.executors, ratio, Reason(PlanReason.BATCH_RATIO_AT_MIN, None,
                                            {**data, "min_executors": cluster.min_executors})


def _with_executors(plan: JobPlan, executors: int, reasons: tuple[Reason, ...], decision: Decision) -> JobPlan:
    vertices = tuple(replace(v, proposed=v.current) for v in plan.vertices)
    return replace(plan, decision=decision, reasons=reasons, vertices=vertices, executors_proposed=executors)


class BatchRatioPolicy:
    """SPARK-12133: executors follow the batch ratio R; partitions stay. The DS2 evaluation of each
    vertex is still shown."""

    name = "batch-ratio"
    modes = (Mode.MICRO_BATCH,)

    def plan(self, request: PlanRequest) -> JobPlan:
        cluster = _require_cluster(request, self.name)
        policy = request.policy
        base = plan_micro_batch(request.topology, request.metrics, cluster, policy,
                                batch_duration_s=request.batch_duration_s, state=None, now_s=request.now_s)
        executors, _, reason = batch_ratio_executors(request.batch_durations_s, cluster,
                                                     scale_up_ratio=policy.batch_ratio_scale_up,
                                                     scale_down_ratio=policy.batch_ratio_scale_down)
        decision = Decision.SCALE if executors != cluster.executors else Decision.NO_CHANGE
        if decision == Decision.SCALE and not base.executable:
            decision = Decision.BLOCKED
            executors = cluster.executors
        # Inside an excluded period the plan is not executable: say which period (from the value, not
        # from the micro-batch plan's sentences).
        period = None if base.executable else active_period(policy.excluded_periods, request.now_s)
        extra = (Reason(PlanReason.EXCLUDED_PERIOD, None, {"period": period}),) if period is not None else ()
        plan = _with_executors(base, executors, (reason, *extra), decision)
        return replace(plan, algorithm=self.name, next_state=request.state)


def can_scale_up(current_cumulative_parallelism: int, new_cumulative_parallelism: int,
                 min_parallelism_increase: int = 1) -> bool:
    """FLIP-160 ``ScalingPolicy.canScaleUp``: rescale only when the cumulative parallelism (the sum
    over vertices) grows by at least ``min_parallelism_increase``
    (``jobmanager.adaptive-scheduler.min-parallelism-increase``)."""
    return new_cumulative_parallelism - current_cumulative_parallelism >= min_parallelism_increase


class MinIncreasePolicy:
    """FLIP-160 reactive scaling: when new executors become available (``cluster.available_executors``
    above the current count) the job takes all of them, within ``max_executors``, if that raises the
    cumulative parallelism by at least ``min_parallelism_increase``. Otherwise the DS2 plan, whose
    scale-ups pass the same ``can_scale_up`` check."""

    name = "min-increase"
    modes = (Mode.MICRO_BATCH,)

    def plan(self, request: PlanRequest) -> JobPlan:
        cluster = _require_cluster(request, self.name)
        policy = request.policy
        available = cluster.available_executors
        if available is not None and available > cluster.executors:
            offered = replace(cluster, executors=min(available, cluster.max_executors))
            # Reactive mode: every adjustable vertex takes the offered cores; executors = all offered.
            cores = offered.executors * offered.cores_per_executor
            base = plan_micro_batch(request.topology, request.metrics, cluster, policy,
                                    batch_duration_s=request.batch_duration_s, now_s=request.now_s)
            vertices = []
            for vp in base.vertices:
                vertex = request.topology.vertex(vp.vertex_id)
                proposed = vp.current
                if pinned_reason(request.topology, vertex, policy) is None:
                    lower, upper = parallelism_bounds(vertex, policy)
                    proposed = max(lower, min(upper, cores))
                    base_n = alignment_base(request.topology, vertex)
                    if base_n is not None and base_n[1] == "partitions":
                        mode, legacy = policy.alignment_mode
                        proposed = align_parallelism(vp.current, proposed, n=base_n[0], lower=lower, upper=upper,
                                                     mode=mode, legacy=legacy)[0]
                vertices.append(replace(vp, proposed=proposed, recommended=proposed))
            plan = replace(base, vertices=tuple(vertices), executors_proposed=offered.executors,
                           reasons=(Reason(PlanReason.REACTIVE_EXECUTORS, None, {
                               "added": offered.executors - cluster.executors, "cores": cores}),))
        else:
            plan = plan_micro_batch(request.topology, request.metrics, cluster, policy,
                                    batch_duration_s=request.batch_duration_s, state=request.state,
                                    now_s=request.now_s)
        # Cumulative parallelism of a micro-batch job: per stage, the tasks that can run at once.
        cores_new = (plan.executors_proposed or cluster.executors) * cluster.cores_per_executor
        current = sum(min(v.current, cluster.cores) for v in plan.vertices)
        new = sum(min(v.proposed, cores_new) for v in plan.vertices)
        growing = cores_new > cluster.cores or any(v.proposed > v.current for v in plan.vertices)
        if growing and not can_scale_up(current, new, policy.min_parallelism_increase):
            plan = _with_executors(plan, cluster.executors, (
                *plan.reasons, Reason(PlanReason.MIN_INCREASE_NOT_MET, None, {
                    "current": current, "new": new, "min_increase": policy.min_parallelism_increase})),
                Decision.NO_CHANGE)
        elif plan.changes and not plan.executable:
            plan = _with_executors(plan, cluster.executors, plan.reasons, Decision.BLOCKED)
        elif plan.changes:
            plan = replace(plan, decision=Decision.SCALE)
        return replace(plan, algorithm=self.name, next_state=plan.next_state or request.state)


ALGORITHMS: Mapping[str, Callable[[], ScalingPolicy]] = {
    DS2Policy.name: DS2Policy,
    BatchRatioPolicy.name: BatchRatioPolicy,
    MinIncreasePolicy.name: MinIncreasePolicy,
}
"""The registry: policy name -> class. The only algorithms a job or a scenario can select."""
