"""An evaluation's metric window: the stable snapshots of the current run, and those snapshots as
the scaling model's inputs (the live evaluation and ``manage.py backtest`` read the window alike)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta

from django.conf import settings

from scaling.forecast.bounds import cores_bound
from scaling.values.metrics import ClusterState, VertexMetrics
from scaling.values.topology import PinCause, Topology
from sparkclient.collector.model_inputs import model_inputs
from sparkclient.contract.binding import StageBinding
from sparkclient.contract.spec import KnobTarget
from webapp.jobs.bindings import stage_bindings
from webapp.jobs.models import Job, MetricSnapshot
from webapp.jobs.window import snapshot_sample


def window_inputs(*, job: Job, snapshots: Sequence[MetricSnapshot], bindings: Sequence[StageBinding] | None = None
                  ) -> tuple[Topology, dict[str, VertexMetrics], ClusterState, float]:
    """The planner's inputs for a window of stored snapshots, through the one Spark → model mapping
    (:func:`sparkclient.collector.model_inputs.model_inputs`, the one the snapshot CLI uses): each
    snapshot becomes a ``JobSample`` again (:func:`snapshot_sample`), the samples a
    ``scaling.MetricWindow`` weighted by their spans, so a snapshot without a completed batch weighs
    in with its time.

    Returns (topology, metrics per vertex id, cluster, mean batch duration in seconds).
    A stage is adjustable only when its binding to a knob is confirmed (``bindings``: the stages of
    the newest snapshot, by default :func:`webapp.jobs.bindings.stage_bindings` of it); the executors
    knob counts cores (executors of one core), up to the least of the policy's ``max_cores``, the
    executors knob's max and the cluster's capacity (:func:`executors_ceiling`). A job that declares no
    executors knob runs on the cores it has: ``ClusterState.executors_adjustable`` is False. A pinned
    stage carries its binding's pin reason as ``Vertex.pin_cause`` (the action of a pinned bottleneck).
    """
    if bindings is None:
        bindings = stage_bindings(job=job, snapshot=snapshots[-1])

    causes: dict[str, PinCause] = {}

    def adjustable(vertex) -> bool:
        binding = bindings[vertex.position] if vertex.position < len(bindings) else None
        if binding is not None and binding.pin is not None:
            causes[vertex.vertex_id] = PinCause(binding.pin.value)
        return bool(binding and binding.adjustable)

    ceiling = executors_ceiling(job=job)
    inputs = model_inputs([snapshot_sample(s) for s in snapshots], adjustable=adjustable, cores_per_executor=1,
                          min_executors=min(job.policy.min_cores, ceiling), max_executors=ceiling)
    cluster = inputs.cluster
    if not executors_adjustable(job=job):
        cluster = replace(cluster, executors_adjustable=False)
    topology = replace(inputs.topology, vertices=tuple(replace(v, pin_cause=causes.get(v.id))
                                                       for v in inputs.topology.vertices))
    return topology, inputs.metrics, cluster, inputs.mean_batch_s


def executors_adjustable(*, job: Job) -> bool:
    """Whether the pipeline can change its cores: it declares a knob that sets the executors
    (``sparkclient.contract.spec.KnobTarget.EXECUTORS``)."""
    return any(k.sets == KnobTarget.EXECUTORS for k in job.knob_specs())


def executors_ceiling(*, job: Job) -> int:
    """The most executors a plan may ask for: the least of the policy's ``max_cores``, the executors
    knob's ``max`` and the cluster's capacity (when known); never below 1 (``scaling.forecast.bounds.cores_bound``,
    the bound the pages show with its source)."""
    policy = job.policy
    executors = next((k for k in job.knob_specs() if k.sets == KnobTarget.EXECUTORS), None)
    return cores_bound(policy_min=policy.min_cores, policy_max=policy.max_cores,
                       knob_max=executors.max if executors is not None else None, capacity=job.capacity).cores


def stable_snapshots(*, job: Job, snapshots: list[MetricSnapshot]) -> list[MetricSnapshot]:
    """The snapshots of the current query run, without its first ``SCALER_STABILIZATION_S`` seconds.

    FLIP-271's ``job.autoscaler.stabilization.interval``: right after a (re)start, a cold JVM, Python
    workers and state store loading make the first batches slow, and a catch-up batch carries the
    backlog; metrics from then say nothing about the steady state. A new ``run_id`` marks a restart.
    The run started at most one collect interval before its first snapshot (whose window may reach
    back over the downtime to the previous run's last batch,
    :func:`sparkclient.collector.batchwindow.window_batches`).
    """
    if not snapshots:
        return []
    run_id = snapshots[-1].run_id
    first = job.snapshots.filter(run_id=run_id).order_by("collected_at").first()
    started = first.collected_at - timedelta(seconds=min(first.window_s, settings.SCALER_COLLECT_INTERVAL_S))
    stable_from = started + timedelta(seconds=settings.SCALER_STABILIZATION_S)
    return [s for s in snapshots
            if s.run_id == run_id and s.collected_at - timedelta(seconds=s.window_s) >= stable_from]
