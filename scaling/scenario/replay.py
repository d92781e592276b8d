"""Backtest: replay a job's recorded metric windows through a policy and report what it would have
proposed and when (``manage.py backtest``). Pure: the caller reads the stored snapshots.

Each step says what was actually running then (topology and cluster), so the replay follows the
real job, not the proposals; the policy's state (history, delayed scale-downs) carries from step to
step as in a running autoscaler.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from scaling.planner.door import decide
from scaling.policy.policy import Policy
from scaling.values.memory import MemoryInputs
from scaling.values.metrics import ClusterState, VertexMetrics
from scaling.values.mode import Mode
from scaling.values.plan import JobPlan
from scaling.values.readiness import SampleIssue
from scaling.values.reasons import Reason
from scaling.values.request import PlanRequest
from scaling.values.state import ScalerState
from scaling.values.topology import Topology
from scaling.words.reason_text import reason_text


@dataclass(frozen=True)
class ReplayStep:
    """One recorded evaluation point: the window's metrics and what was running at ``at_s``;
    ``not_ready``: why its samples were not ready (``scaling.values.readiness``), as the live loop reads it;
    ``memory``: the window's memory inputs, or None."""

    at_s: float
    topology: Topology
    metrics: Mapping[str, VertexMetrics]
    cluster: ClusterState | None = None
    batch_durations_s: tuple[float, ...] = ()
    not_ready: tuple[SampleIssue, ...] = ()
    memory: MemoryInputs | None = None


@dataclass(frozen=True)
class ReplayDecision:
    """What the policy decided at one step. ``changes``: vertex → (current, proposed) for the
    vertices it would change; ``proposed`` is True for a ``scale`` decision that changes something."""

    at_s: float
    decision: str
    reasons: tuple[Reason, ...]
    executors_current: int | None
    executors_proposed: int | None
    changes: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    plan: JobPlan | None = None

    @property
    def proposed(self) -> bool:
        return self.decision == "scale" and (bool(self.changes) or self.executors_current != self.executors_proposed)


def replay(steps: Iterable[ReplayStep], policy: Policy, *, state: ScalerState | None = None) -> list[ReplayDecision]:
    """Evaluate ``policy`` (its ``algorithm`` names the registered policy) at every step in order,
    through the one door (``scaling.planner.door.decide``).

    Raises:
        PolicyError: the algorithm is unknown.
    """
    state = state or ScalerState()
    decisions = []
    for step in steps:
        mode = Mode.MICRO_BATCH if step.cluster is not None else Mode.CONTINUOUS
        plan = decide(PlanRequest(topology=step.topology, metrics=step.metrics, policy=policy, mode=mode,
                                  cluster=step.cluster, state=state, now_s=step.at_s,
                                  batch_durations_s=step.batch_durations_s, not_ready=step.not_ready,
                                  memory=step.memory))
        if plan.next_state is not None:
            state = plan.next_state
        changes = {v.vertex_id: (v.current, v.proposed) for v in plan.vertices if v.proposed != v.current}
        decisions.append(ReplayDecision(step.at_s, plan.decision, plan.reasons, plan.executors_current,
                                        plan.executors_proposed, changes, plan))
    return decisions


def describe(decision: ReplayDecision) -> str:
    """One line for people: the change and the first reason."""
    parts = []
    if decision.executors_current != decision.executors_proposed:
        parts.append(f"executors {decision.executors_current} -> {decision.executors_proposed}")
    parts.extend(f"{vid} {old} -> {new}" for vid, (old, new) in decision.changes.items())
    reason = reason_text(decision.reasons[0]) if decision.reasons else ""
    return f"{decision.decision}: {', '.join(parts) or 'no change'}" + (f" ({reason})" if reason else "")
