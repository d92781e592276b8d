"""Where the web app may connect: one check of every host it fetches from or posts to (a job's Spark
UI, a notification webhook), read the way the system resolver reads it.

- :func:`read_address`: a host as the resolver reads it: an IPv6 literal, or IPv4 in every numeric
  form ``inet_aton`` takes (what ``getaddrinfo`` does with a number): 1 to 4 parts, each decimal,
  octal (a leading ``0``) or hex (``0x``); the last fills the bytes left, so ``2852039166``,
  ``0xa9fea9fe``, ``0251.0376.0251.0376`` and ``169.254.43518`` are all ``169.254.169.254`` and
  ``0``, ``0x0`` and ``00`` are ``0.0.0.0``. Anything else is a name.
- :func:`embedded_ipv4`: the IPv4 address an IPv6 address carries (:class:`Embedding`): IPv4-mapped,
  IPv4-compatible, IPv4-translated, NAT64 (``64:ff9b::/96``, and ``64:ff9b:1::/48`` with the IPv4 in
  the last 32 bits), 6to4 (``2002::/16``), Teredo (server and client), ISATAP.
- The deny-list (:func:`address_denial`, :func:`network_denial`, :func:`name_denial`): link-local
  addresses ``169.254.0.0/16`` and ``fe80::/10`` (cloud metadata services answer at
  ``169.254.169.254``), the metadata services ``fd00:ec2::254`` (AWS), ``100.100.100.200`` (Alibaba
  Cloud) and ``metadata.google.internal``, the unspecified addresses ``0.0.0.0`` and ``::`` (no
  host; connecting reaches this machine); an IPv6 address or network whose embedded IPv4 is one of
  them too. A network is refused when any address in it is (ISATAP only in networks of /96 or longer).
- :func:`host_denial` of a host as written (registration, a webhook URL): the deny-list, then the
  spellings refused because a reader cannot see the address: IPv4 not in dotted decimal, IPv4-mapped
  or -compatible IPv6.

Each refusal is a :class:`Denial` (a :class:`Denied` code and its data); its words are :meth:`Denial.text`.
:mod:`webapp.jobs.connect` checks the addresses a name resolves to when connecting.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, replace
from enum import StrEnum
from urllib.parse import urlsplit

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

#: One part of a numeric IPv4 host as ``inet_aton`` reads it: hex, octal or decimal.
_PART = re.compile(r"0x([0-9a-f]+)|(0[0-7]*)|([1-9][0-9]*)", re.ASCII | re.IGNORECASE)
#: Host names of metadata services.
METADATA_NAMES = ("metadata.google.internal",)


class Denied(StrEnum):
    """Why the web app does not connect to a host, address or network."""

    LINK_LOCAL = "link_local"
    METADATA = "metadata"
    UNSPECIFIED = "unspecified"
    IPV4_AS_IPV6 = "ipv4_as_ipv6"  # written, not connected to: IPv4-mapped or -compatible
    NOT_DOTTED = "ipv4_not_dotted"  # written, not connected to: 2852039166, 0xa9fea9fe, 169.254.43518


class Embedding(StrEnum):
    """How an IPv6 address carries an IPv4 address."""

    IPV4_MAPPED = "ipv4_mapped"
    IPV4_COMPATIBLE = "ipv4_compatible"
    IPV4_TRANSLATED = "ipv4_translated"
    NAT64 = "nat64"
    NAT64_LOCAL = "nat64_local"
    SIX_TO_FOUR = "6to4"
    TEREDO_SERVER = "teredo_server"
    TEREDO_CLIENT = "teredo_client"
    ISATAP = "isatap"


_DENIED = tuple((reason, ipaddress.ip_network(net)) for reason, net in (
    (Denied.LINK_LOCAL, "169.254.0.0/16"), (Denied.LINK_LOCAL, "fe80::/10"),
    (Denied.METADATA, "fd00:ec2::254/128"), (Denied.METADATA, "100.100.100.200/32"),
    (Denied.UNSPECIFIED, "0.0.0.0/32"), (Denied.UNSPECIFIED, "::/128")))


@dataclass(frozen=True)
class _Field:
    """Where an embedding keeps the IPv4: addresses under ``prefix`` (and not in ``excluded``), bits
    ``start`` to ``start + 32`` counted from the left, inverted when ``inverted`` (Teredo's client)."""

    embedding: Embedding
    prefix: ipaddress.IPv6Network
    start: int
    inverted: bool = False
    excluded: tuple[ipaddress.IPv6Network, ...] = ()


_FIELDS = (
    _Field(Embedding.IPV4_MAPPED, ipaddress.IPv6Network("::ffff:0:0/96"), 96),
    _Field(Embedding.IPV4_COMPATIBLE, ipaddress.IPv6Network("::/96"), 96, excluded=(ipaddress.IPv6Network("::/127"),)),
    _Field(Embedding.IPV4_TRANSLATED, ipaddress.IPv6Network("::ffff:0:0:0/96"), 96),
    _Field(Embedding.NAT64, ipaddress.IPv6Network("64:ff9b::/96"), 96),
    _Field(Embedding.NAT64_LOCAL, ipaddress.IPv6Network("64:ff9b:1::/48"), 96),
    _Field(Embedding.SIX_TO_FOUR, ipaddress.IPv6Network("2002::/16"), 16),
    _Field(Embedding.TEREDO_SERVER, ipaddress.IPv6Network("2001::/32"), 32),
    _Field(Embedding.TEREDO_CLIENT, ipaddress.IPv6Network("2001::/32"), 96, inverted=True),
)
#: ISATAP's interface identifier ``0000:5efe`` or ``0200:5efe`` (the u/l bit), bits 64 to 96.
_ISATAP_MASK, _ISATAP_ID = 0xFDFFFFFF << 32, 0x00005EFE << 32
#: Spellings refused as written: the reader sees IPv6, the connection goes to IPv4.
_WRITTEN_AS_IPV6 = (Embedding.IPV4_MAPPED, Embedding.IPV4_COMPATIBLE)

_REASON_TEXT = {
    Denied.LINK_LOCAL: "{subject} is or contains link-local addresses (169.254.0.0/16, fe80::/10), where cloud "
                       "metadata services answer: the web app connects to none of them",
    Denied.METADATA: "{subject} is or contains a cloud metadata service's address or name: the web app "
                     "connects to none of them",
    Denied.UNSPECIFIED: "{subject} is or contains an unspecified address (0.0.0.0 or ::), which names no host "
                        "(connecting to it reaches this machine)",
    Denied.IPV4_AS_IPV6: "{value} is the IPv4 address {address} written as IPv6 ({embedding}): write the IPv4 "
                         "address",
    Denied.NOT_DOTTED: "{value} is the IPv4 address {address} in another notation: write the IPv4 address as "
                       "{address}",
}
_EMBEDDING_TEXT = {
    Embedding.IPV4_MAPPED: "IPv4-mapped, ::ffff:0:0/96",
    Embedding.IPV4_COMPATIBLE: "IPv4-compatible, ::/96",
    Embedding.IPV4_TRANSLATED: "IPv4-translated, ::ffff:0:0:0/96",
    Embedding.NAT64: "NAT64, 64:ff9b::/96",
    Embedding.NAT64_LOCAL: "local-use NAT64, 64:ff9b:1::/48",
    Embedding.SIX_TO_FOUR: "6to4, 2002::/16",
    Embedding.TEREDO_SERVER: "Teredo's server, 2001::/32",
    Embedding.TEREDO_CLIENT: "Teredo's client, 2001::/32",
    Embedding.ISATAP: "ISATAP, interface identifier ::5efe:0:0/96",
}


@dataclass(frozen=True)
class Denial:
    """A host, address or network the web app does not connect to.

    ``value`` is the host, address or network given (or resolved to); ``address`` the IPv4 address
    or network it is read as or carries (empty when that is ``value`` itself); ``embedding`` how an
    IPv6 ``value`` carries it; ``name`` the host name that resolved to ``value`` (connection time).
    """

    reason: Denied
    value: str
    address: str = ""
    embedding: Embedding | None = None
    name: str = ""

    def _subject(self) -> str:
        notes = [f"resolved to {self.value}"] if self.name else []
        if self.address and self.address != self.value:
            by = f" by {_EMBEDDING_TEXT[self.embedding]}" if self.embedding else ""
            notes.append(f"the IPv4 {'network' if '/' in self.address else 'address'} {self.address}{by}")
        subject = self.name or self.value
        return f"{subject} ({', '.join(notes)})" if notes else subject

    def text(self, advice: str) -> str:
        """The sentence: why, then ``advice`` (what to give instead) unless the reason says what to write."""
        why = _REASON_TEXT[self.reason].format(
            subject=self._subject(), value=self.value, address=self.address,
            embedding=_EMBEDDING_TEXT[self.embedding] if self.embedding else "")
        return why if self.reason in (Denied.IPV4_AS_IPV6, Denied.NOT_DOTTED) else f"{why}. {advice}"

    def to_json(self) -> dict[str, str]:
        return {"code": self.reason.value, "value": self.value, "address": self.address,
                "embedding": self.embedding.value if self.embedding else "", "name": self.name}


def ipv4_reading(text: str) -> ipaddress.IPv4Address | None:
    """The IPv4 address ``inet_aton`` (and so ``getaddrinfo``) reads ``text`` as, or None when it
    reads it as no number (then it is a name to look up)."""
    parts = text.split(".")
    if len(parts) > 4:
        return None
    values = []
    for part in parts:
        match = _PART.fullmatch(part)
        if match is None:
            return None
        hexa, octal, decimal = match.groups()
        digits = (hexa or octal or decimal).lstrip("0")
        if len(digits) > 11:  # above 2**32 in any base; int() of a long string is slow
            return None
        values.append(int(digits or "0", 16 if hexa else 8 if octal else 10))
    *head, last = values
    if any(value > 0xFF for value in head) or last >= 1 << 8 * (4 - len(head)):
        return None
    number = last
    for index, value in enumerate(head):
        number |= value << 8 * (3 - index)
    return ipaddress.IPv4Address(number)


def read_address(host: str) -> Address | None:
    """The address ``host`` (without brackets) is as the resolver reads it (:func:`ipv4_reading`, or an
    IPv6 literal), or None for a name."""
    if ":" in host:
        try:
            return ipaddress.IPv6Address(host)
        except ValueError:
            return None
    return ipv4_reading(host)


def _field_network(field: _Field, network: ipaddress.IPv6Network) -> ipaddress.IPv4Network | None:
    """The IPv4 network the addresses of ``network`` under ``field`` carry (None: none is under it)."""
    if not network.overlaps(field.prefix) or any(network.subnet_of(e) for e in field.excluded):
        return None
    known = min(32, max(0, network.prefixlen - field.start))
    bits = (int(network.network_address) >> (96 - field.start)) & 0xFFFFFFFF
    mask = (0xFFFFFFFF << (32 - known)) & 0xFFFFFFFF
    value = (bits ^ 0xFFFFFFFF if field.inverted else bits) & mask
    return ipaddress.IPv4Network((value, known))


def embedded_ipv4(network: ipaddress.IPv6Network) -> list[tuple[Embedding, ipaddress.IPv4Network]]:
    """The IPv4 networks the addresses of ``network`` (an address is a /128) carry, with how; ISATAP
    only for networks of /96 or longer (its identifier is the interface's, under any prefix)."""
    found = [(f.embedding, net) for f in _FIELDS if (net := _field_network(f, network)) is not None]
    low = int(network.network_address)
    if network.prefixlen >= 96 and low & _ISATAP_MASK == _ISATAP_ID:
        known = network.prefixlen - 96
        found.append((Embedding.ISATAP, ipaddress.IPv4Network((low & 0xFFFFFFFF, known), strict=False)))
    return found


def network_denial(network: Network, value: str | None = None) -> Denial | None:
    """Why the web app connects to no address of ``network`` (an address is a /32 or /128): it
    contains a denied address, or an address whose embedded IPv4 is denied; None when it may.
    ``value`` is how it was given (default: the network)."""
    value = value or str(network)
    for reason, denied in _DENIED:
        if network.version == denied.version and network.overlaps(denied):
            return Denial(reason, value)
    if network.version == 6:
        for embedding, carried in embedded_ipv4(network):
            for reason, denied in _DENIED:
                if denied.version == 4 and carried.overlaps(denied):
                    return Denial(reason, value, _shown(carried), embedding)
    return None


def address_denial(address: Address, value: str | None = None) -> Denial | None:
    """:func:`network_denial` of one address (connection time: what a name resolved to)."""
    return network_denial(ipaddress.ip_network(address), value or str(address))


def name_denial(name: str, *, wildcard: bool = False) -> Denial | None:
    """Why a lower-case host name (with ``wildcard``: any name below it) is refused; None when it is not."""
    if any(denied == name or (wildcard and denied.endswith("." + name)) for denied in METADATA_NAMES):
        return Denial(Denied.METADATA, name)
    return None


def written_denial(network: Network, value: str) -> Denial | None:
    """The deny-list of ``network`` as written ``value`` (:func:`network_denial`), then an IPv4
    address or network written as IPv6 (IPv4-mapped or -compatible). None when it is accepted."""
    if denial := network_denial(network, value):
        return denial
    if network.version == 6:
        for embedding, carried in embedded_ipv4(network):
            if embedding in _WRITTEN_AS_IPV6 and network.subnet_of(_prefix(embedding)):
                return Denial(Denied.IPV4_AS_IPV6, value, _shown(carried), embedding)
    return None


def host_denial(host: str) -> Denial | None:
    """Why a host as written (lower-case, an IPv6 address without brackets) is refused: the address
    it reads as (:func:`written_denial`, then IPv4 not in dotted decimal) or the name
    (:func:`name_denial`); None when it is not."""
    address = read_address(host)
    if address is None:
        return name_denial(host)
    if denial := written_denial(ipaddress.ip_network(address), host):
        spelled = address.version == 4 and not denial.address and host != str(address)
        return replace(denial, address=str(address)) if spelled else denial
    if address.version == 4 and host != str(address):
        return Denial(Denied.NOT_DOTTED, host, str(address))
    return None


def url_host_denial(url: str) -> Denial | None:
    """:func:`host_denial` of an http(s) URL's host (None when the URL has none: other validators say so)."""
    try:
        host = urlsplit(url).hostname
    except ValueError:
        return None
    return host_denial(host) if host else None


def _prefix(embedding: Embedding) -> ipaddress.IPv6Network:
    return next(f.prefix for f in _FIELDS if f.embedding is embedding)


def _shown(network: ipaddress.IPv4Network) -> str:
    return str(network.network_address) if network.prefixlen == 32 else str(network)
