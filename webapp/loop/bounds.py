"""The effective maximum of a job's cores, with its source, for every page and chart that shows a
bound (:mod:`scaling.forecast.bounds`): the policy's ``max_cores``, the executors knob's maximum and the
capacity the runner reported (``Job.capacity``), whose kind (host, cluster, quota) follows from the
runner's Spark master."""

from __future__ import annotations

import redis

from scaling.forecast.bounds import BoundSource, CoresBound, capacity_source, cores_bound
from sparkclient.contract.messages import ProtocolError
from sparkclient.contract.spec import KnobTarget
from webapp.jobs.models import Job
from webapp.loop.collect import runner_status
from webapp.loop.throttle import LOCAL_PREFIX

__all__ = ["effective_max_cores"]


def runner_master(job: Job) -> str:
    """The Spark master the job's runner reported (``""`` when unknown or Redis does not answer)."""
    try:
        return runner_status(job=job).master
    except (ProtocolError, redis.RedisError):
        return ""


def effective_max_cores(job: Job, *, master: str | None = None) -> CoresBound:
    """The most cores a plan of ``job`` may ask for and who sets it (the same least as
    ``webapp.loop.window.executors_ceiling``). ``master``: the runner's Spark master URL; read from
    the runner's status when None (one Redis read)."""
    policy = job.policy
    knob = next((k for k in job.knob_specs() if k.sets == KnobTarget.EXECUTORS), None)
    if master is None:  # the cluster the collector stored spares a Redis read per page
        master = "local" if job.cluster.startswith(LOCAL_PREFIX) else job.cluster or runner_master(job)
    capacity_from = capacity_source(master) if job.capacity else BoundSource.CLUSTER
    return cores_bound(policy_min=policy.min_cores, policy_max=policy.max_cores,
                       knob_max=knob.max if knob is not None else None, capacity=job.capacity,
                       capacity_from=capacity_from)
