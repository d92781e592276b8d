"""Connect only where the address check allows (:mod:`webapp.jobs.addresses`), checked again at
connection time: an httpx transport that resolves the host itself, refuses the request when any
address the name resolves to is denied, and connects to the address it checked (pinned: a second
lookup cannot answer differently, DNS rebinding). TLS still verifies the certificate of the name
(SNI and host name check), and the ``Host`` header is the request's.

Used for every request the web app makes to a host someone registered or configured: the
collector's Spark REST requests (:func:`webapp.loop.collect.rest_client`) and notification
webhooks (``webapp.inbox.tasks.webhook_deliver``).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from dataclasses import replace

import httpx

from webapp.jobs.addresses import Address, Denial, address_denial, name_denial, read_address

#: ``(host name, port) -> addresses`` in the order to try; raises ``OSError`` when the name does not resolve.
Resolver = Callable[[str, int], list[Address]]


class AddressRefused(Exception):
    """A request was not made: its host is, or resolves to, an address the web app does not connect
    to. ``denial`` says which (``Denial.name`` is the host name when it was resolved)."""

    def __init__(self, denial: Denial) -> None:
        super().__init__(denial.text("Nothing was sent"))
        self.denial = denial

    def to_json(self) -> dict[str, str]:
        return self.denial.to_json()


def system_resolve(host: str, port: int) -> list[Address]:
    """The addresses ``getaddrinfo`` gives ``host`` for a TCP connection to ``port``, in its order."""
    found: list[Address] = []
    for *_, sockaddr in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        address = ipaddress.ip_address(sockaddr[0])
        if address not in found:
            found.append(address)
    return found


class GuardedTransport(httpx.BaseTransport):
    """An httpx transport that connects to a request's host only when no address of it is denied.

    ``resolver`` (default :func:`system_resolve`) turns a host name into addresses; ``inner``
    (default ``httpx.HTTPTransport()``, no proxy) makes the request, to the first address that
    accepts the connection.

    Raises:
        AddressRefused: the host reads as a denied address, is a denied name, or a name with a
            denied address among the ones it resolves to (nothing is sent).
        httpx.ConnectError: the name does not resolve (a transport error: callers retry it).
    """

    def __init__(self, resolver: Resolver | None = None, inner: httpx.BaseTransport | None = None) -> None:
        self._resolve = resolver or system_resolve
        self._inner = inner or httpx.HTTPTransport()

    def checked_addresses(self, request: httpx.Request) -> list[Address]:
        """The addresses to connect to for ``request``, in order, each checked (see the class for what
        it raises)."""
        host = request.url.host
        address = read_address(host)
        if address is not None:
            if denial := address_denial(address):
                raise AddressRefused(replace(denial, name=host) if host != str(address) else denial)
            return [address]
        if denial := name_denial(host):
            raise AddressRefused(denial)
        try:
            addresses = self._resolve(host, request.url.port or (443 if request.url.scheme == "https" else 80))
        except OSError as exc:
            raise httpx.ConnectError(f"{host} does not resolve: {exc}", request=request) from exc
        if not addresses:
            raise httpx.ConnectError(f"{host} resolves to no address", request=request)
        for resolved in addresses:
            if denial := address_denial(resolved):
                raise AddressRefused(replace(denial, name=host))
        return addresses

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` to its host's first checked address that accepts the connection (as
        ``socket.create_connection`` tries each address ``getaddrinfo`` gives)."""
        *others, last = self.checked_addresses(request)
        for address in others:
            try:
                return self._inner.handle_request(_pinned(request, address))
            except httpx.ConnectError:
                continue
        return self._inner.handle_request(_pinned(request, last))

    def close(self) -> None:
        self._inner.close()


def _pinned(request: httpx.Request, address: Address) -> httpx.Request:
    """``request`` sent to ``address``, with its host name (if it has one) kept for TLS and ``Host``."""
    extensions = dict(request.extensions)
    if read_address(request.url.host) is None:
        extensions["sni_hostname"] = request.url.host
    return httpx.Request(request.method, request.url.copy_with(host=str(address)), headers=request.headers,
                         stream=request.stream, extensions=extensions)
