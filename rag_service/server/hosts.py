"""Which ``Host`` headers ``rag serve`` answers: the defence against DNS rebinding.

A web page on another site can point its own name at 127.0.0.1 once it is loaded (DNS rebinding); the
browser then sends the page's requests to this server as same-origin ones, with the page's name in
``Host``. Answering only the names of this server closes that: ``localhost``, ``127.0.0.1``, ``[::1]``
and the ``--host`` address always, the names in ``RAG_API_ALLOWED_HOSTS`` (``*`` for any) too. Bound to
every interface (``0.0.0.0``, ``::``) with no list set, a server whose reads need ``RAG_API_READ_TOKEN``
answers any name (a rebinding page cannot send the token); one with open reads answers the loopback names,
the machine's host name and any IP address (an address in the URL is no name an attacker controls).
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass

from starlette.types import ASGIApp, Receive, Scope, Send

from rag_service.server.config import ServerConfig
from rag_service.server.errors import error_response

#: the names every server answers, whatever it is bound to
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")

#: ``--host`` values that mean every interface
WILDCARD_BINDS = frozenset({"0.0.0.0", "::", "[::]", ""})

SETTING = "RAG_API_ALLOWED_HOSTS"


@dataclass(frozen=True, slots=True)
class HostPolicy:
    """The ``Host`` names a server answers (lower case, IPv6 in brackets); ``*.example.com`` patterns match its
    subdomains; ``any_host`` answers every name, ``any_ip`` every IP address."""

    names: tuple[str, ...]
    any_host: bool = False
    any_ip: bool = False

    def allows(self, header: str | None) -> bool:
        """Whether a request with this ``Host`` header (port and all; None: no header) is answered. A request
        without one comes from no browser, so it cannot be a rebinding page's."""
        if self.any_host or header is None:
            return True
        name = host_name(header)
        if self.any_ip and _is_ip(name):
            return True
        return any(name == ok or (ok.startswith("*.") and name.endswith(ok[1:])) for ok in self.names)

    def describe(self) -> str:
        """The names, as the refusal and the start line list them."""
        if self.any_host:
            return "any name"
        return ", ".join(self.names) + (" or an IP address" if self.any_ip else "")


def host_name(header: str) -> str:
    """The name of a ``Host`` header: lower case, without its port or a final dot, IPv6 kept in brackets."""
    value = header.strip().lower()
    if value.startswith("["):
        return value[: value.find("]") + 1]
    return value.rsplit(":", 1)[0].rstrip(".") if ":" in value else value.rstrip(".")


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name.removeprefix("[").removesuffix("]"))
    except ValueError:
        return False
    return True


def _as_host(name: str) -> str:
    """``--host`` or a listed name as a ``Host`` header names it: an IPv6 address in brackets, no port."""
    name = name.strip().lower().removeprefix("[").removesuffix("]")  # [2001:db8::1] as given or bare
    return f"[{name}]" if ":" in name and _is_ip(name) else host_name(name)


def host_policy(
    config: ServerConfig, bind_host: str, *, machine_name: str | None = None
) -> tuple[HostPolicy, str | None]:
    """The policy of a server bound to ``bind_host``, and the line ``rag serve`` says at start about it (None:
    nothing to say). ``machine_name`` defaults to this machine's host name."""
    listed = [name for name in (_as_host(n) for n in config.allowed_hosts.split(",")) if name]
    if "*" in listed:
        return HostPolicy(names=(), any_host=True), None
    names = list(LOOPBACK_NAMES)
    wildcard = bind_host.strip() in WILDCARD_BINDS
    if not wildcard:
        names.append(_as_host(bind_host))
    if listed or not wildcard:
        return HostPolicy(names=tuple(dict.fromkeys(names + listed))), None
    if config.reads_token is not None:
        return HostPolicy(names=(), any_host=True), None
    names.append((machine_name or socket.gethostname()).lower())
    policy = HostPolicy(names=tuple(dict.fromkeys(names)), any_ip=True)
    note = (
        f"rag serve: reads are open, so only requests to {policy.describe()} are answered (a page on another site "
        f"could reach this server under its own name); {SETTING}=name,... allows more names, * any"
    )
    return policy, note


class TrustedHosts:
    """Answer a request whose ``Host`` the policy refuses with a 400 naming the header and the setting."""

    def __init__(self, app: ASGIApp, *, policy: HostPolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        raw = dict(scope["headers"]).get(b"host")
        header = raw.decode("latin-1") if raw is not None else None
        if self.policy.allows(header):
            await self.app(scope, receive, send)
            return
        message = (
            f"Host {str(header)[:100]!r} is not a name of this server (it answers {self.policy.describe()}); "
            f"add the name to {SETTING} (comma-separated, * for any)"
        )
        await error_response(400, "host_not_allowed", message)(scope, receive, send)
