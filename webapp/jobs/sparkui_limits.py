"""What a job's registered Spark UI rule may not name: the deny-list of
:mod:`webapp.jobs.sparkui`'s registration checks.

The collector fetches from whatever a registration allows, so a registration could point it at a
service the web app's host can reach and the operator cannot (server-side request forgery). Refused:

- **the hosts and addresses the web app connects to none of** (:mod:`webapp.jobs.addresses`):
  link-local and metadata addresses and names, unspecified addresses, an IPv6 form that carries one
  of them, and an address written so that a reader cannot see it (``2852039166``, ``::ffff:a.b.c.d``);
- **networks wider than /8 (IPv4) or /48 (IPv6)**, and any network that contains one of the
  addresses above: ``10.0.0.0/8`` is the widest private range (RFC 1918) and ``/48`` a site's
  unique-local prefix (RFC 4193), so a wider one takes in the internet (``0.0.0.0/0``, ``::/0``);
- **port ranges of more than** :data:`MAX_PORTS` ports: a driver's UI is ``spark.ui.port`` and the
  16 ports Spark tries after it (``spark.port.maxRetries``), 17 in all.

A host name is checked again when the collector connects: :mod:`webapp.jobs.connect`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from webapp.jobs.addresses import Denial, Network, host_denial, name_denial, written_denial

#: The most ports a registered range may span.
MAX_PORTS = 32
#: The shortest network prefix accepted, by IP version (see the module docstring).
MIN_PREFIX = {4: 8, 6: 48}
#: What to give instead of a refused host (after the address check's reason).
ADVICE = "Give the driver's own host name, address or network"


class Refused(StrEnum):
    """Why a registration's host, network or port range is refused."""

    ADDRESS = "address"  # the address check's Denial says why
    NETWORK_TOO_WIDE = "network_too_wide"
    PORT_RANGE_TOO_WIDE = "port_range_too_wide"


_TEXT = {
    Refused.NETWORK_TOO_WIDE: "{value} is wider than /{limit}: a network wider than the widest private range "
                              "(10.0.0.0/8 for IPv4, a site's /48 for IPv6) takes in the internet. Give the "
                              "network the drivers run in, e.g. 10.42.0.0/16",
    Refused.PORT_RANGE_TOO_WIDE: "{value} spans {count} ports, more than {limit}. Give the range the driver's UI "
                                 "binds in, e.g. 4040-4056 (spark.ui.port and the 16 ports Spark tries after it)",
}


@dataclass(frozen=True)
class RuleRefusal:
    """A refused host, network or port range: why, and the numbers its sentence names (``denial``
    for :attr:`Refused.ADDRESS`)."""

    reason: Refused
    limit: int = 0
    count: int = 0
    denial: Denial | None = None

    def text(self, field: str, value: str) -> str:
        """The sentence for ``value`` in registration field ``field``: the field, why, and what to give."""
        if self.denial is not None:
            return f"{field}: {self.denial.text(ADVICE)}"
        return f"{field}: " + _TEXT[self.reason].format(value=value, limit=self.limit, count=self.count)


def _refusal(denial: Denial | None) -> RuleRefusal | None:
    return RuleRefusal(Refused.ADDRESS, denial=denial) if denial is not None else None


def network_refusal(network: Network, value: str | None = None) -> RuleRefusal | None:
    """Why ``network`` (written ``value``; an address is a /32 or /128) may not be registered; None
    when it may."""
    if network.prefixlen < MIN_PREFIX[network.version]:
        return RuleRefusal(Refused.NETWORK_TOO_WIDE, limit=MIN_PREFIX[network.version])
    return _refusal(written_denial(network, value or str(network)))


def host_refusal(host: str, *, wildcard: bool = False) -> RuleRefusal | None:
    """Why host ``host`` as written (an IP address without brackets, or a lower-case name; with
    ``wildcard`` any name below it) may not be registered; None when it may."""
    return _refusal(name_denial(host, wildcard=True) if wildcard else host_denial(host))


def port_range_refusal(first: int, last: int) -> RuleRefusal | None:
    """Why ports ``first``..``last`` may not be registered; None when they may."""
    if last - first + 1 > MAX_PORTS:
        return RuleRefusal(Refused.PORT_RANGE_TOO_WIDE, limit=MAX_PORTS, count=last - first + 1)
    return None
