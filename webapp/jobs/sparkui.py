"""Where the collector may read a job's Spark UI: the registered URL rule, and the check of what a
runner reports on Redis against it.

A job is registered with either

- a **fixed URL** (``Job.spark_ui_url``), e.g. ``http://driver-host:4040``: the runner must report
  exactly this origin; or
- a **discovery rule** (``Job.spark_ui_hosts`` and ``Job.spark_ui_ports``): the runner reports the
  driver's UI URL (``SparkContext.uiWebUrl``) and it must be ``http(s)://HOST:PORT`` with HOST
  matching one of the allowed host patterns and PORT in the allowed range. Host patterns are an
  exact name (``driver-host``), a wildcard for sub-domains (``*.spark.svc.cluster.local``), an IP
  address (``10.0.0.7``, ``::1``) or a network (``10.42.0.0/16``). The default rule is this machine
  only: ``127.0.0.1`` and ``localhost``, ports 4040-4056 (Spark's ``spark.ui.port`` 4040 and the
  next 16 it tries when one is taken, ``spark.port.maxRetries``).

The fixed URL wins when both are set. A registration may not name link-local or metadata addresses,
unspecified addresses (in any spelling the resolver reads, :mod:`webapp.jobs.addresses`), networks
wider than /8 (IPv4) or /48 (IPv6), or more than 32 ports (:mod:`webapp.jobs.sparkui_limits`); the
collector checks again the address a name resolves to when it connects (:mod:`webapp.jobs.connect`).
The app id the runner reports must have a Spark application id's shape (:data:`APP_ID_PATTERNS`),
so nothing but an id reaches the REST client's paths.

Nothing read from Redis is fetched as it is: :func:`ui_target` rebuilds the URL from the validated
parts (scheme, host, port), or returns a :class:`Refusal` saying what was reported and what the
registration allows; the collector then marks the job down and makes no request.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

from webapp.jobs.addresses import read_address
from webapp.jobs.sparkui_limits import host_refusal, network_refusal, port_range_refusal

#: The default discovery rule: a Spark driver on this machine.
DEFAULT_UI_HOSTS = ("127.0.0.1", "localhost")
DEFAULT_UI_PORTS = "4040-4056"

#: Spark application ids, by cluster manager (whole-string matches, ASCII only):
#: local mode ``local-<epoch ms>``; standalone ``app-<yyyyMMddHHmmss>-<counter>``; Kubernetes
#: ``spark-<uuid without dashes>``; YARN ``application_<cluster start ms>_<counter>``.
APP_ID_PATTERNS = (
    re.compile(r"local-[0-9]{10,16}", re.ASCII),
    re.compile(r"app-[0-9]{14}-[0-9]{4,9}", re.ASCII),
    re.compile(r"spark-[0-9a-f]{32}", re.ASCII),
    re.compile(r"application_[0-9]{10,16}_[0-9]{4,9}", re.ASCII),
)
_LABEL = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?", re.ASCII)
_PORTS = re.compile(r"([0-9]{1,5})(?:-([0-9]{1,5}))?", re.ASCII)
#: A registration's port or port range as text (its numbers are checked by :func:`parse_port_range`).
PORTS_PATTERN = rf"^(?:{_PORTS.pattern})?$"
#: Longest URL or app id considered (anything longer is malformed).
MAX_LENGTH = 2048


class RefusalCode(StrEnum):
    """Why the collector refused what a runner reported (``Job.health_reason["code"]``)."""

    URL_MALFORMED = "ui_url_malformed"
    URL_NOT_REGISTERED = "ui_url_not_registered"
    HOST_NOT_ALLOWED = "ui_host_not_allowed"
    PORT_NOT_ALLOWED = "ui_port_not_allowed"
    APP_ID_MALFORMED = "app_id_malformed"
    NO_RULE = "ui_rule_missing"


_TEXT = {
    RefusalCode.URL_MALFORMED: "the Spark UI URL the runner reported ({reported}) is not a plain http(s)://host:port "
                               "URL; nothing was fetched",
    RefusalCode.URL_NOT_REGISTERED: "the Spark UI URL the runner reported ({reported}) is not the one registered "
                                    "for this job ({allowed}); nothing was fetched. If the driver moved, update "
                                    "the job's spark_ui_url",
    RefusalCode.HOST_NOT_ALLOWED: "the Spark UI host the runner reported ({reported}) is not allowed for this job "
                                  "(allowed hosts: {allowed}); nothing was fetched. If it is your driver, add it "
                                  "to the job's spark_ui_hosts",
    RefusalCode.PORT_NOT_ALLOWED: "the Spark UI port the runner reported ({reported}) is outside the ports allowed "
                                  "for this job ({allowed}); nothing was fetched. If it is your driver, widen the "
                                  "job's spark_ui_ports",
    RefusalCode.APP_ID_MALFORMED: "the application id the runner reported ({reported}) does not look like a Spark "
                                  "application id ({allowed}); nothing was fetched",
    RefusalCode.NO_RULE: "no Spark UI URL or discovery rule is registered for this job; nothing was fetched. "
                         "Set spark_ui_url, or spark_ui_hosts and spark_ui_ports",
}


@dataclass(frozen=True)
class Refusal:
    """A reported UI URL or app id that the registration does not allow.

    ``reported`` is the offending value as read (cut to 200 characters), ``allowed`` what the
    registration allows, in words.
    """

    code: RefusalCode
    reported: str = ""
    allowed: str = ""

    def text(self) -> str:
        """The sentence the job page shows."""
        return _TEXT[self.code].format(reported=repr(self.reported), allowed=self.allowed)

    def to_json(self) -> dict[str, str]:
        return {"code": self.code.value, "reported": self.reported, "allowed": self.allowed}


@dataclass(frozen=True)
class UiTarget:
    """What the collector may fetch: ``base_url`` rebuilt from validated parts, and a valid app id."""

    base_url: str
    app_id: str


class SparkUiError(ValueError):
    """A URL, host pattern or port range is malformed; ``code`` says how (for reported URLs)."""

    def __init__(self, message: str, code: RefusalCode = RefusalCode.URL_MALFORMED) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Origin:
    """``scheme://host:port`` of a Spark UI (host lower-case; an IPv6 address without brackets)."""

    scheme: str
    host: str
    port: int

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"


