"""What a job's registered Spark UI rule may not name: the deny-list of
:mod:`webapp.jobs.sparkui`'s registration checks.

The collector fetches from whatever a registration allows, so a registration could point it at a
service the web app's host can reach and the operator cannot (server-side request forgery). Refused:

- **link-local and metadata addresses**: ``169.254.0.0/16`` and ``fe80::/10`` (cloud metadata
  services answer at ``169.254.169.254``), ``fd00:ec2::254`` (AWS's IPv6 metadata),
  ``100.100.100.200`` (Alibaba Cloud's) and the name ``metadata.google.internal``;
- **unspecified addresses** ``0.0.0.0`` and ``::`` (no host; connecting to them reaches this machine);
- **networks wider than /8 (IPv4) or /48 (IPv6)**, and any network that contains one of the
  addresses above: ``10.0.0.0/8`` is the widest private range (RFC 1918) and ``/48`` a site's
  unique-local prefix (RFC 4193), so a wider one takes in the internet (``0.0.0.0/0``, ``::/0``);
- **port ranges of more than** :data:`MAX_PORTS` ports: a driver's UI is ``spark.ui.port`` and the
  16 ports Spark tries after it (``spark.port.maxRetries``), 17 in all.

A host name that resolves to a refused address is not caught here (nothing is resolved at
registration).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from enum import StrEnum

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

#: The most ports a registered range may span.
MAX_PORTS = 32
#: The shortest network prefix accepted, by IP version (see the module docstring).
MIN_PREFIX = {4: 8, 6: 48}
_LINK_LOCAL = tuple(ipaddress.ip_network(n) for n in ("169.254.0.0/16", "fe80::/10"))
_METADATA = tuple(ipaddress.ip_network(n) for n in ("fd00:ec2::254/128", "100.100.100.200/32"))
_UNSPECIFIED = tuple(ipaddress.ip_network(n) for n in ("0.0.0.0/32", "::/128"))
_IPV4_MAPPED = ipaddress.ip_network("::ffff:0:0/96")
#: Host names of metadata services.
METADATA_NAMES = ("metadata.google.internal",)


class Refused(StrEnum):
    """Why a registration's host, network or port range is refused."""

    LINK_LOCAL = "link_local"
    METADATA = "metadata"
    UNSPECIFIED = "unspecified"
    IPV4_MAPPED = "ipv4_mapped"
    NETWORK_TOO_WIDE = "network_too_wide"
    PORT_RANGE_TOO_WIDE = "port_range_too_wide"


_TEXT = {
    Refused.LINK_LOCAL: "{value} is or contains link-local addresses (169.254.0.0/16, fe80::/10), where cloud "
                        "metadata services answer: the collector may not be pointed there. Give the driver's "
                        "own host name, address or network",
    Refused.METADATA: "{value} is or contains a cloud metadata service's address or name: the collector may not "
                      "be pointed there. Give the driver's own host name, address or network",
    Refused.UNSPECIFIED: "{value} is or contains an unspecified address (0.0.0.0 or ::), which names no host. "
                         "Give the driver's own host name, address or network",
    Refused.IPV4_MAPPED: "{value} is an IPv4 address written as IPv6 (::ffff:...): write the IPv4 address",
    Refused.NETWORK_TOO_WIDE: "{value} is wider than /{limit}: a network wider than the widest private range "
                              "(10.0.0.0/8 for IPv4, a site's /48 for IPv6) takes in the internet. Give the "
                              "network the drivers run in, e.g. 10.42.0.0/16",
    Refused.PORT_RANGE_TOO_WIDE: "{value} spans {count} ports, more than {limit}. Give the range the driver's UI "
                                 "binds in, e.g. 4040-4056 (spark.ui.port and the 16 ports Spark tries after it)",
}


@dataclass(frozen=True)
class RuleRefusal:
    """A refused host, network or port range: why, and the numbers its sentence names."""

    reason: Refused
    limit: int = 0
    count: int = 0

    def text(self, field: str, value: str) -> str:
        """The sentence for ``value`` in registration field ``field``: the field, why, and what to give."""
        return f"{field}: " + _TEXT[self.reason].format(value=value, limit=self.limit, count=self.count)


def _overlaps(network: IPNetwork, refused: tuple[IPNetwork, ...]) -> bool:
    return any(network.version == r.version and network.overlaps(r) for r in refused)


def network_refusal(network: IPNetwork) -> RuleRefusal | None:
    """Why ``network`` (an address is a /32 or /128) may not be registered; None when it may."""
    if network.version == 6 and network.subnet_of(_IPV4_MAPPED):
        return RuleRefusal(Refused.IPV4_MAPPED)
    if network.prefixlen < MIN_PREFIX[network.version]:
        return RuleRefusal(Refused.NETWORK_TOO_WIDE, limit=MIN_PREFIX[network.version])
    for reason, refused in ((Refused.LINK_LOCAL, _LINK_LOCAL), (Refused.METADATA, _METADATA),
                            (Refused.UNSPECIFIED, _UNSPECIFIED)):
        if _overlaps(network, refused):
            return RuleRefusal(reason)
    return None


def host_refusal(host: str, *, wildcard: bool = False) -> RuleRefusal | None:
    """Why host ``host`` (an IP address, or a lower-case name; with ``wildcard`` any name below it) may
    not be registered; None when it may."""
    try:
        return network_refusal(ipaddress.ip_network(host))
    except ValueError:
        pass
    if any(refused == host or (wildcard and refused.endswith("." + host)) for refused in METADATA_NAMES):
        return RuleRefusal(Refused.METADATA)
    return None


def port_range_refusal(first: int, last: int) -> RuleRefusal | None:
    """Why ports ``first``..``last`` may not be registered; None when they may."""
    if last - first + 1 > MAX_PORTS:
        return RuleRefusal(Refused.PORT_RANGE_TOO_WIDE, limit=MAX_PORTS, count=last - first + 1)
    return None
