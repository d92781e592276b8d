"""The continuous engine of the simulator (:mod:`scaling.sim.engine`): every vertex has its own
slots; each step a vertex processes what its capacity, its input and the free space in its downstream
buffers allow, in reverse topological order, so a full buffer backpressures its upstream vertex and,
in the end, the source. A rescale takes effect at once (no batch in flight)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from scaling.sim.model import SimJob, SimVertex
from scaling.sim.sourcelog import Accumulator

if TYPE_CHECKING:
    from scaling.sim.engine import Config, Simulation

__all__ = ["ContinuousEngine", "capacity_continuous", "vertex_capacity_per_s"]


def capacity_continuous(job: SimJob, config: Config) -> float:
    """Arrival rate (records/s) the slowest vertex sustains: ``min_v capacity_v / unit rate_v``."""
    return min(vertex_capacity_per_s(job.by_id[vid], config.parallelism[vid]) / job.unit_rates[vid]
               for vid in job.order if job.unit_rates[vid] > 0)


def vertex_capacity_per_s(vertex: SimVertex, tasks: int) -> float:
    """Records/s a continuous vertex sustains, its busiest task (partition skew, key skew, a serial
    fraction: ``SimVertex.slowest_task_share``) setting the pace."""
    return vertex.curve.continuous_capacity_per_s(tasks) / tasks / vertex.slowest_task_share(tasks)


class ContinuousEngine:
    """Runs ``sim`` step by step; calls back ``sim._sample`` and ``sim._tick`` at each collect."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.extra_next_batch_s = 0.0  # no batches: a rescale's cost is its downtime

    def run(self) -> None:
        """Feed the trace, step the vertices and collect, to the end of the trace."""
        sim = self.sim
        job, s, dt = sim.job, sim.settings, sim.trace.step_s
        order = job.order
        reverse = tuple(reversed(order))
        queue = {vid: 0.0 for vid in order}
        steps_per_collect = max(1, round(s.collect_interval_s / dt))
        acc = {vid: Accumulator() for vid in order}
        for i, rate in enumerate(sim.trace.rates_per_s):
            t = i * dt
            for vid, log in sim.logs.items():
                share = job.by_id[vid].source_share
                if job.by_id[vid].generator:
                    acc[vid].arrived += rate * share * dt
                    log.append(t + dt / 2, rate * share * dt)
                else:
                    log.append(t + dt / 2, rate * share * dt)
                    acc[vid].arrived += rate * share * dt
                    log.expire(t, s.retention_s)
            if t >= sim.down_until_s:
                self._step(reverse, queue, acc, dt)
            for vid, log in sim.logs.items():
                if job.by_id[vid].generator:  # a throttled spout produces nothing it could not emit
                    acc[vid].unmet += log.total
                    log.take(log.total)
            if (i + 1) % steps_per_collect == 0:
                now = (i + 1) * dt
                sim._sample(now, acc, (), 0)
                acc = {vid: Accumulator() for vid in order}
                sim._tick(now)

    def _step(self, reverse: tuple[str, ...], queue: dict[str, float], acc: dict[str, Accumulator],
              dt: float) -> None:
        sim = self.sim
        job = sim.job
        p = sim.config.parallelism
        for vid in reverse:
            v = job.by_id[vid]
            tasks = p[vid]
            capacity = vertex_capacity_per_s(v, tasks) * dt
            available = sim.logs[vid].total if v.source else queue[vid]
            limit = math.inf
            if v.selectivity > 0:
                for w in job.outputs[vid]:
                    w_buffer = sim.settings.buffer_steps * job.by_id[w].curve.continuous_capacity_per_s(p[w]) * dt
                    limit = min(limit, max(0.0, w_buffer - queue[w]) / v.selectivity)
            n = min(available, capacity, limit)
            if n <= 0:
                idle = v.curve.fixed_core_s(tasks) * dt
                acc[vid].busy_core_s += idle
                acc[vid].busy_max_s += idle / tasks
                continue
            if v.source:
                sim.logs[vid].take(n)
            else:
                queue[vid] -= n
            for w in job.outputs[vid]:
                queue[w] += n * v.selectivity
            a = acc[vid]
            a.records_in += n
            a.records_out += n * v.selectivity
            busy = v.curve.busy_core_s(n, tasks, dt)
            a.busy_core_s += busy
            a.busy_max_s += busy * v.slowest_task_share(tasks)

    def in_flight(self, vid: str, now_s: float) -> float:
        """Records read but not yet processed: none (a continuous job has no batch in flight)."""
        return 0.0

    def in_flight_oldest(self, now_s: float) -> float:
        """Arrival time of the oldest record in flight: none (``inf``)."""
        return math.inf

    def restart_at(self, now_s: float) -> float:
        """A continuous job restarts at once."""
        return now_s