def _host_name_ok(host: str) -> bool:
    return len(host) <= 253 and all(_LABEL.fullmatch(label) for label in host.split("."))


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _origin_parts(value: Any) -> tuple[str, str, int]:
    """``(scheme, host as written, lower-case, port)`` of :func:`parse_origin`'s ``value``."""
    if not isinstance(value, str) or not value:
        raise SparkUiError("must be a URL such as http://driver-host:4040")
    if len(value) > MAX_LENGTH or any(not 0x21 <= ord(c) <= 0x7E for c in value):
        raise SparkUiError("must be printable ASCII without spaces, at most 2048 characters")
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError as exc:
        raise SparkUiError(f"is not a valid URL ({exc})") from None
    if parts.scheme not in ("http", "https"):
        raise SparkUiError(f"must start with http:// or https://, not {parts.scheme or 'nothing'!r}")
    if "@" in parts.netloc or "\\" in value:
        raise SparkUiError("must not carry a user name or password")
    if parts.path not in ("", "/") or parts.query or parts.fragment or value.endswith(("?", "#")):
        raise SparkUiError("must be the UI root only (scheme, host and port), without a path, query or fragment")
    host = (parts.hostname or "").lower()
    if not host or not (_ip(host) or _host_name_ok(host)):
        raise SparkUiError(f"has no valid host name or IP address ({parts.netloc!r})")
    if port == 0:
        raise SparkUiError("port 0 is not a port")
    ip = _ip(host)
    if ip is not None and getattr(ip, "scope_id", None):
        raise SparkUiError("must not name an IPv6 zone (%...)")
    return parts.scheme, host, port if port is not None else (443 if parts.scheme == "https" else 80)


