"""The loop harness: the real web app services, driven by ``scaling.sim`` in
accelerated time, with no Spark, no Redis and no Celery worker.

Every collect interval of the simulated job:
1. **collect**: the simulator's raw sums of the interval (records in/out and busy task-seconds per
   stage, batches, backlog, arrivals) become a ``MetricSnapshot`` with its ``VertexSnapshot`` rows,
   exactly what ``snapshot_collect`` stores from Spark;
2. the reconcile beat (``workflow_reconcile``: expiry, verification);
3. **evaluate → propose** (``evaluation_run`` → ``proposal_create``), unless a proposal executes;
4. **decide**: the test's actions (a person approving, clearing a block, ...), then auto mode's
   approvals, already made by the services;
5. **execute**: each enqueued attempt runs ``attempt_send``; its command goes to
   :class:`SimRunner`, which applies the configuration to the simulation with the simulated
   downtime (a new run id: a driver restart) and answers like the runner;
6. **verify**: the next reconcile beats verify the execution against the new configuration.

The clock of every service (``django.utils.timezone.now``) is the simulated one. A fresh JVM's
warm-up is modelled on the metrics: for ``warmup_s`` after a restart, tasks report ``warmup_factor``
times their busy time. A host with fewer cores than configured (``host_cores``) runs the extra
tasks as threads on the same cores: the simulation gets the host's cores and the tasks report the
contended busy time, as Spark's ``local[N]`` does on a smaller machine.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.utils import timezone

from scaling.sim import topologies
from scaling.sim.engine import Config, Simulation
from scaling.sim.model import Downtime, SimJob, SimSettings
from scaling.sim.workloads import Trace
from sparkclient.contract import control
from sparkclient.contract.messages import RescaleCommand, RescalePath, RescaleResult, ResultStatus
from webapp.jobs.models import Job, MetricSnapshot, VertexSnapshot
from webapp.jobs.services import job_register
from webapp.loop.evaluate import evaluation_run
from webapp.loop.execute import attempt_send
from webapp.loop.reconcile import execution_poll, workflow_reconcile
from webapp.proposals.models import Execution, Proposal

EPOCH = datetime(2026, 11, 23, 8, 0, tzinfo=UTC)
TRIGGER_INTERVAL_S = 2
BATCH_OVERHEAD_S = 0.2
#: The simulated pipeline's executors knob (the pipeline contract: ``sets="executors"``).
EXECUTORS_KNOB = "executors"


def knob_name(vertex_id: str) -> str:
    """The knob that sets the partitions of a stage of the simulated pipeline."""
    return f"{vertex_id}_partitions"


def knobs_and_plan(sim_job: SimJob, *, max_cores: int = 8, cores_knob: bool = True) -> tuple[list[dict], list[dict]]:
    """The knob declarations and the plan stages the runner of ``sim_job`` would publish (the pipeline
    contract, ``sparkclient.contract.spec`` / ``sparkclient.contract.binding``): the executors knob (unless
    ``cores_knob`` is False), a source knob for the first source stage (a second source, a join's other
    scan, runs its own partitions), a repartition knob per other adjustable stage, none for a pinned
    (stateful) stage."""
    knobs = [{"name": EXECUTORS_KNOB, "default": 1, "min": 1, "max": max_cores, "sets": "executors",
              "description": "cores"}] if cores_knob else []
    knobs += [{"name": "trigger_interval_s", "default": TRIGGER_INTERVAL_S, "min": 1, "max": 600, "sets": "other",
              "description": "trigger interval"}]
    stages = []
    for v in sim_job.vertices:
        if v.source and not any(k["sets"] == "source_partitions" for k in knobs):
            knobs.append({"name": knob_name(v.id), "default": 1, "min": 1, "max": v.partitions or 64,
                          "sets": "source_partitions", "description": v.name})
            stages.append({"input": "source", "partitions": None, "stateful": False, "operators": [v.name]})
        elif v.source:  # a second source (a join's other scan) runs its own partitions: no knob sets it
            stages.append({"input": "source", "partitions": None, "stateful": False, "operators": [v.name]})
        elif v.adjustable:
            knobs.append({"name": knob_name(v.id), "default": 1, "min": 1, "max": 64, "sets": "repartition",
                          "description": v.name})
            stages.append({"input": "repartition", "partitions": None, "stateful": False, "operators": [v.name]})
        else:
            stages.append({"input": "shuffle", "partitions": None, "stateful": True, "operators": [v.name]})
    return knobs, stages


class _Passive:
    """The simulation's own controller does nothing: the web app decides."""

    name = "webapp"
    free_rescale = False

    def decide(self, observation):
        return None

    def restarted(self, downtime_s: float) -> None:
        return None


