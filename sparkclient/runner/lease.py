"""The checkpoint lease: exactly one driver runs a job's query at any moment.

A driver holds a Redis lock (redis-py :class:`redis.lock.Lock`, a random token compared on release and
extend) on ``ss:runner:{job}:lease`` before it starts the query, and renews it every
``ttl_s / 3`` seconds from a thread. It gives the lease up only after its query has stopped. A driver
that cannot renew (the lease expired while it was stalled, or someone deleted it) stops its query at
once: it no longer owns the checkpoint. A crashed driver's lease expires after ``ttl_s`` seconds, or
the supervisor releases it with the token the driver published.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import redis
from redis.exceptions import LockError

from sparkclient.contract import keys

log = logging.getLogger(__name__)

__all__ = ["CheckpointLease", "LeaseLost", "LeaseUnavailable", "release_token"]

#: Seconds a lease lives without renewal.
LEASE_TTL_S = 20.0


class LeaseUnavailable(RuntimeError):
    """Another driver holds the lease (the message says how long this one waited)."""


class LeaseLost(RuntimeError):
    """The lease could not be renewed: the holder must stop its query."""


class CheckpointLease:
    """The lease on ``job``'s checkpoint (see the module docstring).

    Args:
        client: Redis.
        job: the job name.
        on_lost: called (from the renewal thread) when a renewal fails; it must stop the query.
        ttl_s: lease lifetime without renewal, seconds.
    """

    def __init__(self, client: redis.Redis, job: str, *, on_lost: Callable[[], None] | None = None,
                 ttl_s: float = LEASE_TTL_S) -> None:
        self.job, self.ttl_s, self.on_lost = job, ttl_s, on_lost
        self.lock = client.lock(keys.checkpoint_lease(job), timeout=ttl_s, thread_local=False)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def token(self) -> str:
        """This holder's token (empty before :meth:`acquire`)."""
        token = self.lock.local.token
        return token.decode() if isinstance(token, bytes) else (token or "")

    def acquire(self, wait_s: float) -> None:
        """Take the lease, waiting up to ``wait_s`` seconds, and start renewing it.

        Raises:
            LeaseUnavailable: another driver still holds it after ``wait_s`` seconds.
        """
        if not self.lock.acquire(blocking=True, blocking_timeout=wait_s):
            raise LeaseUnavailable(f"another driver holds the checkpoint lease of job {self.job!r} "
                                   f"(waited {wait_s:.0f} s): only one driver may run its query")
        self._stop.clear()
        self._thread = threading.Thread(target=self._renew, name="lease", daemon=True)
        self._thread.start()

    def _renew(self) -> None:
        while not self._stop.wait(self.ttl_s / 3):
            try:
                self.lock.reacquire()
            except (LockError, redis.RedisError) as exc:
                if self._stop.is_set():
                    return
                log.error("lost the checkpoint lease of job %s (%s): stopping the query", self.job, exc)
                if self.on_lost is not None:
                    self.on_lost()
                return

    def release(self) -> None:
        """Stop renewing and give the lease up (a no-op when it is no longer ours)."""
        self._stop.set()
        try:
            self.lock.release()
        except LockError:
            pass


def release_token(client: redis.Redis, job: str, token: str) -> bool:
    """Release the lease of ``job`` if ``token`` still holds it (the supervisor, after a driver died)."""
    lock = client.lock(keys.checkpoint_lease(job), thread_local=False)
    lock.local.token = token.encode()
    try:
        lock.release()
    except LockError:
        return False
    return True
