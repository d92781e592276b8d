"""The effective bound on a job's cores and where it comes from: the least of the policy's
``max_cores``, the executors knob's declared maximum and what the cluster can give (the host's cores
in local mode, a standalone master's free cores, or the runner's ``--max-executors`` quota), as values a page
names (docs/ARCHITECTURE.md, "The cores bound").
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class BoundSource(StrEnum):
    """Who sets a bound on the cores (ordered: the first one at the least value is named first)."""

    HOST = "host"        # local mode: the host's cores
    CLUSTER = "cluster"  # a standalone master's free cores (or a cluster of unknown kind)
    QUOTA = "quota"      # the runner's --max-executors (YARN, Kubernetes: no free cores to read)
    KNOB = "knob"        # the executors knob's declared maximum
    POLICY = "policy"    # the policy's max_cores


#: How each source is named on a page.
SOURCE_TEXT = {BoundSource.HOST: "the host's cores", BoundSource.CLUSTER: "the cluster's free cores",
               BoundSource.QUOTA: "the runner's executor quota (--max-executors)",
               BoundSource.KNOB: "the executors knob's maximum", BoundSource.POLICY: "the policy's maximum"}


def capacity_source(master: str) -> BoundSource:
    """Which source a runner's reported capacity is, from its Spark master URL
    (``sparkclient.runner.supervisor.cluster_capacity``): ``local``/``local[N]`` the host, ``spark://``
    the cluster, anything else the ``--max-executors`` quota; an unknown master (``""``) the cluster."""
    if master == "local" or master.startswith(("local[", "local-cluster[")):
        return BoundSource.HOST
    if not master or master.startswith("spark://"):
        return BoundSource.CLUSTER
    return BoundSource.QUOTA


@dataclass(frozen=True)
class CoresBound:
    """The effective maximum of a job's cores: ``cores``, set by ``sources`` (every source at that
    value, most binding kind first); ``policy_max`` the policy's ``max_cores`` for comparison."""

    cores: int
    sources: tuple[BoundSource, ...]
    policy_max: int

    @property
    def source(self) -> BoundSource:
        """The source named first (a host or cluster below the policy's maximum before the policy)."""
        return self.sources[0]

    @property
    def below_policy(self) -> bool:
        """Whether something other than the policy holds the cores below the policy's maximum."""
        return self.cores < self.policy_max

    @property
    def named(self) -> str:
        """Who sets the bound: ``"the host's cores; the policy allows 8"``."""
        allows = f"; the policy allows {self.policy_max}" if self.below_policy else ""
        return " and ".join(SOURCE_TEXT[s] for s in self.sources) + allows

    @property
    def text(self) -> str:
        """``"2 cores (the host's cores; the policy allows 8)"``."""
        unit = "core" if self.cores == 1 else "cores"
        return f"{self.cores} {unit} ({self.named})"

    def to_dict(self) -> dict:
        """JSON for charts and the API: ``{cores, source, sources, policy_max, text}``."""
        return {"cores": self.cores, "source": str(self.source), "sources": [str(s) for s in self.sources],
                "policy_max": self.policy_max, "text": self.text}


def cores_bound(*, policy_min: int, policy_max: int, knob_max: int | None = None, capacity: int = 0,
                capacity_from: BoundSource = BoundSource.CLUSTER) -> CoresBound:
    """The effective maximum of the cores: the least of ``max(policy_min, policy_max)``, ``knob_max``
    (the executors knob's maximum, executors of one core; None: no such knob) and ``capacity`` (what
    the cluster can give, 0: unknown, set by ``capacity_from``); never below 1. The sources are every
    one at that least value, the cluster's kind before the knob before the policy."""
    candidates = {BoundSource.POLICY: max(policy_min, policy_max)}
    if knob_max is not None:
        candidates[BoundSource.KNOB] = knob_max
    if capacity:
        candidates[capacity_from] = capacity
    least = min(candidates.values())
    sources = tuple(s for s in BoundSource if candidates.get(s) == least)
    return CoresBound(cores=max(1, least), sources=sources, policy_max=policy_max)
