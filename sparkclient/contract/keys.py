"""Every Redis key used by ``sparkclient``, in one place.

All keys share the prefix ``ss:``. ``topic`` names a partitioned log (e.g. ``"nexmark"``),
``job`` names a pipeline run by the runner (e.g. ``"demo"``).
"""

from __future__ import annotations

PREFIX = "ss:"


# --- partitioned log (redislog.py) --------------------------------------------------------

def log_stream(topic: str, partition: int) -> str:
    """The Redis Stream holding log partition ``partition`` (0-based); entry ids are ``0-{offset}``."""
    return f"{PREFIX}log:{topic}:{partition}"


def log_meta(topic: str) -> str:
    """Hash ``{partitions, retention}`` describing the log."""
    return f"{PREFIX}log:{topic}:meta"


def log_offsets(topic: str) -> str:
    """Hash ``{"p0": n, ...}``: the last offset assigned in each partition (= records ever appended)."""
    return f"{PREFIX}log:{topic}:offsets"


def log_lost(topic: str) -> str:
    """Integer: records a reader needed that retention had already trimmed away."""
    return f"{PREFIX}log:{topic}:lost"


def log_lost_upto(topic: str) -> str:
    """Hash ``{"p0": n, ...}``: the highest offset already counted as lost, per partition."""
    return f"{PREFIX}log:{topic}:lost_upto"


# --- event generator (generator.py) -------------------------------------------------------

def gen_rate(topic: str) -> str:
    """Float, events per second the generator writes to ``topic``; 0 pauses it."""
    return f"{PREFIX}gen:{topic}:rate"


def gen_counts(topic: str) -> str:
    """Hash ``{person, auction, bid, total}``: events written, updated atomically with the log."""
    return f"{PREFIX}gen:{topic}:counts"


# --- pipeline runner (runner.py, progress.py) ---------------------------------------------

def progress(job: str) -> str:
    """Stream of ``StreamingQueryProgress`` JSON documents (field ``json``)."""
    return f"{PREFIX}progress:{job}"


def runner(job: str) -> str:
    """Hash: the runner's status (state, pid, ui_url, run_id, config, knobs, ...)."""
    return f"{PREFIX}runner:{job}"


def runner_pending(job: str) -> str:
    """JSON of a rescale waiting for the first batch of a restarted driver."""
    return f"{PREFIX}runner:{job}:pending"


def config(job: str) -> str:
    """JSON object ``{knob: int}``: the job's knob values, the source of truth for the runner."""
    return f"{PREFIX}config:{job}"


def checkpoint_lease(job: str) -> str:
    """The lease on the job's checkpoint: held by the one driver whose query may run
    (:mod:`sparkclient.runner.lease`)."""
    return f"{PREFIX}runner:{job}:lease"


def handover(job: str) -> str:
    """Hash of a warm driver handover in progress: ``id``, ``knobs``, ``state``, ``error``, ``last_batch_end``."""
    return f"{PREFIX}runner:{job}:handover"


def standby_request(job: str) -> str:
    """JSON of the web app's standby request (:class:`sparkclient.contract.standby.StandbyRequest`), with its TTL."""
    return f"{PREFIX}runner:{job}:standby"


def standby_ready_times(job: str) -> str:
    """List of the job's standby drivers' measured starts, seconds from process start to ready, newest first
    (:func:`sparkclient.contract.standby.record_ready_s`)."""
    return f"{PREFIX}runner:{job}:standby:ready_s"


def handover_timings(job: str) -> str:
    """JSON of the last warm handover's timings (:func:`sparkclient.runner.handover.keep_timings`)."""
    return f"{PREFIX}runner:{job}:handover:timings"


def control(job: str) -> str:
    """Stream of control commands for the runner (field ``json``)."""
    return f"{PREFIX}control:{job}"


def control_cursor(job: str) -> str:
    """The id of the last control-stream entry the runner handled."""
    return f"{PREFIX}control:{job}:cursor"


def control_result(job: str, exec_id: str) -> str:
    """JSON outcome of the control command ``exec_id``."""
    return f"{PREFIX}control:{job}:result:{exec_id}"
