"""Fuzz every field of every request body (and every query and path parameter) of the API.

In-process (starlette's TestClient: the real app, one ASGI call per case) against the real PostgreSQL
of the server tests. Each case starts from a valid request and replaces ONE field, at any depth
(filters, metadata, overrides, preset edits, documents, uploads, deletes, jobs), with a hostile value:
deep nesting, integers beyond every column type, non-finite and extreme floats, NUL and lone
surrogates, long texts, big arrays, wrong types. Raw bodies add malformed, non-UTF-8, deeper-than-the-
parser JSON and wrong content types. Every answer must be below 500; every error one JSON line that
names the field it was about (or the body, for the raw cases). ``CASES`` add up to more than 10,000.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import hypothesis
import pytest
from hypothesis import strategies as st
from sqlalchemy import text
from starlette.testclient import TestClient

from rag_service.db.database import Database
from rag_service.db.search_request import FILTER_KEYS
from rag_service.knobs import PRESET_KNOBS
from rag_service.server import ServerConfig, create_app
from rag_service.service import UniversalRAGService
from tests.server.conftest import WRITE_TOKEN

pytestmark = pytest.mark.slow  # 10,600 cases: a long run, in `make test`, not `make test-fast`

#: examples per operation; 10,600 in all
CASES = {"retrieve": 4000, "preset": 2000, "documents": 2000, "upload": 600, "delete": 500, "jobs": 500,
         "paths": 500, "raw": 500}
FUZZ_PRESET = "fuzz_preset"
FUZZ_COLLECTION = "fuzz"


def _nest(depth: int, leaf: object, as_list: bool) -> object:
    value = leaf
    for level in range(depth):
        value = [value] if as_list and level % 2 else {"k": value}
    return value


_EXTREME = [2**63, 2**63 - 1, -(2**63) - 1, 2**64, 10**20, 99999999999999999999, 2**31, -(2**31) - 1, -1, 0,
            10**300, 1e308, -1e308, 5e-324, float("nan"), float("inf"), float("-inf")]
_TEXTS = ["", " ", "\x00", "a\x00b", "\ud800", "x\udfff", "é" * 3000, "x" * 9000, "../../etc/passwd", "%00",
          "'; DROP TABLE documents; --", "\u202e\u0645\u0631\u062d\u0628\u0627", "🙂" * 100, "a" * 300]

#: a value that may break a field: every shape the issue found, and the neighbours of each
HOSTILE: st.SearchStrategy[Any] = st.one_of(
    st.sampled_from(_EXTREME),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(),
    st.sampled_from(_TEXTS),
    st.text(max_size=40),
    st.booleans(),
    st.none(),
    st.builds(_nest, st.integers(10, 700), st.sampled_from([1, "x", None, 2**70]), st.booleans()),
    st.lists(st.one_of(st.integers(), st.text(max_size=5)), max_size=30),
    st.dictionaries(st.text(max_size=8), st.one_of(st.integers(), st.text(max_size=5), st.none()), max_size=8),
    st.integers(1000, 25_000).map(lambda n: list(range(n))),
    st.integers(1000, 25_000).map(lambda n: {f"k{i}": i for i in range(n)}),
)

_SETTINGS = {"deadline": None, "database": None, "derandomize": True,
             "suppress_health_check": list(hypothesis.HealthCheck)}


@pytest.fixture(scope="module")
def client(server_service: UniversalRAGService, server_database: Database) -> Iterator[TestClient]:
    """The real app around the module's service, in-process; a preset row of its own to edit."""
    with server_database.transaction() as session:
        session.execute(text(
            "INSERT INTO rag_configurations (context_type, expand_query, return_parents, diversity, max_chunks, "
            "max_tokens) VALUES (:name, false, false, 0.1, 5, 1500) ON CONFLICT DO NOTHING"), {"name": FUZZ_PRESET})
    config = ServerConfig(token=WRITE_TOKEN, read_token=None, job_threshold_chars=20_000)  # type: ignore[arg-type]
    app = create_app(server_service, config)
    auth = {"Authorization": f"Bearer {WRITE_TOKEN}"}
    # base_url: TestClient's default Host, testserver, is no name of this server (server/hosts.py)
    with TestClient(app, base_url="http://localhost", raise_server_exceptions=True, headers=auth) as test:
        yield test
        app.state.rag.jobs.shutdown(wait=True)  # no job may outlive the module's database


