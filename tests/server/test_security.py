"""Tokens, read-only mode, body limits and CORS, against real servers."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator

import httpx
import pytest

from rag_service.errors import ConfigurationError
from rag_service.server.config import load_server_config
from tests.server.conftest import READ_TOKEN, WRITE_TOKEN, LiveServer

WRITES: list[tuple[str, str, dict[str, object]]] = [
    ("POST", "/api/documents", {"json": {"documents": [{"source": "a.txt", "text": "x" * 80}]}}),
    ("POST", "/api/documents/reindex-all", {"json": {"collection": "nothing-here"}}),
    ("DELETE", "/api/documents", {"params": {"source": "a.txt"}}),
    ("PUT", "/api/presets/search", {"json": {"max_chunks": 12}}),
]
READS: list[tuple[str, str, dict[str, object]]] = [
    ("POST", "/api/rag/retrieve", {"json": {"query": "backups"}}),
    ("GET", "/api/collections", {}),
    ("GET", "/api/presets", {}),
    ("GET", "/metrics", {}),
]


def _status(client: httpx.Client, method: str, path: str, kwargs: dict[str, object]) -> int:
    return client.request(method, path, **kwargs).status_code  # type: ignore[arg-type]


def test_writes_need_the_write_token(live: LiveServer) -> None:
    for token in (None, "wrong", WRITE_TOKEN[:-1], WRITE_TOKEN + "x"):
        with live.client(token) as client:
            for method, path, kwargs in WRITES:
                response = client.request(method, path, **kwargs)  # type: ignore[arg-type]
                assert response.status_code == 401, (token, path, response.text)
                assert response.headers["www-authenticate"] == "Bearer"
                assert "RAG_API_TOKEN" in response.json()["error"]["message"]
    with live.client(WRITE_TOKEN) as client:
        # past the token: reindex-all of a collection that does not exist is 404 (not 401/403)
        assert [_status(client, m, p, k) for m, p, k in WRITES] == [200, 404, 200, 200]


def test_without_a_token_the_server_is_read_only(serve: Callable[..., LiveServer]) -> None:
    read_only = serve(token=None)
    with read_only.client(WRITE_TOKEN) as client:
        for method, path, kwargs in WRITES:
            response = client.request(method, path, **kwargs)  # type: ignore[arg-type]
            assert response.status_code == 403 and "read-only" in response.json()["error"]["message"]
        assert all(_status(client, m, p, k) == 200 for m, p, k in READS)


def test_read_token_guards_reads(serve: Callable[..., LiveServer]) -> None:
    guarded = serve(read_token=READ_TOKEN)
    with guarded.client() as anonymous, guarded.client("nope") as wrong:
        for method, path, kwargs in READS:
            assert _status(anonymous, method, path, kwargs) == 401
            assert _status(wrong, method, path, kwargs) == 401
        assert anonymous.get("/healthz").status_code == 200  # liveness stays open for probes
    with guarded.client(READ_TOKEN) as reader, guarded.client(WRITE_TOKEN) as writer:
        assert all(_status(reader, m, p, k) == 200 for m, p, k in READS)
        assert all(_status(writer, m, p, k) == 200 for m, p, k in READS)
        assert _status(reader, *WRITES[3]) == 401  # the read token does not grant writes


def test_bodies_over_the_limit_get_413(serve: Callable[..., LiveServer]) -> None:
    small = serve(max_body_bytes=2048, max_upload_bytes=4096)
    with small.client(WRITE_TOKEN) as client:
        big = client.post("/api/rag/retrieve", json={"query": "x", "filters": {"source": "y" * 5000}})
        assert big.status_code == 413 and big.json()["error"]["code"] == "too_large"

        def chunks() -> Iterator[bytes]:  # no Content-Length: the limit applies while reading
            yield b'{"query": "'
            for _ in range(10):
                yield b"z" * 500
            yield b'"}'

        streamed = client.post("/api/rag/retrieve", content=chunks(), headers={"content-type": "application/json"})
        assert streamed.status_code == 413, streamed.text
        upload = client.post("/api/documents", files=[("files", ("big.md", b"# Big\n\n" + b"word " * 2000))])
        assert upload.status_code == 413
        assert client.post("/api/rag/retrieve", json={"query": "backups"}).status_code == 200


def test_cors_is_off_unless_configured(live: LiveServer, serve: Callable[..., LiveServer]) -> None:
    origin = {"Origin": "https://app.example"}
    with live.client() as client:
        assert "access-control-allow-origin" not in client.get("/api/presets", headers=origin).headers
    allowed = serve(cors_origins=["https://app.example"])
    with allowed.client() as client:
        response = client.get("/api/presets", headers=origin)
        assert response.headers["access-control-allow-origin"] == "https://app.example"
        other = client.get("/api/presets", headers={"Origin": "https://evil.example"})
        assert "access-control-allow-origin" not in other.headers


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("RAG_API_TOKEN", "tok\n", "RAG_API_TOKEN ends with a newline, which no Authorization header can carry"),
        ("RAG_API_TOKEN", " tok", "RAG_API_TOKEN starts with whitespace"),
        ("RAG_API_READ_TOKEN", "   ", "RAG_API_READ_TOKEN is only whitespace"),
        ("RAG_API_READ_TOKEN", "to\nk", "RAG_API_READ_TOKEN holds a control character"),
    ],
)
def test_a_token_no_header_can_carry_refuses_to_start(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, says: str
) -> None:
    """A secret written from a file ends with a newline: the server started, and every request got 401."""
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigurationError) as refused:
        load_server_config()
    assert str(refused.value).startswith(says) and "\n" not in str(refused.value)
    monkeypatch.setenv(variable, "")  # empty stays "unset"
    config = load_server_config()
    assert (config.write_token if variable == "RAG_API_TOKEN" else config.reads_token) is None


def _unfinished_chunked_upload(live: LiveServer, token: str | None) -> bytes:
    """What the server answers to the head and first MiB of a chunked multipart upload whose body never ends."""
    host, port = live.url.removeprefix("http://").split(":")
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        head = "POST /api/documents HTTP/1.1\r\nHost: localhost\r\nContent-Type: multipart/form-data; boundary=zz\r\n"
        sock.sendall(f"{head}{auth}Transfer-Encoding: chunked\r\n\r\n".encode())
        chunk = b"a" * (1 << 20)
        sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        try:
            return sock.recv(4096)
        except TimeoutError:
            return b""


def test_an_upload_without_the_write_token_is_refused_before_its_body(
    live: LiveServer, serve: Callable[..., LiveServer]
) -> None:
    """The 401 came only after up to RAG_API_MAX_UPLOAD_BYTES of chunked body were held in memory."""
    for token in (None, "wrong"):
        answer = _unfinished_chunked_upload(live, token)
        assert answer.startswith(b"HTTP/1.1 401 "), answer[:200]
        assert b"writes need 'Authorization: Bearer <RAG_API_TOKEN>'" in answer
    assert _unfinished_chunked_upload(serve(token=None), WRITE_TOKEN).startswith(b"HTTP/1.1 403 ")
    assert _unfinished_chunked_upload(live, WRITE_TOKEN) == b"", "with the token, the server waits for the body"

    def chunks() -> Iterator[bytes]:  # a chunked upload with the token is still read and indexed
        yield b'--zz\r\nContent-Disposition: form-data; name="files"; filename="chunked.md"\r\n\r\n'
        yield b"# Chunked\n\nA chunked upload about lighthouses.\r\n--zz--\r\n"

    with live.client(WRITE_TOKEN) as client:
        response = client.post(
            "/api/documents", content=chunks(), headers={"content-type": "multipart/form-data; boundary=zz"}
        )
    assert response.status_code == 200 and response.json()["report"]["added"] == 1, response.text


def test_answers_carry_security_and_caching_headers(live: LiveServer) -> None:
    """The page (it takes a token) could be framed; API answers could be stored by a shared cache; the script,
    with only Last-Modified, could be served stale by a browser after an upgrade."""
    with live.client() as client:
        answers = {path: client.get(path) for path in ("/", "/static/search.js", "/api/collections", "/healthz")}
        answers["401"] = client.put("/api/presets/search", json={"max_chunks": 6})
    for name, response in answers.items():
        assert response.headers["x-content-type-options"] == "nosniff", name
        assert response.headers["x-frame-options"] == "DENY", name
        assert response.headers["referrer-policy"] == "no-referrer", name
        assert "frame-ancestors 'none'" in response.headers["content-security-policy"], name
    assert answers["/"].headers["cache-control"] == answers["/static/search.js"].headers["cache-control"] == "no-cache"
    assert answers["/static/search.js"].headers["etag"]  # no-cache: revalidated by it, each time
    assert answers["/api/collections"].headers["cache-control"] == answers["401"].headers["cache-control"] == "no-store"