def parse_origin(value: Any) -> Origin:
    """Parse a Spark UI base URL: ``http(s)://HOST[:PORT]`` with an optional ``/``, nothing else (no
    user info, path, query or fragment). A missing port is the scheme's default. A host the resolver
    reads as an address (``2852039166``, ``127.1``: :func:`webapp.jobs.addresses.read_address`) is
    that address, so a reported URL is matched against the registration by what it connects to.

    Raises:
        SparkUiError: the value is not such a URL (the message says which part is wrong).
    """
    scheme, host, port = _origin_parts(value)
    address = read_address(host)
    return Origin(scheme=scheme, host=str(address) if address else host, port=port)


@dataclass(frozen=True)
class HostPattern:
    """One allowed host: an exact name, ``*.suffix`` (any name below suffix), an IP address or an
    IP network (CIDR)."""

    text: str
    network: ipaddress.IPv4Network | ipaddress.IPv6Network | None = None
    suffix: str | None = None

    def matches(self, host: str) -> bool:
        ip = _ip(host)
        if self.network is not None:
            return ip is not None and ip.version == self.network.version and ip in self.network
        if ip is not None:
            return False
        if self.suffix is not None:
            return host.endswith("." + self.suffix)
        return host == self.text


def parse_host_pattern(value: Any) -> HostPattern:
    """Parse one allowed host pattern (see :class:`HostPattern`).

    Raises:
        SparkUiError: not a host name, ``*.name``, IP address or network, or a refused one
            (:mod:`webapp.jobs.sparkui_limits`).
    """
    if not isinstance(value, str) or not value or len(value) > 253:
        raise SparkUiError(f"{value!r} is not a host name, *.domain, IP address or network")
    text = value.strip().lower()
    if text.startswith("*."):
        if not (_host_name_ok(text[2:]) and "." in text[2:]):
            raise SparkUiError(f"{value!r}: a wildcard needs a domain of two labels at least, "
                               "e.g. *.svc.cluster.local")
        if refusal := host_refusal(text[2:], wildcard=True):
            raise SparkUiError(refusal.text("spark_ui_hosts", text))
        return HostPattern(text=text, suffix=text[2:])
    if _ip(text) or "/" in text:
        try:
            network = ipaddress.ip_network(text, strict=False)
        except ValueError:
            raise SparkUiError(f"{value!r} is not an IP address or network (CIDR)") from None
        if refusal := network_refusal(network, text):
            raise SparkUiError(refusal.text("spark_ui_hosts", text))
        return HostPattern(text=text, network=network)
    if not _host_name_ok(text):
        raise SparkUiError(f"{value!r} is not a host name, *.domain, IP address or network")
    if refusal := host_refusal(text):
        raise SparkUiError(refusal.text("spark_ui_hosts", text))
    return HostPattern(text=text)


def parse_port_range(value: Any) -> tuple[int, int]:
    """Parse ``"4040"`` or ``"4040-4056"`` into ``(first, last)``, ports 1..65535, first <= last,
    at most :data:`~webapp.jobs.sparkui_limits.MAX_PORTS` ports.

    Raises:
        SparkUiError: anything else.
    """
    match = _PORTS.fullmatch(value.strip()) if isinstance(value, str) else None
    if not match:
        raise SparkUiError(f"{value!r} is not a port or a port range such as 4040-4056")
    first = int(match.group(1))
    last = int(match.group(2) or first)
    if not 1 <= first <= last <= 65535:
        raise SparkUiError(f"{value!r}: ports run from 1 to 65535, the first no higher than the last")
    if refusal := port_range_refusal(first, last):
        raise SparkUiError(refusal.text("spark_ui_ports", value.strip()))
    return first, last


def parse_registered_origin(value: Any) -> Origin:
    """:func:`parse_origin` of a registered ``spark_ui_url``, whose host may not be a refused address
    or name (:mod:`webapp.jobs.sparkui_limits`).

    Raises:
        SparkUiError: not such a URL, or a refused host.
    """
    _, host, _ = _origin_parts(value)
    if refusal := host_refusal(host):
        raise SparkUiError(refusal.text("spark_ui_url", host))
    return parse_origin(value)