class _LoopSimulation(Simulation):
    def __init__(self, harness: LoopHarness, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.harness = harness

    def _sample(self, now_s, acc, batch_durations_s, batches, memory=None) -> None:
        self.harness.collect(now_s, acc, batch_durations_s)

    def _tick(self, now_s: float) -> None:
        self._record(now_s)
        self.result.core_seconds += self.config.resources() * self.settings.collect_interval_s
        self.harness.beat(now_s)


@dataclass
class SimRunner:
    """Stands in for the runner on the control channel (``sparkclient.contract.control``): applies a command's
    knob values to the simulation (a driver restart with the simulated downtime) and answers with a
    ``RescaleResult``."""

    harness: LoopHarness
    commands: list[dict] = field(default_factory=list)
    results: dict[str, RescaleResult] = field(default_factory=dict)

    def send_command(self, client, job: str, command: RescaleCommand) -> None:
        h = self.harness
        sim = h.sim
        knobs = dict(command.knobs)
        cores = int(knobs.get(EXECUTORS_KNOB, h.reported_cores))
        new = Config({v.id: int(knobs.get(knob_name(v.id), sim.config.parallelism[v.id])) for v in h.sim_job.vertices},
                     min(cores, h.host_cores) if h.host_cores else cores)
        sim._apply(h.now_s, new, sim._restart_at(h.now_s))
        downtime = sim.result.rescales[-1].downtime_s
        h.restarts += 1
        h.reported_cores = cores
        h.restarted_at_s = sim.down_until_s
        self.commands.append({"id": command.id, "knobs": knobs, "at_s": h.now_s})
        self.results[command.id] = RescaleResult(
            id=command.id, status=ResultStatus.SUCCEEDED, path=RescalePath.DRIVER_RESTART,
            downtime_s=downtime, pause_s=downtime, knobs=knobs,
            completed_at=(EPOCH + timedelta(seconds=sim.down_until_s)).timestamp())

    def get_result(self, client, job: str, command_id: str) -> RescaleResult | None:
        return self.results.get(command_id)


@dataclass
class LoopHarness:
    """One simulated job run through the web app. Build with :func:`make_harness`; ``run(until_s)``."""

    sim_job: SimJob
    job: Job
    trace: Trace
    settings: SimSettings
    host_cores: int | None = None
    warmup_s: float = 0.0
    warmup_factor: float = 1.0
    seed: int = 0
    actions: list[Callable[[LoopHarness], None]] = field(default_factory=list)
    queue: list[tuple[int, int]] = field(default_factory=list)
    now_s: float = 0.0
    restarts: int = 0
    restarted_at_s: float = -math.inf
    reported_cores: int = 1
    start_cores: int = 1
    timeline: list[dict] = field(default_factory=list)
    #: Called with each snapshot once stored (a test rewrites what the collector would have seen).
    snapshot_hooks: list[Callable[[MetricSnapshot], None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        start = Config(dict(self._parallelism(self.job.config)), self._sim_cores(self.cores(self.job.config)))
        self.reported_cores = self.cores(self.job.config)
        self.sim = _LoopSimulation(self, self.sim_job, self.trace, self.settings, _Passive(), start, seed=self.seed)
        self.runner = SimRunner(self)

    # -- plumbing ------------------------------------------------------------------------------------
    def _parallelism(self, config: dict) -> dict[str, int]:
        return {v.id: int(config.get(knob_name(v.id), v.parallelism)) for v in self.sim_job.vertices}

    def cores(self, config: dict) -> int:
        """The cores ``config`` runs on: its executors knob, else (none declared) the cores it started with."""
        return int(config.get(EXECUTORS_KNOB, self.start_cores))

    def _sim_cores(self, cores: int) -> int:
        return min(int(cores), self.host_cores) if self.host_cores else int(cores)

    @property
    def now(self) -> datetime:
        return EPOCH + timedelta(seconds=self.now_s)

    def enqueue(self, proposal_id: int, attempt: int, countdown_s: float = 0.0) -> None:
        self.queue.append((proposal_id, attempt))

    def record_answers(self) -> None:
        """The reconcile beat reads the runner's answer once the query runs again: the clock moves
        to the end of the downtime and the answers of the attempts in flight are recorded."""
        self.now_s = max(self.now_s, self.sim.down_until_s)
        for execution in Execution.objects.select_related("proposal__job").filter(
                status=Execution.Status.RUNNING, attempt_state=Execution.AttemptState.SENT):
            execution_poll(execution=execution, now=self.now)

    def run(self) -> LoopHarness:
        """Run the whole trace."""
        self.sim.run()
        return self

    # -- the loop ------------------------------------------------------------------------------------
    def collect(self, now_s: float, acc, durations: tuple[float, ...]) -> None:
        """One collect: the simulator's sums of the last interval as a snapshot (what the collector
        stores from Spark)."""
        self.now_s = now_s
        sim, s = self.sim, self.settings
        window_s = s.collect_interval_s
        sources = [v.id for v in self.sim_job.vertices if v.source]
        warm = now_s - window_s < self.restarted_at_s + self.warmup_s
        contention = max(1.0, self.reported_cores / (sim.config.cores or 1))
        backlog = sum(log.total for log in sim.logs.values()) + sum(sim._in_flight(v, now_s) for v in sim.logs)
        arrived = sum(acc[v].arrived for v in sources)
        read = sum(acc[v].records_in for v in sources)
        batch_s = sum(durations) / len(durations) if durations else 0.0
        snapshot = MetricSnapshot.objects.create(
            job=self.job, collected_at=self.now, run_id=f"run-{self.restarts}", config=self.job.config,
            window_s=window_s, batches=len(durations), backlog=round(backlog), arrival_rate_per_s=arrived / window_s,
            input_rate_per_s=read / window_s, processed_rate_per_s=read / window_s, batch_duration_s=batch_s,
            trigger_interval_s=s.trigger_interval_s, batch_overhead_s=s.batch_overhead_s if durations else 0.0,
            batch_ratio=batch_s / s.trigger_interval_s, executors=self.reported_cores, cores=self.reported_cores)
        factor = contention * (self.warmup_factor if warm else 1.0)
        VertexSnapshot.objects.bulk_create([
            VertexSnapshot(snapshot=snapshot, vertex_id=v.id, name=v.name, position=i, is_source=v.source,
                           tasks=sim.config.parallelism[v.id], busy_s=acc[v.id].busy_core_s * factor,
                           records_in=round(acc[v.id].records_in), records_out=round(acc[v.id].records_out),
                           upstream=list(self.sim_job.inputs[v.id]))
            for i, v in enumerate(self.sim_job.vertices)])
        for hook in self.snapshot_hooks:
            hook(snapshot)

    def beat(self, now_s: float) -> None:
        """reconcile → evaluate/propose → decide (actions) → execute, at ``now_s``."""
        self.now_s = now_s
        workflow_reconcile(now=self.now)
        self.job.refresh_from_db()
        busy = self.job.proposals.filter(status__in=[Proposal.Status.APPROVED, Proposal.Status.EXECUTING,
                                                     Proposal.Status.ROLLING_BACK]).exists()
        evaluation = None
        if not busy and now_s >= self.sim.down_until_s:
            evaluation = evaluation_run(job=self.job, now=self.now)
        for action in list(self.actions):
            action(self)
        while self.queue:
            proposal_id, attempt = self.queue.pop(0)
            attempt_send(proposal_id=proposal_id, attempt=attempt)
            self.record_answers()
        self.job.refresh_from_db()
        pending = list(self.job.proposals.filter(status=Proposal.Status.PENDING))
        self.timeline.append({
            "t_s": now_s, "load": self.trace.rate_at(now_s - 1e-9), "capacity": self.sim.result.capacity_per_s[-1],
            "cores": self.cores(self.job.config), "pending": [(p.pk, p.revision) for p in pending],
            "evaluation": evaluation and (evaluation.decision, evaluation.direction, evaluation.hold,
                                          evaluation.job_plan.load),
        })

    # -- reading the outcome -------------------------------------------------------------------------
    def proposals(self) -> list[Proposal]:
        return list(Proposal.objects.filter(job=self.job).select_related("execution").order_by("created_at", "id"))

    def executed(self) -> list[Proposal]:
        return [p for p in self.proposals() if p.kind == Proposal.Kind.SCALE and hasattr(p, "execution")
                and p.execution.status == "succeeded"]


def make_harness(monkeypatch, *, trace: Trace, start_cores: int = 1, policy: dict | None = None,
                 sim_job: SimJob | None = None, host_cores: int | None = None, downtime_s: float = 15.0,
                 warmup_s: float = 0.0, warmup_factor: float = 1.0, seed: int = 0, name: str = "loop",
                 cores_knob: bool = True) -> LoopHarness:
    """A harness on the demo-like topology (``scaling.sim.topologies.demo``) by default.

    ``policy``: ``JobPolicy`` fields; the metric window is three collect intervals unless given.
    ``cores_knob`` False: the pipeline declares no executors knob and runs on ``start_cores``."""
    sim_job = sim_job or topologies.demo()
    settings = SimSettings(mode="micro-batch", step_s=trace.step_s, collect_interval_s=15.0, policy_interval_s=15.0,
                           metric_window_s=45.0, stabilization_s=0.0, trigger_interval_s=TRIGGER_INTERVAL_S,
                           batch_overhead_s=BATCH_OVERHEAD_S, cores_per_executor=1, min_executors=1, max_executors=64,
                           executors=start_cores, downtime=Downtime(downtime_s))
    knobs, stages = knobs_and_plan(sim_job, cores_knob=cores_knob)
    config = {**({EXECUTORS_KNOB: start_cores} if cores_knob else {}), "trigger_interval_s": TRIGGER_INTERVAL_S,
              **{k["name"]: start_cores for k in knobs if k["sets"] in ("source_partitions", "repartition")}}
    job = job_register(name=name, topic="sim", query_name=f"{name}-query", config=config, knobs=knobs,
                       policy={"metric_window_s": 45.0, **(policy or {})})
    Job.objects.filter(pk=job.pk).update(plan_stages=stages)
    job = Job.objects.select_related("policy").get(pk=job.pk)
    harness = LoopHarness(sim_job=sim_job, job=job, trace=trace, settings=settings, host_cores=host_cores,
                          warmup_s=warmup_s, warmup_factor=warmup_factor, seed=seed, start_cores=start_cores)
    monkeypatch.setattr(timezone, "now", lambda: harness.now)
    monkeypatch.setattr("webapp.proposals.dispatch.enqueue_attempt", harness.enqueue)
    monkeypatch.setattr(control, "send_command", harness.runner.send_command)
    monkeypatch.setattr(control, "get_result", harness.runner.get_result)
    random.seed(seed)
    return harness


def steps(*levels: tuple[float, float], step_s: float = 5.0) -> Trace:
    """A trace of constant levels: ``(until_s, records/s)`` pairs, in order."""
    rates: list[float] = []
    for until_s, rate in levels:
        rates.extend([float(rate)] * (int(round(until_s / step_s)) - len(rates)))
    return Trace("steps", step_s, tuple(rates), tuple(until for until, _ in levels[:-1]))
