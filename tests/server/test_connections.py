"""Slow request heads are cut and connections are capped (``server/connections.py``), on real uvicorn servers.

Deterministic: every wait below is a bound the server must beat by far (a deadline of 1 s, waits of 20 s),
and the one wait that must not cut a request outlasts its deadline many times over."""

from __future__ import annotations

import json
import socket
import time

from rag_service.server.config import ServerConfig
from rag_service.service import UniversalRAGService
from tests.server.conftest import LiveServer, start_server

HEAD = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n"


def _connect(live: LiveServer) -> socket.socket:
    host, port = live.url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=20)


def _until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (a timeout fails the test)."""
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    return received


def _answer(sock: socket.socket) -> bytes:
    """One whole answer with a content-length body, on a connection kept open."""
    received = b""
    while b"\r\n\r\n" not in received:
        chunk = sock.recv(65536)
        assert chunk, f"the server closed the connection after {received!r}"
        received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    length = int(next(line for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:"))[15:])
    while len(body) < length:
        body += sock.recv(65536)
    return head + b"\r\n\r\n" + body


def test_a_slow_or_silent_head_is_cut_and_a_slow_body_is_not(server_service: UniversalRAGService) -> None:
    config = ServerConfig(token=None, header_timeout_s=1.0)  # type: ignore[call-arg]
    live = start_server(server_service, config, bounded=True)
    try:
        with _connect(live) as slowloris, _connect(live) as silent:
            slowloris.sendall(HEAD)  # a head that never ends
            answer = _until_closed(slowloris)
            assert answer.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), answer
            assert answer.endswith(
                b"the request head did not arrive within 1 s (RAG_API_HEADER_TIMEOUT_S); send it at once\n"
            )
            assert _until_closed(silent) == b""  # connected, sent nothing: closed without a word
        with _connect(live) as kept:  # a kept-alive connection gets the deadline again for its next head
            kept.sendall(HEAD + b"\r\n")
            assert _answer(kept).startswith(b"HTTP/1.1 200 ")
            kept.sendall(HEAD)
            assert _until_closed(kept).startswith(b"HTTP/1.1 408 ")
        with _connect(live) as patient:  # a head in time, then a body 4 deadlines later: answered
            body = json.dumps({"query": "backups", "max_chunks": 1}).encode()
            patient.sendall(
                b"POST /api/rag/retrieve HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n" % len(body)
            )
            time.sleep(4.0)
            patient.sendall(body)
            assert _answer(patient).startswith(b"HTTP/1.1 200 ")
    finally:
        live.stop()


def test_past_max_connections_requests_get_503(server_service: UniversalRAGService) -> None:
    config = ServerConfig(token=None, max_connections=3)  # type: ignore[call-arg]
    live = start_server(server_service, config, bounded=True)
    try:
        with _connect(live) as first:  # uvicorn answers 503 once the open connections reach the limit
            first.sendall(HEAD + b"\r\n")
            assert _answer(first).startswith(b"HTTP/1.1 200 ")
            with _connect(live) as second:
                second.sendall(HEAD + b"\r\n")
                assert _answer(second).startswith(b"HTTP/1.1 200 ")
                with _connect(live) as third:
                    third.sendall(HEAD + b"\r\n")
                    assert _until_closed(third).startswith(b"HTTP/1.1 503 ")
    finally:
        live.stop()
