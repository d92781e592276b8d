"""Offline repartition of a streaming query's state (Spark 4.2+), made safe to run.

Spark 4.2 added ``StreamingCheckpointManager.repartition(checkpoint, n)`` (PySpark:
``spark._streamingCheckpointManager``): with the query stopped, it rewrites every stateful
operator's state into ``n`` partitions and records that as a new micro-batch ``N+1`` of the
checkpoint (offsets and commit, no input read). The next start of the query continues from there
with ``spark.sql.shuffle.partitions = n``.

It works only with the RocksDB state store provider. With the HDFS-backed provider Spark fails
*after* it has written the offsets entry of batch ``N+1``, and that unfinished entry blocks every
later start of the query. :func:`repartition_state` therefore:

1. reads the checkpoint itself (no Spark call) and refuses, before anything is written, when the
   provider recorded in the newest offsets entry is not RocksDB (:class:`UnsupportedStateProvider`),
   when the newest batch has no commit (the query did not stop cleanly), or when the state already
   has ``n`` partitions;
2. copies the checkpoint aside, runs Spark's repartition, and checks that the new newest batch is
   committed with ``n`` shuffle partitions;
3. on any failure puts the copy back, so the checkpoint is exactly as before and still starts.

The caller must have stopped the query (the runner waits for the batch in flight first).
Only checkpoints on the local file system (a path or a ``file:`` URI) are handled.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from sparkclient.contract.binding import HDFS_PROVIDER, REPARTITIONABLE_STATE_STORES, ROCKSDB_PROVIDER

log = logging.getLogger(__name__)

__all__ = [
    "CheckpointInfo",
    "RepartitionResult",
    "StateRepartitionError",
    "UnsupportedStateProvider",
    "checkpoint_info",
    "error_line",
    "repartition_state",
]

_PROVIDER_KEY = "spark.sql.streaming.stateStore.providerClass"
_PARTITIONS_KEY = "spark.sql.shuffle.partitions"


class StateRepartitionError(RuntimeError):
    """The state could not be repartitioned; the checkpoint is unchanged (or was restored)."""


class UnsupportedStateProvider(StateRepartitionError):
    """The checkpoint's state store provider is not RocksDB; nothing was written."""


@dataclass(frozen=True)
class CheckpointInfo:
    """What the newest offsets entry of a checkpoint says.

    ``last_batch``: newest batch id in ``offsets/`` (None: the query never planned a batch);
    ``committed``: ``commits/<last_batch>`` exists; ``provider``: the state store provider class
    the query runs with (Spark's default HDFS provider when the entry names none);
    ``shuffle_partitions``: the state partitions; ``has_state``: a ``state/`` folder exists.
    """

    path: Path
    last_batch: int | None
    committed: bool
    provider: str
    shuffle_partitions: int | None
    has_state: bool


@dataclass(frozen=True)
class RepartitionResult:
    """A finished repartition: ``from_partitions`` -> ``to_partitions``, recorded as batch
    ``batch_id``; ``duration_s`` is the time Spark took (backup and checks included)."""

    checkpoint: str
    from_partitions: int
    to_partitions: int
    batch_id: int
    duration_s: float


def error_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message (a Spark error's first line names it; its JVM stack
    follows), or its class name when the message is empty."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _local_path(checkpoint: str | Path) -> Path:
    text = str(checkpoint)
    parsed = urlparse(text)
    if parsed.scheme in ("", "file"):
        return Path(parsed.path if parsed.scheme == "file" else text).resolve()
    raise StateRepartitionError(
        f"checkpoint {text!r} is not on the local file system; only local checkpoints (a path or a "
        "file: URI) can be checked and backed up before an offline state repartition")


def _batch_ids(folder: Path) -> list[int]:
    if not folder.is_dir():
        return []
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit())


def _offsets_metadata(entry: Path) -> dict[str, Any]:
    """The metadata line (2nd line) of an offsets entry: ``{"batchWatermarkMs", "conf": {...}}``."""
    lines = entry.read_bytes().decode("utf-8", errors="replace").splitlines()
    if len(lines) < 2 or not lines[0].startswith("v"):
        raise StateRepartitionError(f"{entry} is not a Spark offsets entry (expected 'v1' and a metadata line)")
    try:
        metadata = json.loads(lines[1])
    except ValueError as exc:
        raise StateRepartitionError(f"{entry}: the metadata line is not JSON ({exc})") from None
    return metadata if isinstance(metadata, dict) else {}


def checkpoint_info(checkpoint: str | Path) -> CheckpointInfo:
    """Read the newest offsets entry of a local checkpoint (see :class:`CheckpointInfo`).

    Raises :class:`StateRepartitionError` for a checkpoint that is not local or not readable.
    """
    path = _local_path(checkpoint)
    offsets = _batch_ids(path / "offsets")
    last = offsets[-1] if offsets else None
    provider = HDFS_PROVIDER  # Spark's default when the entry does not name one
    partitions: int | None = None
    if last is not None:
        conf = _offsets_metadata(path / "offsets" / str(last)).get("conf") or {}
        provider = str(conf.get(_PROVIDER_KEY) or HDFS_PROVIDER)
        if conf.get(_PARTITIONS_KEY) is not None:
            partitions = int(conf[_PARTITIONS_KEY])
    committed = last is not None and (path / "commits" / str(last)).is_file()
    return CheckpointInfo(path=path, last_batch=last, committed=committed, provider=provider,
                          shuffle_partitions=partitions, has_state=(path / "state").is_dir())


