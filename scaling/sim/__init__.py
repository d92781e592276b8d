"""A deterministic, seedable discrete-time simulator of a streaming job (continuous and micro-batch),
its workloads and topologies, and the baseline controllers the benchmark compares with ``ds2``."""

from scaling.sim.engine import Config, Observation, PolicyController, RunResult, capacity_per_s, simulate
from scaling.sim.model import CapacityCurve, Downtime, Noise, SimJob, SimSettings, SimVertex

__all__ = ["CapacityCurve", "Config", "Downtime", "Noise", "Observation", "PolicyController", "RunResult",
           "SimJob", "SimSettings", "SimVertex", "capacity_per_s", "simulate"]