def rule_errors(*, spark_ui_url: Any, spark_ui_hosts: Any, spark_ui_ports: Any) -> dict[str, list[str]]:
    """Validation errors of a registration's UI rule, keyed by field (empty when valid)."""
    errors: dict[str, list[str]] = {}
    if spark_ui_url:
        try:
            parse_registered_origin(spark_ui_url)
        except SparkUiError as exc:
            errors["spark_ui_url"] = [f"{exc}"]
    if not isinstance(spark_ui_hosts, list):
        errors["spark_ui_hosts"] = ["must be a JSON list of host patterns, e.g. [\"driver-host\", \"10.0.0.0/8\"]"]
    else:
        for host in spark_ui_hosts:
            try:
                parse_host_pattern(host)
            except SparkUiError as exc:
                errors.setdefault("spark_ui_hosts", []).append(str(exc))
    if spark_ui_hosts or not spark_ui_url:
        try:
            parse_port_range(spark_ui_ports)
        except SparkUiError as exc:
            errors["spark_ui_ports"] = [str(exc)]
    if not spark_ui_url and not spark_ui_hosts and "spark_ui_hosts" not in errors:
        errors["spark_ui_url"] = ["give the Spark UI URL (e.g. http://driver-host:4040) or a discovery rule "
                                  "(spark_ui_hosts and spark_ui_ports)"]
    return errors


@dataclass(frozen=True)
class UiRule:
    """A job's registered UI rule (parsed from ``Job`` fields that passed :func:`rule_errors`)."""

    fixed: Origin | None
    hosts: tuple[HostPattern, ...]
    ports: tuple[int, int] | None

    @classmethod
    def of(cls, *, spark_ui_url: str, spark_ui_hosts: list, spark_ui_ports: str) -> UiRule | None:
        """The rule of a registration, or None when it has none (or a stored value no longer parses)."""
        try:
            if spark_ui_url:
                return cls(fixed=parse_registered_origin(spark_ui_url), hosts=(), ports=None)
            hosts = tuple(parse_host_pattern(h) for h in spark_ui_hosts or ())
            return cls(fixed=None, hosts=hosts, ports=parse_port_range(spark_ui_ports)) if hosts else None
        except SparkUiError:
            return None

    def describe(self) -> str:
        if self.fixed is not None:
            return self.fixed.url
        first, last = self.ports or (0, 0)
        return f"{', '.join(h.text for h in self.hosts)} on port{'s' if last > first else ''} " \
               f"{first}{f'-{last}' if last > first else ''}"


def _cut(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text[:200]


def check_app_id(value: Any) -> bool:
    """Whether ``value`` has the shape of a Spark application id (:data:`APP_ID_PATTERNS`)."""
    return isinstance(value, str) and any(p.fullmatch(value) for p in APP_ID_PATTERNS)


def ui_target(rule: UiRule | None, *, ui_url: Any, app_id: Any) -> UiTarget | Refusal:
    """Check a runner's reported UI URL and app id against the job's registered rule.

    Returns the :class:`UiTarget` to fetch (the URL rebuilt from the validated scheme, host and
    port, never the reported string), or the :class:`Refusal` to show; nothing is fetched here.
    """
    if rule is None:
        return Refusal(RefusalCode.NO_RULE)
    try:
        origin = parse_origin(ui_url)
    except SparkUiError:
        return Refusal(RefusalCode.URL_MALFORMED, reported=_cut(ui_url), allowed=rule.describe())
    if rule.fixed is not None:
        if origin != rule.fixed:
            return Refusal(RefusalCode.URL_NOT_REGISTERED, reported=_cut(ui_url), allowed=rule.fixed.url)
    elif not any(h.matches(origin.host) for h in rule.hosts):
        return Refusal(RefusalCode.HOST_NOT_ALLOWED, reported=origin.host,
                       allowed=", ".join(h.text for h in rule.hosts))
    elif rule.ports and not rule.ports[0] <= origin.port <= rule.ports[1]:
        return Refusal(RefusalCode.PORT_NOT_ALLOWED, reported=str(origin.port),
                       allowed=f"{rule.ports[0]}-{rule.ports[1]}")
    if not check_app_id(app_id):
        return Refusal(RefusalCode.APP_ID_MALFORMED, reported=_cut(app_id),
                       allowed="local-<ms>, app-<yyyyMMddHHmmss>-<n>, spark-<32 hex>, application_<ms>_<n>")
    return UiTarget(base_url=(rule.fixed or origin).url, app_id=app_id)