def check_repartition(checkpoint: str | Path, num_partitions: int) -> CheckpointInfo:
    """Everything :func:`repartition_state` checks before it writes; returns the checkpoint info.

    Raises:
        ValueError: ``num_partitions`` < 1.
        UnsupportedStateProvider: the provider is not RocksDB.
        StateRepartitionError: no batch, no state, an uncommitted newest batch, or the state already
            has ``num_partitions`` partitions.
    """
    if not isinstance(num_partitions, int) or isinstance(num_partitions, bool) or num_partitions < 1:
        raise ValueError(f"num_partitions must be an integer >= 1, got {num_partitions!r}")
    info = checkpoint_info(checkpoint)
    if info.last_batch is None:
        raise StateRepartitionError(
            f"checkpoint {info.path} has no batch yet: start the query with "
            f"spark.sql.shuffle.partitions={num_partitions} instead of repartitioning")
    if info.provider not in REPARTITIONABLE_STATE_STORES:
        raise UnsupportedStateProvider(
            f"checkpoint {info.path} uses the state store provider {info.provider}; offline state "
            f"repartition needs {ROCKSDB_PROVIDER}. Nothing was written. (With the HDFS-backed provider "
            "Spark fails after writing an offsets entry that blocks every later start of the query.) "
            "Keep the state partitions, or start a new checkpoint with the RocksDB provider.")
    if not info.has_state:
        raise StateRepartitionError(f"checkpoint {info.path} holds no state: nothing to repartition")
    if not info.committed:
        raise StateRepartitionError(
            f"batch {info.last_batch} of checkpoint {info.path} has no commit (the query did not stop "
            "after a finished batch); start the query once so it completes that batch, stop it, and retry")
    if info.shuffle_partitions == num_partitions:
        raise StateRepartitionError(
            f"the state of checkpoint {info.path} already has {num_partitions} partitions")
    return info


def repartition_state(spark: Any, checkpoint: str | Path, num_partitions: int, *,
                      backup_dir: str | Path | None = None) -> RepartitionResult:
    """Repartition the state of a stopped query's checkpoint to ``num_partitions`` (see module doc).

    ``spark``: an active ``SparkSession`` (classic, 4.2+). ``backup_dir``: where the safety copy
    goes (default: beside the checkpoint); it is removed after success.

    Raises :class:`UnsupportedStateProvider` or :class:`StateRepartitionError` (see
    :func:`check_repartition`); when Spark's repartition itself fails, the checkpoint is restored
    from the copy and :class:`StateRepartitionError` carries Spark's message.
    """
    info = check_repartition(checkpoint, num_partitions)
    manager = getattr(spark, "_streamingCheckpointManager", None)
    if manager is None:
        raise StateRepartitionError(
            "this PySpark has no StreamingCheckpointManager (offline state repartition needs Spark 4.2+ "
            "classic, not Spark Connect)")
    started = time.monotonic()
    path = info.path
    parent = Path(backup_dir) if backup_dir is not None else path.parent
    parent.mkdir(parents=True, exist_ok=True)
    backup = parent / f".{path.name}.before-repartition-{int(time.time() * 1000)}"
    shutil.copytree(path, backup, symlinks=True)
    try:
        manager.repartition(str(path), num_partitions, True)
        after = checkpoint_info(path)
        if not (after.last_batch is not None and after.last_batch > info.last_batch and after.committed
                and after.shuffle_partitions == num_partitions):
            raise StateRepartitionError(
                f"Spark returned but the checkpoint does not show a committed batch with {num_partitions} "
                f"partitions (newest batch {after.last_batch}, committed={after.committed}, "
                f"partitions={after.shuffle_partitions})")
    except Exception as exc:
        log.error("state repartition of %s failed (%s); restoring the checkpoint", path, exc)
        failed = parent / f".{path.name}.failed-repartition-{int(time.time() * 1000)}"
        path.rename(failed)
        backup.rename(path)
        shutil.rmtree(failed, ignore_errors=True)
        if isinstance(exc, StateRepartitionError):
            raise
        message = error_line(exc)
        raise StateRepartitionError(
            f"Spark could not repartition the state of {path} to {num_partitions}: {message}; "
            "the checkpoint was restored unchanged") from exc
    shutil.rmtree(backup, ignore_errors=True)
    result = RepartitionResult(checkpoint=str(path), from_partitions=int(info.shuffle_partitions or 0),
                               to_partitions=num_partitions, batch_id=int(after.last_batch),
                               duration_s=time.monotonic() - started)
    log.info("state of %s repartitioned %d -> %d as batch %d in %.2f s", path, result.from_partitions,
             result.to_partitions, result.batch_id, result.duration_s)
    return result