@pytest.fixture(autouse=True)
def no_unexpected_errors(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """No case may reach the one-line log of an unexpected error."""
    with caplog.at_level(logging.ERROR, logger="rag_service"):
        yield
    unexpected = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert not unexpected, unexpected[:3]


def check(response: Any, *names: str) -> None:
    """Below 500; an error is ``{success: false, error: {code, message}}`` with one line naming a field."""
    assert response.status_code < 500, (response.status_code, response.text[:500])
    if response.status_code < 400:
        return
    body = response.json()
    message = body["error"]["message"]
    assert body["success"] is False and message.strip() and "\n" not in message, body
    if response.status_code == 422 and names:
        assert any(name in message for name in names), (names, message[:300])


def send(client: TestClient, method: str, url: str, body: object) -> Any:
    """``body`` as JSON the way Python writes it: ASCII escapes (lone surrogates too), NaN and Infinity."""
    raw = json.dumps(body).encode()
    return client.request(method, url, content=raw, headers={"Content-Type": "application/json"})


def replace(base: dict[str, Any], path: tuple[str, ...], value: object) -> dict[str, Any]:
    """A copy of ``base`` with the value at ``path`` (keys of nested objects, or list indexes) replaced."""
    if len(path) == 1:
        return {**base, path[0]: value}
    inner = base.get(path[0])
    if isinstance(inner, list):
        index = int(path[1])
        items = list(inner)
        items[index] = value if len(path) == 2 else replace(items[index], path[2:], value)
        return {**base, path[0]: items}
    return {**base, path[0]: replace(inner if isinstance(inner, dict) else {}, path[1:], value)}


def names_of(path: tuple[str, ...]) -> tuple[str, ...]:
    """Words an error about ``path`` may name it by: each key (singular too), the body for the whole."""
    words = [p for p in path if not p.isdigit()]
    return (*words, *(w.rstrip("s") for w in words), "body")


RETRIEVE_BASE = {"query": "how are backups restored?", "context": "agent"}
RETRIEVE_FIELDS = [("query",), ("context",), ("collection",), ("return_formatted",), ("filters",),
                   *((name,) for name in PRESET_KNOBS), *(("filters", key) for key in FILTER_KEYS),
                   ("filters", "metadata", "team"), ("filters", "headers", "h1"), ("extra_field",)]


@hypothesis.settings(max_examples=CASES["retrieve"], **_SETTINGS)  # type: ignore[arg-type]
@hypothesis.given(path=st.sampled_from(RETRIEVE_FIELDS), value=HOSTILE, context=st.sampled_from(["agent", FUZZ_PRESET]))
def test_retrieve(client: TestClient, path: tuple[str, ...], value: object, context: str) -> None:
    body = replace({**RETRIEVE_BASE, "context": context}, path, value)
    check(send(client, "POST", "/api/rag/retrieve", body), *names_of(path), "filter")


PRESET_BASE = {"max_chunks": 5, "diversity": 0.2}


@hypothesis.settings(max_examples=CASES["preset"], **_SETTINGS)  # type: ignore[arg-type]
@hypothesis.given(name=st.sampled_from([*PRESET_KNOBS, "context_type", "extra"]), value=HOSTILE)
def test_preset_edit(client: TestClient, name: str, value: object) -> None:
    check(send(client, "PUT", f"/api/presets/{FUZZ_PRESET}", {**PRESET_BASE, name: value}), name, "vector_weight")


DOCUMENTS_BASE = {"collection": FUZZ_COLLECTION, "strategy": "recursive",
                  "documents": [{"source": "kites.md", "title": "Kites", "text": "A kite flies on the wind."}]}
DOCUMENTS_FIELDS = [("collection",), ("strategy",), ("force",), ("documents",), ("documents", "0"),
                    ("documents", "0", "source"), ("documents", "0", "title"), ("documents", "0", "text"),
                    ("documents", "0", "metadata"), ("extra",)]


@hypothesis.settings(max_examples=CASES["documents"], **_SETTINGS)  # type: ignore[arg-type]
@hypothesis.given(path=st.sampled_from(DOCUMENTS_FIELDS), value=HOSTILE)
def test_documents(client: TestClient, path: tuple[str, ...], value: object) -> None:
    check(send(client, "POST", "/api/documents", replace(DOCUMENTS_BASE, path, value)), *names_of(path))


_FORM_TEXT = st.one_of(st.sampled_from([t for t in _TEXTS if "\ud800" not in t and "\udfff" not in t]),
                       st.text(max_size=40).filter(lambda t: not any("\ud800" <= c <= "\udfff" for c in t)))


@hypothesis.settings(max_examples=CASES["upload"], **_SETTINGS)  # type: ignore[arg-type]
@hypothesis.given(field=st.sampled_from(["collection", "strategy", "filename", "content", "extra"]),
                  value=_FORM_TEXT, content=st.binary(max_size=300))
def test_upload(client: TestClient, field: str, value: str, content: bytes) -> None:
    data = {"collection": FUZZ_COLLECTION, "strategy": "recursive"}
    filename, body = "notes.md", b"# Notes\n\nThe harbour tides rise twice a day."
    if field == "filename":
        filename = value
    elif field == "content":
        body = content
    else:
        data[field] = value
    response = client.post("/api/documents", data=data, files=[("files", (filename, body, "text/markdown"))])
    check(response, field, "file", "collection", "strategy")


@hypothesis.settings(max_examples=CASES["delete"], **_SETTINGS)  # type: ignore[arg-type]
@hypothesis.given(field=st.sampled_from(["source", "collection"]), value=_FORM_TEXT)
def test_delete(client: TestClient, field: str, value: str) -> None:
    params = {"source": "nothing-here.md", "collection": FUZZ_COLLECTION, field: value}
    check(client.delete("/api/documents", params=params), field)


@hypothesis.settings(max_examples=CASES["jobs"], **_SETTINGS)  # type: ignore[arg-type]
@hypothesis.given(value=HOSTILE, whole=st.booleans())
def test_reindex_jobs(client: TestClient, value: object, whole: bool) -> None:
    body = value if whole else {"collection": value}
    response = send(client, "POST", "/api/documents/reindex-all", body)
    check(response, "collection", "body", *(value if whole and isinstance(value, dict) else ()))
    if response.status_code == 202:
        check(client.get(response.headers["location"]))


@hypothesis.settings(max_examples=CASES["paths"], **_SETTINGS)  # type: ignore[arg-type]
@hypothesis.given(route=st.sampled_from(["/api/jobs/", "/api/presets/"]),
                  value=st.one_of(_FORM_TEXT, st.sampled_from(["%00", "%ff%fe", "%ed%a0%80", "..%2f", "a" * 5000])))
def test_paths(client: TestClient, route: str, value: str) -> None:
    path = route + quote(value, safe="%")  # the raw percent-escapes stay raw
    check(client.get(path), "job", "context")
    check(client.put(path, json={"max_chunks": 3}), "context")


_RAW = [b"{", b'{"query": "x",}', b"\xff\xfe{}", b"[" * 200_000 + b"]" * 200_000, b'{"query": ' + b"1" * 5000 + b"}",
        b"[]", b"null", b'"text"', b"17", b'{"query": NaN}', b'{"query": "x", "max_chunks": Infinity}', b"",
        b'{"query": "\\ud800"}', b'{"query": 1, "query": "x"}', b"\x00", b'{"query": "x"}' * 100]


@hypothesis.settings(max_examples=CASES["raw"], **_SETTINGS)  # type: ignore[arg-type]
@hypothesis.given(
    route=st.sampled_from([("POST", "/api/rag/retrieve"), ("POST", "/api/documents"),
                           ("PUT", f"/api/presets/{FUZZ_PRESET}"), ("POST", "/api/documents/reindex-all")]),
    raw=st.one_of(st.sampled_from(_RAW), st.binary(max_size=200)),
    content_type=st.sampled_from(["application/json", None, "text/plain", "application/x-www-form-urlencoded",
                                  "application/json; charset=latin-1", "multipart/form-data; boundary=x"]),
)
def test_raw_bodies(client: TestClient, route: tuple[str, str], raw: bytes, content_type: str | None) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    response = client.request(route[0], route[1], content=raw, headers=headers)
    check(response, "body", "JSON", "Content-Type", "content type", "multipart", "query", "collection", "max_chunks",
          "documents")


def test_the_fuzz_budget_is_over_ten_thousand() -> None:
    assert sum(CASES.values()) >= 10_000


def test_the_found_inputs_name_their_field(client: TestClient) -> None:
    deep: object = 1
    for _ in range(500):
        deep = {"a": deep}
    for filters, field in (({"document_id": 99999999999999999999}, "document_id"), ({"metadata": deep}, "metadata")):
        response = client.post("/api/rag/retrieve", json={"query": "backups", "filters": filters})
        assert response.status_code == 422, response.text
        assert field in response.json()["error"]["message"]
    marker = uuid.uuid4().hex  # the same two shapes in a document's metadata are refused too
    response = client.post("/api/rag/retrieve", json={"query": marker, "filters": {"metadata": {"n": 2**64}}})
    assert response.status_code == 200, response.text


def test_a_body_that_is_no_utf8_json_says_what_is_wrong_in_its_own_terms(client: TestClient) -> None:
    """Python's own words leaked: "use sys.set_int_max_str_digits() to increase the limit"."""
    headers = {"content-type": "application/json"}
    latin = client.post("/api/rag/retrieve", content='{"query": "café"}'.encode("latin-1"), headers=headers)
    assert latin.status_code == 400 and latin.json()["error"]["message"].startswith(
        "body is not UTF-8 (byte 0xe9 at offset 14); encode it as UTF-8 and send one JSON object"
    )
    digits = client.post("/api/rag/retrieve", content=b'{"query": "x", "max_chunks": ' + b"1" * 5000 + b"}",
                         headers=headers)  # fmt: skip
    message = digits.json()["error"]["message"]
    assert digits.status_code == 400 and message.startswith("body holds a number of over 4300 digits, which no field")
    assert "sys." not in message


def test_a_nul_in_a_url_is_the_one_line_every_route_says(client: TestClient) -> None:
    """Query and path values said "String should match pattern '^[^\\x00]*$'"."""
    expected = "must not contain NUL (\\x00) characters; remove them"
    deleted = client.delete("/api/documents", params={"collection": "kb", "source": "a\x00b"})
    edited = client.put("/api/presets/a%00b", json={"max_chunks": 3})
    shown = client.get("/api/presets/a%00b")
    assert deleted.json()["error"]["message"] == f"query.source: {expected}"
    assert edited.json()["error"]["message"] == f"path.context: {expected}"
    assert shown.json()["error"]["message"] == f"context: {expected}"
    assert {deleted.status_code, edited.status_code, shown.status_code} == {422}
