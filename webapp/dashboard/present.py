"""What the dashboard shows in place of raw dicts: knob tables, "decided by",
the Spark UI link and the demo generator's rate. Rendered from structured data; nothing parses text."""

from __future__ import annotations

from dataclasses import dataclass

import redis

from scaling.words.reason_text import MEMORY_KIND_TEXT
from sparkclient.contract.binding import BindingStatus, PinReason
from sparkclient.contract.load import get_rate
from sparkclient.contract.messages import ProtocolError
from sparkclient.contract.spec import KnobTarget
from webapp.jobs.bindings import plan_bindings
from webapp.jobs.memory import KIND_TARGETS
from webapp.jobs.models import Job
from webapp.jobs.redis import get_redis
from webapp.jobs.sparkui import Refusal, ui_target
from webapp.loop.collect import runner_status


@dataclass(frozen=True)
class KnobRow:
    """One row of a knob table: ``knob`` is ``current`` now and ``proposed`` after (None: no proposal);
    ``stages`` are the short names of the stages it sets (``"all stages"`` for the executors knob);
    ``pinned``: why nothing can change it (:func:`pin_text`), or ``""``; ``unit``: of its values
    (``"MB"`` for the memory knob, :func:`knob_units`), or ``""``."""

    knob: str
    stages: str
    current: object
    proposed: object | None
    pinned: str = ""
    unit: str = ""

    @property
    def changed(self) -> bool:
        return self.proposed is not None and self.proposed != self.current


def knob_stages(*, job: Job, names: dict[int, str]) -> dict[str, str]:
    """``{knob: stage names}``: which stages each knob of ``job`` sets, from the runner's plan stages
    (``sparkclient.contract.binding``) and ``names`` (``{position: stage name}``)."""
    out: dict[str, list[str]] = {}
    for spec in job.knob_specs():
        if spec.sets == "executors":
            out[spec.name] = ["all stages (executors)"]
        elif spec.sets.is_memory:
            out[spec.name] = [memory_target_text(spec.sets)]
    if names:
        for binding in plan_bindings(job=job):
            if binding.knob:
                out.setdefault(binding.knob, []).append(names.get(binding.position, f"stage {binding.position}"))
    return {knob: ", ".join(stages) for knob, stages in out.items()}


def pin_text(binding) -> str:
    """Why a pinned stage's knob changes nothing (rendered from :class:`sparkclient.contract.binding.StageBinding`);
    ``""`` for a stage that is not pinned by its checkpoint."""
    if binding.status is not BindingStatus.PINNED or binding.pin is None or not binding.pin.by_checkpoint:
        return ""
    if binding.pin is PinReason.SINK_LOG:
        return (f"pinned by the checkpoint at {binding.knob_value}: the query writes to a {binding.sink}, whose own "
                "batch log would miss the batch an offline repartition records (the sink would then fail at "
                "its next compaction); nothing is proposed for it. Choose the state partitions when the query "
                "starts on a new checkpoint")
    provider = (binding.state_store or "").rsplit(".", 1)[-1]
    return (f"pinned by the checkpoint at {binding.knob_value}: its state is in {provider}, which cannot be "
            "repartitioned offline (RocksDB only); nothing is proposed for it. Start the query on a new "
            "checkpoint with spark.sql.streaming.stateStore.providerClass set to RocksDB to let it scale")


def knob_pins(*, job: Job) -> dict[str, str]:
    """``{knob: why it is pinned}`` for each knob the checkpoint pins (:func:`pin_text`)."""
    return {b.knob: text for b in plan_bindings(job=job) if b.knob and (text := pin_text(b))}


def knob_units(*, job: Job) -> dict[str, str]:
    """``{knob: unit}`` of the knobs of ``job`` whose values have one: the memory knob's MB."""
    return {spec.name: "MB" for spec in job.knob_specs() if spec.sets.is_memory}


def knob_rows(*, current: dict, proposed: dict | None = None, stages: dict[str, str] | None = None,
              pins: dict[str, str] | None = None, units: dict[str, str] | None = None) -> list[KnobRow]:
    """The rows of a knob table: every knob of ``current`` (and any new one of ``proposed``), in order."""
    stages, pins, units = stages or {}, pins or {}, units or {}
    keys = list(current) + [k for k in (proposed or {}) if k not in current]
    return [KnobRow(knob=k, stages=stages.get(k, ""), current=current.get(k, "–"),
                    proposed=(proposed or {}).get(k) if proposed is not None else None, pinned=pins.get(k, ""),
                    unit=units.get(k, "")) for k in keys]


def memory_target_text(target: KnobTarget) -> str:
    """What a memory knob sets, as the knob table's stage column says it: its kind's words
    (``scaling.words.reason_text.MEMORY_KIND_TEXT``) and when a change takes a new JVM."""
    kind = next(k for k, t in KIND_TARGETS.items() if t is target)
    local = "" if target.needs_new_jvm(local=True) else "; nothing in local mode"
    return f"{MEMORY_KIND_TEXT[str(kind)][0]} (a new JVM for a change{local})"


#: Statuses of a proposal nobody decided on (it never ran).
UNDECIDED = ("pending", "superseded", "expired", "withdrawn")


def decided_by(proposal) -> str:
    """Who decided ``proposal``: a person's name, ``"auto-approved"`` (the policy approved it), or
    ``"rollback of #N"``; ``"–"`` while undecided."""
    if proposal.kind == "rollback":
        return f"rollback of #{proposal.rollback_of_id}" if proposal.rollback_of_id else "rollback"
    if proposal.decided_by_id:
        return proposal.decided_by.get_username()
    if proposal.status in UNDECIDED:
        return "–"
    return "auto-approved"


def spark_ui_link(job: Job) -> str | None:
    """The Spark UI of ``job``: its fixed ``spark_ui_url``, else the URL its runner reported when it fits
    the registration (``webapp.jobs.sparkui.ui_target``); None when unknown or refused."""
    if job.spark_ui_url:
        return job.spark_ui_url.rstrip("/")
    try:
        status = runner_status(job=job)
    except (ProtocolError, redis.RedisError):
        return None
    if not status.ui_url:
        return None
    target = ui_target(job.ui_rule(), ui_url=status.ui_url, app_id=status.app_id)
    return None if isinstance(target, Refusal) else target.base_url


def generator_rate(job: Job) -> float | None:
    """The demo event generator's rate for the job's topic, events/s; None when the job has no
    generator (no topic, or no rate was ever set for it, or Redis does not answer)."""
    if not job.topic:
        return None
    try:
        return get_rate(get_redis(), job.topic)
    except redis.RedisError:
        return None
