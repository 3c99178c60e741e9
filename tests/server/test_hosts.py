"""DNS rebinding: ``rag serve`` answers only requests naming this server in ``Host`` (``server/hosts.py``)."""

from __future__ import annotations

import httpx

from rag_service.server.config import ServerConfig
from rag_service.server.hosts import HostPolicy, host_policy
from rag_service.service import UniversalRAGService
from tests.server.conftest import READ_TOKEN, start_server


def _policy(bind: str, **config: object) -> tuple[HostPolicy, str | None]:
    return host_policy(ServerConfig(**config), bind, machine_name="Build-Box")  # type: ignore[arg-type]


def _answers(bind: str, host: str, **config: object) -> bool:
    policy, _ = host_policy(ServerConfig(**config), bind, machine_name="Build-Box")  # type: ignore[arg-type]
    return policy.allows(host)


def test_a_loopback_server_answers_its_own_names_only() -> None:
    for host in ("localhost", "localhost:8000", "LOCALHOST.:8000", "127.0.0.1:8000", "[::1]:8000", "[::1]"):
        assert _answers("127.0.0.1", host), host
    for host in ("rebind.attacker.test:8000", "localhost.attacker.test", "127.0.0.1.nip.io", "", "10.0.0.5:8000"):
        assert not _answers("127.0.0.1", host), host
    assert _answers("127.0.0.1", None)  # type: ignore[arg-type]  # no Host at all: no browser sent it
    assert _answers("rag.internal", "rag.internal:8000") and not _answers("rag.internal", "evil.test")
    assert _answers("::1", "[::1]:8000") and _answers("192.168.1.5", "192.168.1.5:8000")


def test_every_interface_with_open_reads_answers_the_machine_and_addresses_and_says_how_to_allow_more() -> None:
    policy, note = _policy("0.0.0.0")
    assert note is not None and "RAG_API_ALLOWED_HOSTS" in note and "build-box" in note and "\n" not in note
    for host in ("localhost:8000", "build-box:8000", "192.168.1.5:8000", "[fe80::1]:8000"):
        assert policy.allows(host), host
    assert not policy.allows("rebind.attacker.test:8000")
    # reads need a token: a rebinding page cannot send it, so any name is answered
    assert _policy("0.0.0.0", read_token=READ_TOKEN) == (_policy("::", read_token=READ_TOKEN)[0], None)
    assert _answers("0.0.0.0", "anything.example:8000", read_token=READ_TOKEN)


def test_the_setting_adds_names_patterns_or_any() -> None:
    listed = {"allowed_hosts": " rag.example.com:443, *.corp.test ,"}
    for bind in ("0.0.0.0", "127.0.0.1"):
        assert _answers(bind, "rag.example.com", **listed) and _answers(bind, "a.corp.test:8000", **listed)
        assert _answers(bind, "localhost:8000", **listed)  # the loopback names stay
        assert not _answers(bind, "corp.test.attacker.test", **listed) and not _answers(bind, "build-box", **listed)
    assert _policy("0.0.0.0", **listed)[1] is None
    assert _answers("127.0.0.1", "whatever.test", allowed_hosts="*")


def test_an_ipv6_address_is_matched_with_or_without_its_brackets() -> None:
    """``[2001:db8::1]`` in the setting (or ``--host [::1]``) was bracketed twice and never matched."""
    for listed in ("[2001:db8::1]", "2001:db8::1"):
        assert _answers("127.0.0.1", "[2001:db8::1]:8000", allowed_hosts=listed)
    assert _answers("[2001:db8::2]", "[2001:db8::2]:8000")


def test_a_foreign_host_gets_one_line_400_before_any_route(server_service: UniversalRAGService) -> None:
    live = start_server(server_service, ServerConfig(token=None))
    try:
        with httpx.Client(base_url=live.url, timeout=30) as client:
            assert client.get("/api/collections").status_code == 200  # Host 127.0.0.1:<port>
            assert client.get("/api/collections", headers={"Host": "localhost"}).status_code == 200
            for method, path in (("GET", "/api/collections"), ("POST", "/api/rag/retrieve"), ("GET", "/")):
                foreign = {"Host": "rebind.attacker.test:8000"}
                answer = client.request(method, path, headers=foreign, json={"query": "x"})
                assert answer.status_code == 400, (path, answer.text)
                error = answer.json()["error"]
                assert error["code"] == "host_not_allowed"
                assert error["message"] == (
                    "Host 'rebind.attacker.test:8000' is not a name of this server (it answers localhost, 127.0.0.1, "
                    "[::1]); add the name to RAG_API_ALLOWED_HOSTS (comma-separated, * for any)"
                )
                assert answer.headers["x-frame-options"] == "DENY"
    finally:
        live.stop()
